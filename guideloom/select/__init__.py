"""The select layer: what a job reads, before any experiment byte is read.

:mod:`~guideloom.select.manifest` parses the Croissant manifest into a ``Dataset`` (field map,
index table, views), :mod:`~guideloom.select.index` types the index table,
:mod:`~guideloom.select.selection` chooses a job's experiments and
:mod:`~guideloom.select.views` describes a dataset's views. The package itself imports nothing.
"""
