"""Dataset views: fixed windows over a stream, or whole documents."""

from __future__ import annotations

import asyncio
import operator
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, Generic

import numpy as np

from guideloom.storage.document import DocumentStorage
from guideloom.storage.facade import AsyncClosing, SyncClosing
from guideloom.storage.types import SampleT

__all__ = [
    "AsyncDocumentDatasetReader",
    "AsyncStreamDatasetReader",
    "DocumentDataset",
    "DocumentDatasetReader",
    "StreamDataset",
    "StreamDatasetReader",
]


def _as_indices(indices: Any) -> list[int]:
    """Return ``indices`` (ints, NumPy integers or an integer array) as a list of ints."""
    array = np.asarray(indices)
    if array.ndim != 1:
        array = array.reshape(-1)
    if array.size and array.dtype.kind not in "iu":
        if array.dtype == object:
            return [int(operator.index(i)) for i in array]
        raise TypeError(f"indices must be integers, got dtype {array.dtype}")
    return array.tolist()


def _check(index: Any, length: int) -> int:
    """``index`` as an int in ``range(length)`` (negative counts back); bools are refused."""
    if type(index) is not int:
        if isinstance(index, bool | np.bool_):
            raise TypeError("a bool is not an index")
        index = operator.index(index)
    if index < 0:
        index += length
    if not 0 <= index < length:
        raise IndexError(f"index out of range for {length} samples")
    return index


class _Indexing:
    """The keys both dataset readers take: ``i`` (negative counts back), ``a:b``, an int array,
    list or tuple; every index is checked before any sample is read."""

    storage_reader: Any

    def _close(self) -> None:
        self.storage_reader.close()

    def __len__(self) -> int:  # pragma: no cover - overridden
        raise NotImplementedError

    def _wanted(self, key: Any) -> int | list[int]:
        """The checked index of an int key, or the list of indices of any other key."""
        if isinstance(key, slice):
            return list(range(*key.indices(len(self))))
        if isinstance(key, np.ndarray | list | tuple):
            return self._many(key)
        return _check(key, len(self))

    def _many(self, indices: Any) -> list[int]:
        length = len(self)
        return [_check(i, length) for i in _as_indices(indices)]


class _SequenceReader(_Indexing, SyncClosing, Sequence[Any]):
    """``len``, ``[i]``, ``[a:b]``, ``[int array]`` and ``get_many``, for blocking code.

    A :class:`~collections.abc.Sequence` (``in``, ``index``, ``count``, ``reversed``), as
    GuideLoom 1.1's dataset readers are.
    """

    def _get(self, index: int) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    def __getitem__(self, key: Any) -> Any:
        wanted = self._wanted(key)
        return [self._get(i) for i in wanted] if isinstance(wanted, list) else self._get(wanted)

    def get_many(self, indices: Any) -> list[Any]:
        """Return the samples at ``indices`` (any iterable of ints or an integer array), in order.

        Raises:
            IndexError: An index is out of range (nothing is returned).
        """
        return [self._get(i) for i in self._many(indices)]

    def __iter__(self) -> Iterator[Any]:
        for i in range(len(self)):
            yield self._get(i)

class _AsyncSequenceReader(_Indexing, AsyncClosing):
    """``len``, ``await r[i]``, ``await r[a:b]``, ``await r[indices]``, ``get_many``, ``async for``.

    Indexing checks the key when the result is awaited (as GuideLoom 1.1 does); several samples
    are read concurrently.
    """

    async def _get(self, index: int) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError

    async def __getitem__(self, key: Any) -> Any:
        wanted = self._wanted(key)
        if not isinstance(wanted, list):
            return await self._get(wanted)
        return list(await asyncio.gather(*map(self._get, wanted)))

    async def get_many(self, indices: Any) -> list[Any]:
        """Return the samples at ``indices``, in order, read concurrently.

        Raises:
            IndexError: An index is out of range (nothing is read).
        """
        return list(await asyncio.gather(*map(self._get, self._many(indices))))

    async def __aiter__(self) -> AsyncIterator[Any]:
        for i in range(len(self)):
            yield await self._get(i)


