"""The read path, layered bottom-up; each layer knows only the ones below it.

1. bytes: :mod:`~guideloom.read.byte_source` (the ``ByteSource`` protocol, the local file,
   :func:`~guideloom.read.byte_source.source_for`), :mod:`~guideloom.read.http`,
   :mod:`~guideloom.read.fsspec_source`, :mod:`~guideloom.read.handles` (shared archive
   descriptors), :mod:`~guideloom.read.ranges`, :mod:`~guideloom.read.wrappers` (speed tricks
   over any source), :mod:`~guideloom.read.metacache` (the on-disk metadata cache),
   :mod:`~guideloom.read.fileobj` (the file object h5py reads);
2. archives: :mod:`~guideloom.read.zipmember` (opening one zip member: header, defect, CRC-32,
   bounded inflate);
3. HDF5: :mod:`~guideloom.read.hdf5` (native reader or h5py, the confinement checks, the
   timestep selection);
4. records: :mod:`~guideloom.read.records` (the one ``RecordReader``) and
   :mod:`~guideloom.read.readahead`;
5. roots: :func:`~guideloom.read.roots.open_root` turns a folder, a URL or a DOI into a
   :class:`~guideloom.read.roots.DataRoot`, which reads its small files, scans its experiments
   into locations (:mod:`~guideloom.read.locations`; zip directories parsed by
   :mod:`~guideloom.read.zipdir` from any byte source) and fingerprints them.

Outside this package no module asks whether data is local or remote.
"""
