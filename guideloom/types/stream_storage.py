# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for the stream-storage bases."""

from guideloom.storage.abstract import (
    AsyncContextManager,
    StreamStorageAbstract,
    StreamStorageAsyncReaderAbstract,
    StreamStorageSyncReaderAbstract,
    StreamStorageSyncWriterAbstract,
    SyncContextManager,
)

__all__ = [
    "AsyncContextManager",
    "StreamStorageAbstract",
    "StreamStorageAsyncReaderAbstract",
    "StreamStorageSyncReaderAbstract",
    "StreamStorageSyncWriterAbstract",
    "SyncContextManager",
]