class _Windows:
    """Windows of ``sequence_length`` elements of a stream reader (either façade)."""

    def __init__(self, reader: Any, sequence_length: int) -> None:
        self.storage_reader = reader
        self.sequence_length = sequence_length
        self._len = reader.num_elements // sequence_length

    def __len__(self) -> int:
        return self._len


class _Documents:
    """One sample per document of a document reader (either façade)."""

    def __init__(self, reader: Any) -> None:
        self.storage_reader = reader
        self._len = len(reader)

    def __len__(self) -> int:
        return self._len


class StreamDatasetReader(_Windows, _SequenceReader):
    """Fixed windows of a stream: ``reader[i]`` is elements ``[i*L, (i+1)*L)``. Thread-safe."""

    def __init__(self, reader: Any, sequence_length: int) -> None:
        super().__init__(reader, sequence_length)
        self._read = reader.read

    def _get(self, index: int) -> Any:
        length = self.sequence_length
        return self._read(index * length, length)

    def __getitem__(self, key: Any) -> Any:
        if type(key) is int and 0 <= key < self._len:  # fast path
            length = self.sequence_length
            return self._read(key * length, length)
        return super().__getitem__(key)


class StreamDataset(Generic[SampleT]):
    """Windows of ``sequence_length`` elements over a stream storage.

    Works on :class:`StreamStorage` and :class:`StreamWithMetaStorage`. A trailing partial window
    is dropped; changing ``sequence_length`` needs no rewrite.

    Args:
        storage: The storage to read.
        sequence_length: Elements per window.
    """

    def __init__(self, storage: Any, sequence_length: int) -> None:
        if isinstance(sequence_length, bool) or not isinstance(sequence_length, int | np.integer):
            raise TypeError(f"sequence_length must be an int, got {sequence_length!r}")
        if sequence_length <= 0:
            raise ValueError(f"sequence_length must be > 0, got {sequence_length}")
        self.storage = storage
        self.sequence_length = int(sequence_length)

    def __repr__(self) -> str:
        return f"StreamDataset({self.storage!r}, sequence_length={self.sequence_length})"

    def sync_reader(self) -> StreamDatasetReader:
        """Open the storage and return a window reader (a context manager)."""
        return StreamDatasetReader(self.storage.sync_reader(), self.sequence_length)

    def async_reader(self) -> AsyncStreamDatasetReader:
        """Open the storage and return an asyncio window reader (an async context manager)."""
        return AsyncStreamDatasetReader(self.storage.async_reader(), self.sequence_length)


class AsyncStreamDatasetReader(_Windows, _AsyncSequenceReader):
    """Fixed windows of a stream for asyncio code: ``await reader[i]``.

    Args:
        reader: An async storage reader (``StreamStorage.async_reader()`` or
            ``StreamWithMetaStorage.async_reader()``).
        sequence_length: Elements per window.
    """

    async def _get(self, index: int) -> Any:
        length = self.sequence_length
        return await self.storage_reader.read(index * length, length)


class DocumentDatasetReader(_Documents, _SequenceReader):
    """Whole documents: ``reader[i]`` is document ``i``. Thread-safe."""

    def _get(self, index: int) -> Any:
        return self.storage_reader.read(index)


class DocumentDataset(Generic[SampleT]):
    """One sample per document of a :class:`DocumentStorage`.

    Args:
        storage: The storage to read.
    """

    def __init__(self, storage: DocumentStorage[Any, SampleT]) -> None:
        self.storage = storage

    def __repr__(self) -> str:
        return f"DocumentDataset({self.storage!r})"

    def sync_reader(self) -> DocumentDatasetReader:
        """Open the storage and return a document reader (a context manager)."""
        return DocumentDatasetReader(self.storage.sync_reader())

    def async_reader(self) -> AsyncDocumentDatasetReader:
        """Open the storage and return an asyncio document reader (an async context manager)."""
        return AsyncDocumentDatasetReader(self.storage.async_reader())


class AsyncDocumentDatasetReader(_Documents, _AsyncSequenceReader):
    """Whole documents for asyncio code: ``await reader[i]``, ``await reader[a:b]``."""

    async def _get(self, index: int) -> Any:
        return await self.storage_reader.read(index)
