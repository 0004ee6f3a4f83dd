"""GuideLoom 1.1's abstract base classes for storages, readers, writers, datasets and file I/O.

Code written for GuideLoom 1.1 imports these from :mod:`guideloom.types` to type its own
storages or to check ``isinstance(storage, StreamStorageAbstract)``. guideloom's own classes are
registered as (virtual) subclasses, so such checks hold for them too, and a user's subclass
that implements the abstract methods works wherever guideloom takes the 1.1 interface.
"""

from __future__ import annotations

import asyncio
import pathlib
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypedDict, Union

import numpy as np

try:  # PEP 696 defaults (``IOReaderAbstract`` alone means paths are ``PurePath``)
    from typing_extensions import TypeVar
except ImportError:  # pragma: no cover - typing_extensions ships with zarr and numcodecs
    from typing import TypeVar  # type: ignore[assignment]

__all__ = [
    "AsyncContextManager",
    "Closed",
    "DatasetAbstract",
    "DatasetAsyncReaderAbstract",
    "DatasetSyncReaderAbstract",
    "DocumentStorageAbstract",
    "DocumentStorageAsyncReaderAbstract",
    "DocumentStorageSyncReaderAbstract",
    "DocumentStorageSyncWriterAbstract",
    "IOAsyncReaderAbstract",
    "IOReaderAbstract",
    "IOSyncReaderAbstract",
    "StatefulDataLoaderStateDict",
    "StorageBufferTypes",
    "StreamStorageAbstract",
    "StreamStorageAsyncReaderAbstract",
    "StreamStorageSyncReaderAbstract",
    "StreamStorageSyncWriterAbstract",
    "SyncContextManager",
    "UserBufferTypes",
    "Vector",
]

InT = TypeVar("InT", default=Any)
OutT = TypeVar("OutT", default=Any)
PathT = TypeVar("PathT", bound=pathlib.PurePath, default=pathlib.PurePath)

#: What a format's ``pack`` may return for a document or payload.
UserBufferTypes = Union[bytearray, bytes, memoryview]  # noqa: UP007 - a runtime alias
#: What a storage hands to ``unpack``.
StorageBufferTypes = Union[bytearray, memoryview]  # noqa: UP007 - a runtime alias
#: A one-dimensional NumPy array (``Vector[np.int64]``).
Vector = np.ndarray


class Closed:
    """What the asyncio readers' ``close()`` returns: it has already closed, awaiting is optional.

    guideloom's own code calls ``reader.close()``; GuideLoom 1.1 code awaits it.
    """

    __slots__ = ()

    def __await__(self) -> Any:
        return
        yield  # pragma: no cover - makes this a generator


class SyncContextManager(ABC):
    """``with obj:`` calls :meth:`open` on entry and :meth:`close` on exit."""

    def __enter__(self) -> Any:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @abstractmethod
    def open(self) -> None:
        """Acquire what the object needs (files, readers)."""

    @abstractmethod
    def close(self) -> None:
        """Release it."""


class AsyncContextManager(ABC):
    """``async with obj:`` awaits :meth:`open` on entry and :meth:`close` on exit."""

    async def __aenter__(self) -> Any:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @abstractmethod
    async def open(self) -> None:
        """Acquire what the object needs."""

    @abstractmethod
    async def close(self) -> None:
        """Release it."""


# --------------------------------------------------------------------------- file I/O
class IOSyncReaderAbstract(ABC):
    """One file read by position; constructed as ``Reader(path)``, then :meth:`open`."""

    @abstractmethod
    def filesize(self) -> int:
        """Return the file's size in bytes."""

    @abstractmethod
    def read(self, offset: int, size: int) -> Any:
        """Return ``size`` bytes at ``offset`` (``IndexError`` if negative or short)."""

    @abstractmethod
    def open(self) -> None:
        """Open the file (``FileNotFoundError`` when it does not exist)."""

    @abstractmethod
    def close(self) -> None:
        """Close the file."""


class IOAsyncReaderAbstract(ABC):
    """The asyncio form of :class:`IOSyncReaderAbstract` (plus a synchronous ``close_sync``)."""

    @abstractmethod
    async def filesize(self) -> int:
        """Return the file's size in bytes."""

    @abstractmethod
    async def read(self, offset: int, size: int) -> Any:
        """Return ``size`` bytes at ``offset``."""

    @abstractmethod
    async def open(self) -> None:
        """Open the file."""

    @abstractmethod
    async def close(self) -> None:
        """Close the file."""

    @abstractmethod
    def close_sync(self) -> None:
        """Close the file without an event loop."""


class IOReaderAbstract(ABC, Generic[PathT]):
    """A file-reading backend: factories of per-file sync and async readers."""

    @staticmethod
    @abstractmethod
    def is_supported() -> bool:
        """Return whether the backend works on this platform."""

    @abstractmethod
    def sync_reader(self) -> Callable[[PathT], IOSyncReaderAbstract]:
        """Return the constructor of a synchronous reader of one file."""

    @abstractmethod
    def async_reader(self) -> Callable[[PathT], IOAsyncReaderAbstract]:
        """Return the constructor of an asynchronous reader of one file."""


# --------------------------------------------------------------------------- storages
class _SharedReader(ABC):
    @property
    @abstractmethod
    def num_shards(self) -> int:
        """Number of shards."""

    @property
    @abstractmethod
    def total_length(self) -> int:
        """Number of elements (streams) or documents over all shards."""

    @abstractmethod
    def length(self, shard: int) -> int:
        """Elements or documents of ``shard`` (``IndexError`` outside ``range(num_shards)``)."""


