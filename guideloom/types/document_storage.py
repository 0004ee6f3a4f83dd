# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for the document-storage bases."""

from guideloom.storage.abstract import (
    DocumentStorageAbstract,
    DocumentStorageAsyncReaderAbstract,
    DocumentStorageSyncReaderAbstract,
    DocumentStorageSyncWriterAbstract,
)

__all__ = [
    "DocumentStorageAbstract",
    "DocumentStorageAsyncReaderAbstract",
    "DocumentStorageSyncReaderAbstract",
    "DocumentStorageSyncWriterAbstract",
]
