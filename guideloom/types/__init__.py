"""GuideLoom 1.1's ``guideloom.types``: the format protocols, abstract base classes and aliases.

The classes live in :mod:`guideloom.storage.types` (format protocols) and
:mod:`guideloom.storage.abstract` (abstract bases); this module keeps 1.1's import path.
"""

from __future__ import annotations

from typing import Any, Union

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
    StreamStorageFormat,
    StreamWithMetaStorageFormat,
)

#: Any of the three format protocols (GuideLoom 1.1's ``StorageFormat[InT, OutT]``).
StorageFormat = Union[  # noqa: UP007 - a runtime alias
    StreamWithMetaStorageFormat[Any, Any, Any],
    StreamStorageFormat[Any, Any, Any],
    DocumentStorageFormat[Any, Any],
]

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
