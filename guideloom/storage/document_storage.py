# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for :class:`~guideloom.storage.DocumentStorage`."""

from guideloom.filesystem import FileSystemDocument
from guideloom.storage.abstract import (
    DocumentStorageAbstract,
    DocumentStorageAsyncReaderAbstract,
    DocumentStorageSyncReaderAbstract,
    DocumentStorageSyncWriterAbstract,
    IOReaderAbstract,
    Vector,
)
from guideloom.storage.document import DocumentStorage
from guideloom.storage.io import SeekIO
from guideloom.storage.types import DocumentStorageFormat

__all__ = [
    "DocumentStorage",
    "DocumentStorageAbstract",
    "DocumentStorageAsyncReaderAbstract",
    "DocumentStorageFormat",
    "DocumentStorageSyncReaderAbstract",
    "DocumentStorageSyncWriterAbstract",
    "FileSystemDocument",
    "IOReaderAbstract",
    "SeekIO",
    "Vector",
]
