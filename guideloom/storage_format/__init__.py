# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's ``guideloom.storage_format``: the storage formats, defined in
:mod:`guideloom.storage.formats`."""

from guideloom.storage.formats import DocumentPickleFormat, StreamNumpyFormat

__all__ = ["DocumentPickleFormat", "StreamNumpyFormat"]
