"""GuideLoom 1.1's ``guideloom.filesystem``: shard-level access to a storage directory.

:class:`FileSystemStream` appends and reads 1-D NumPy arrays per shard, :class:`FileSystemDocument`
appends and reads byte strings per shard. Both sit on guideloom's own shard files (the layout of
:mod:`guideloom.storage.shards`), so what they write opens as a ``StreamStorage`` (with a plain
``StreamNumpyFormat``) or a ``DocumentStorage`` and the other way round.
"""

from __future__ import annotations

import asyncio
import operator
import pathlib
from typing import Any

import numpy as np

from guideloom.storage.document import DocumentStorage
from guideloom.storage.stream import StreamStorage

__all__ = ["FileSystemDocument", "FileSystemStream"]


class _RawStream:
    """A format whose records and windows are plain 1-D arrays of ``stream_dtype``."""

    def __init__(self, dtype: Any) -> None:
        self.stream_dtype = np.dtype(dtype).newbyteorder("<")

    def pack(self, data: Any) -> np.ndarray:
        array = np.asarray(data)
        if array.dtype != self.stream_dtype:
            if array.dtype.newbyteorder("<") != self.stream_dtype:
                raise ValueError(
                    f"unexpected dtype {array.dtype}: this stream stores {self.stream_dtype}"
                )
            array = array.astype(self.stream_dtype)
        if array.ndim != 1:
            raise ValueError("a record must be 1-D; use a structured dtype for several columns")
        return array

    def unpack(self, stream: np.ndarray, shard_lengths: np.ndarray, shards: np.ndarray) -> Any:
        return stream


class _RawBytes:
    """A format that stores bytes as they are."""

    def pack(self, data: Any) -> bytes:
        return bytes(data)

    def unpack(self, encoded_data: bytes, shard: int) -> memoryview:
        return memoryview(encoded_data)


class _Writer:
    """Appends to shards; counts what each shard received in this session."""

    def __init__(self, storage: Any) -> None:
        self._storage = storage
        self._writer: Any = None

    def open(self) -> None:
        self._writer = self._storage.sync_writer()
        self._writer.open()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def append(self, shard: int, value: Any) -> None:
        if self._writer is None:
            raise ValueError("the writer is not open: use it as a context manager")
        if operator.index(shard) < 0:
            raise IndexError("a shard number cannot be negative")
        self._writer.append(shard, value)

    def length(self, shard: int) -> int:
        return 0 if self._writer is None else self._writer.elements(shard)

    def __enter__(self) -> _Writer:
        self.open()
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if self._writer is not None and exc_type is not None:
            self._writer.abort()
            self._writer = None
        self.close()


class _Reader:
    """Shard-level reads through a storage reader opened on :meth:`open`."""

    def __init__(self, storage: Any) -> None:
        self._storage = storage
        self._reader: Any = None

    def open(self) -> None:
        if self._reader is None:
            try:
                self._reader = self._storage.sync_reader()
            except FileNotFoundError:  # GuideLoom 1.1 sees a missing directory as no shards
                self._reader = None
                raise

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None

    def _opened(self) -> Any:
        if self._reader is None:
            raise OSError("the reader is not open: call open() or use it as a context manager")
        return self._reader

    def num_shards(self) -> int:
        return self._opened().num_shards

    def length(self, shard: int) -> int:
        return self._opened().length(shard)

    def _global(self, shard: int, index: int) -> int:
        reader = self._opened()
        if shard < 0 or index < 0:
            raise IndexError("shard and index must be >= 0")
        if shard >= reader.num_shards:
            raise IndexError(f"shard {shard} does not exist")
        return sum(reader.length(s) for s in range(shard)) + index

    def __enter__(self) -> _Reader:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _StreamReader(_Reader):
    def read(self, shard: int, index_in_shard: int, length: int) -> np.ndarray:
        if index_in_shard < 0:
            raise IndexError(f"Cannot read negative index {index_in_shard} of shard {shard}")
        if index_in_shard + length > self.length(shard):
            raise IndexError(
                f"the read is shorter than requested size: shard {shard} has "
                f"{self.length(shard)} elements, {index_in_shard + length} were asked for"
            )
        return self._opened().read_span(self._global(shard, index_in_shard), length)


class _AsyncReader:
    """asyncio face of a sync shard reader (reads run in a worker thread)."""

    def __init__(self, sync: _Reader) -> None:
        self._sync = sync

    async def open(self) -> None:
        await asyncio.to_thread(self._sync.open)

    async def close(self) -> None:
        self._sync.close()

    async def num_shards(self) -> int:
        return self._sync.num_shards()

    async def length(self, shard: int) -> int:
        return self._sync.length(shard)

    async def read(self, *args: Any) -> Any:
        return await asyncio.to_thread(self._sync.read, *args)  # type: ignore[attr-defined]

    async def get(self, shard: int, index: int) -> Any:
        return await asyncio.to_thread(self._sync.get, shard, index)  # type: ignore[attr-defined]

    async def get_many(self, requests: Any) -> Any:
        return await asyncio.to_thread(self._sync.get_many, requests)  # type: ignore[attr-defined]

    async def __aenter__(self) -> _AsyncReader:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class FileSystemStream:
    """1-D arrays appended to and read from numbered shards of ``path``.

    Args:
        path: The storage directory.
        read_interface: A guideloom or GuideLoom 1.1 read backend (``SeekIO`` by default).
    """

    def __init__(self, path: pathlib.PurePath, read_interface: Any = None) -> None:
        self.path = path
        self.read_interface = read_interface

    def _storage(self, dtype: Any) -> StreamStorage:
        return StreamStorage(self.path, _RawStream(dtype), self.read_interface)

    def sync_writer(self, dtype: Any) -> _Writer:
        """Return a writer: ``append(shard, array)``, ``length(shard)``."""
        return _Writer(self._storage(dtype))

    def sync_reader(self, dtype: Any) -> _StreamReader:
        """Return a reader: ``num_shards()``, ``length(shard)``, ``read(shard, index, length)``."""
        return _StreamReader(self._storage(dtype))

    def async_reader(self, dtype: Any) -> _AsyncReader:
        """Return the asyncio form of :meth:`sync_reader`."""
        return _AsyncReader(self.sync_reader(dtype))


class _DocumentReader(_Reader):
    def get(self, shard: int, index: int) -> memoryview:
        if index >= self.length(shard):
            raise IndexError(f"shard {shard} has no document {index}")
        return self._opened().read(self._global(shard, index))

    def get_many(self, requests: Any) -> list[memoryview]:
        return [self.get(int(r["shard"]), int(r["shard_index"])) for r in requests]


class FileSystemDocument:
    """Byte strings appended to and read from numbered shards of ``path``.

    Args:
        path: The storage directory.
        read_interface: A guideloom or GuideLoom 1.1 read backend (``SeekIO`` by default).
    """

    def __init__(self, path: pathlib.PurePath, read_interface: Any = None) -> None:
        self.path = path
        self.read_interface = read_interface

    def _storage(self) -> DocumentStorage:
        return DocumentStorage(self.path, _RawBytes(), self.read_interface)

    def sync_writer(self) -> _Writer:
        """Return a writer: ``append(shard, bytes)``, ``length(shard)``."""
        return _Writer(self._storage())

    def sync_reader(self) -> _DocumentReader:
        """Return a reader: ``num_shards()``, ``length(shard)``, ``get(shard, index)``."""
        return _DocumentReader(self._storage())

    def async_reader(self) -> _AsyncReader:
        """Return the asyncio form of :meth:`sync_reader`."""
        return _AsyncReader(self.sync_reader())
