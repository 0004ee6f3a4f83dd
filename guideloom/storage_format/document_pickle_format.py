"""GuideLoom 1.1's import path for :class:`~guideloom.storage.formats.DocumentPickleFormat`."""

from guideloom.storage.formats import DocumentPickleFormat

__all__ = ["DocumentPickleFormat"]
