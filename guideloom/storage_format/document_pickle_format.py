# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for :class:`~guideloom.storage.formats.DocumentPickleFormat`."""

from guideloom.storage.abstract import StorageBufferTypes
from guideloom.storage.formats import DocumentPickleFormat
from guideloom.storage.types import DocumentStorageFormat

__all__ = ["DocumentPickleFormat", "DocumentStorageFormat", "StorageBufferTypes"]
