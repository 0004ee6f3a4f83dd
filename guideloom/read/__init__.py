"""The read path, layered bottom-up: bytes, zip archives, HDF5, records, and the data roots.

Roots (:mod:`guideloom.read.roots`): :func:`~guideloom.read.roots.open_root` turns a folder, a
URL or a DOI into a :class:`~guideloom.read.roots.DataRoot`, which reads its small files,
scans its experiments into locations (:mod:`guideloom.read.locations`) and fingerprints them.
Zip directories (:mod:`guideloom.read.zipdir`) are parsed from any byte source. Outside this
package no module asks whether data is local or remote.
"""
