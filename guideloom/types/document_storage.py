# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for the document-storage bases."""

from guideloom.storage.abstract import (
    AsyncContextManager,
    DocumentStorageAbstract,
    DocumentStorageAsyncReaderAbstract,
    DocumentStorageSyncReaderAbstract,
    DocumentStorageSyncWriterAbstract,
    SyncContextManager,
    Vector,
)

__all__ = [
    "AsyncContextManager",
    "DocumentStorageAbstract",
    "DocumentStorageAsyncReaderAbstract",
    "DocumentStorageSyncReaderAbstract",
    "DocumentStorageSyncWriterAbstract",
    "SyncContextManager",
    "Vector",
]
