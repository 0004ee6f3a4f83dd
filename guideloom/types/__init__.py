# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's ``guideloom.types``: the format protocols, abstract base classes and
aliases, defined in :mod:`guideloom.storage.abstract` (abstract bases) and
:mod:`guideloom.storage.types` (format protocols)."""

from guideloom.storage.abstract import (
    AsyncContextManager,
    DatasetAbstract,
    DatasetAsyncReaderAbstract,
    DatasetSyncReaderAbstract,
    DocumentStorageAbstract,
    DocumentStorageAsyncReaderAbstract,
    DocumentStorageSyncReaderAbstract,
    DocumentStorageSyncWriterAbstract,
    IOAsyncReaderAbstract,
    IOReaderAbstract,
    IOSyncReaderAbstract,
    StatefulDataLoaderStateDict,
    StorageBufferTypes,
    StreamStorageAbstract,
    StreamStorageAsyncReaderAbstract,
    StreamStorageSyncReaderAbstract,
    StreamStorageSyncWriterAbstract,
    SyncContextManager,
    UserBufferTypes,
    Vector,
)
from guideloom.storage.types import (
    DocumentStorageFormat,
    StorageFormat,
    StreamStorageFormat,
    StreamWithMetaStorageFormat,
)

__all__ = [
    "AsyncContextManager",
    "DatasetAbstract",
    "DatasetAsyncReaderAbstract",
    "DatasetSyncReaderAbstract",
    "DocumentStorageAbstract",
    "DocumentStorageAsyncReaderAbstract",
    "DocumentStorageFormat",
    "DocumentStorageSyncReaderAbstract",
    "DocumentStorageSyncWriterAbstract",
    "IOAsyncReaderAbstract",
    "IOReaderAbstract",
    "IOSyncReaderAbstract",
    "StatefulDataLoaderStateDict",
    "StorageBufferTypes",
    "StorageFormat",
    "StreamStorageAbstract",
    "StreamStorageAsyncReaderAbstract",
    "StreamStorageFormat",
    "StreamStorageSyncReaderAbstract",
    "StreamStorageSyncWriterAbstract",
    "StreamWithMetaStorageFormat",
    "SyncContextManager",
    "UserBufferTypes",
    "Vector",
]