class StreamStorageSyncWriterAbstract(SyncContextManager, Generic[InT]):
    """Appends records to explicit shards of a stream storage."""

    @abstractmethod
    def append(self, shard: int, data: InT) -> None:
        """Pack ``data`` and append it to ``shard``."""

    @abstractmethod
    def length(self, shard: int) -> int:
        """Elements appended to ``shard`` by this session (``KeyError`` if none)."""


class StreamStorageSyncReaderAbstract(_SharedReader, SyncContextManager, Generic[OutT]):
    """Reads windows of a stream storage."""

    @abstractmethod
    def read(self, global_index: int, global_length: int) -> OutT:
        """Decode ``global_length`` elements from ``global_index`` (wrapping past the end)."""


class StreamStorageAsyncReaderAbstract(_SharedReader, AsyncContextManager, Generic[OutT]):
    """asyncio reader of a stream storage."""

    @abstractmethod
    async def read(self, global_index: int, global_length: int) -> OutT:
        """Decode ``global_length`` elements from ``global_index`` (wrapping past the end)."""


class StreamStorageAbstract(ABC, Generic[InT, OutT]):
    """A stream storage: a sync writer and sync/async readers."""

    @abstractmethod
    def sync_writer(self) -> StreamStorageSyncWriterAbstract[InT]:
        """Return a writer."""

    @abstractmethod
    def sync_reader(self) -> StreamStorageSyncReaderAbstract[OutT]:
        """Return a reader."""

    @abstractmethod
    def async_reader(self) -> StreamStorageAsyncReaderAbstract[OutT]:
        """Return an asyncio reader."""


class DocumentStorageSyncWriterAbstract(SyncContextManager, Generic[InT]):
    """Appends documents to explicit shards of a document storage."""

    @abstractmethod
    def append(self, shard: int, data: InT) -> None:
        """Pack ``data`` and append it to ``shard``."""

    @abstractmethod
    def length(self, shard: int) -> int:
        """Documents appended to ``shard`` by this session (``KeyError`` if none)."""


class DocumentStorageSyncReaderAbstract(_SharedReader, SyncContextManager, Generic[OutT]):
    """Reads documents by global index."""

    @abstractmethod
    def read(self, global_index: int) -> OutT:
        """Decode document ``global_index``."""

    def read_many(self, global_indexes: Any) -> Sequence[OutT]:
        """Decode the documents at ``global_indexes``, in request order."""
        return [self.read(int(i)) for i in np.asarray(global_indexes).reshape(-1)]


class DocumentStorageAsyncReaderAbstract(_SharedReader, AsyncContextManager, Generic[OutT]):
    """asyncio reader of documents by global index."""

    @abstractmethod
    async def read(self, global_index: int) -> OutT:
        """Decode document ``global_index``."""

    async def read_many(self, global_indexes: Any) -> Sequence[OutT]:
        """Decode the documents at ``global_indexes`` concurrently, in request order."""
        wanted = [int(i) for i in np.asarray(global_indexes).reshape(-1)]
        return list(await asyncio.gather(*(self.read(i) for i in wanted)))


class DocumentStorageAbstract(ABC, Generic[InT, OutT]):
    """A document storage: a sync writer and sync/async readers."""

    @abstractmethod
    def sync_writer(self) -> DocumentStorageSyncWriterAbstract[InT]:
        """Return a writer."""

    @abstractmethod
    def sync_reader(self) -> DocumentStorageSyncReaderAbstract[OutT]:
        """Return a reader."""

    @abstractmethod
    def async_reader(self) -> DocumentStorageAsyncReaderAbstract[OutT]:
        """Return an asyncio reader."""


# --------------------------------------------------------------------------- datasets
class DatasetSyncReaderAbstract(Sequence, SyncContextManager, Generic[OutT]):  # type: ignore[type-arg]
    """A dataset view opened for reading: a :class:`~collections.abc.Sequence` of samples."""

    @abstractmethod
    def __len__(self) -> int:
        """Number of samples."""

    @abstractmethod
    def __getitem__(self, index: Any) -> Any:
        """Sample ``index``, or a list of samples for a slice."""


class DatasetAsyncReaderAbstract(AsyncContextManager, Generic[OutT]):
    """A dataset view for asyncio code: ``await reader[i]``."""

    @abstractmethod
    def __len__(self) -> int:
        """Number of samples."""

    @abstractmethod
    def __getitem__(self, index: Any) -> Awaitable[Any]:
        """Awaitable sample ``index``, or awaitable list of samples for a slice."""


class DatasetAbstract(ABC, Generic[OutT]):
    """A dataset view over a storage, opened with :meth:`sync_reader` or :meth:`async_reader`."""

    @abstractmethod
    def sync_reader(self) -> DatasetSyncReaderAbstract[OutT]:
        """Return a reader (use it as a context manager)."""

    @abstractmethod
    def async_reader(self) -> DatasetAsyncReaderAbstract[OutT]:
        """Return an asyncio reader (use it as an async context manager)."""


class StatefulDataLoaderStateDict(TypedDict):
    """What ``StatefulDataLoader.state_dict()`` returns and ``load_state_dict`` takes."""

    epoch: int
    observation_offset: int
    shuffle: bool
    shuffle_seed: int | None
    drop_last: bool
