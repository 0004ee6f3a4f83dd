"""GuideLoom 1.1's ``guideloom.storage_format``: formats, defined in guideloom.storage.formats."""

from guideloom.storage.formats import DocumentPickleFormat, StreamNumpyFormat

__all__ = ["DocumentPickleFormat", "StreamNumpyFormat"]
