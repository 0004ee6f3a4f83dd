# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for the dataset bases."""

from guideloom.storage.abstract import (
    AsyncContextManager,
    DatasetAbstract,
    DatasetAsyncReaderAbstract,
    DatasetSyncReaderAbstract,
    DocumentStorageAbstract,
    StreamStorageAbstract,
    SyncContextManager,
)

__all__ = [
    "AsyncContextManager",
    "DatasetAbstract",
    "DatasetAsyncReaderAbstract",
    "DatasetSyncReaderAbstract",
    "DocumentStorageAbstract",
    "StreamStorageAbstract",
    "SyncContextManager",
]
