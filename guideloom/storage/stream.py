"""StreamStorage: records concatenated into one logical stream of fixed-size elements."""

from __future__ import annotations

import operator
import os
from array import array
from bisect import bisect_right
from collections.abc import Callable
from typing import Any, Generic

import numpy as np

from guideloom.errors import FormatContractError, StorageError
from guideloom.storage.access import BLOCKING, CONCURRENT, Access, run
from guideloom.storage.base import BaseStorage, BaseWriter, ShardState
from guideloom.storage.copying import ShardSource
from guideloom.storage.facade import AsyncReader, SyncReader
from guideloom.storage.shards import (
    INDEX_DTYPE,
    OpenShard,
    ShardFileWriter,
    check_offsets,
    check_shard_number,
    close_shards,
    dtype_to_json,
    open_shards,
)
from guideloom.storage.types import (
    InDataT,
    OutDataT,
    SampleT,
    StreamDType,
    StreamStorageFormat,
)

__all__ = ["AsyncStreamReader", "StreamReader", "StreamStorage", "StreamWriter"]

KIND = "stream"


def check_stream(array_: Any, dtype: np.dtype, what: str) -> np.ndarray:
    """Check that ``array_`` is a 1-D array of ``dtype`` and return it C-contiguous."""
    if not isinstance(array_, np.ndarray):
        raise FormatContractError(f"{what} must return a NumPy array, got {type(array_).__name__}")
    if array_.ndim != 1:
        raise FormatContractError(f"{what} must return a 1-D array, got shape {array_.shape}")
    if array_.dtype != dtype:
        raise FormatContractError(
            f"{what} returned dtype {array_.dtype}, but the format's stream_dtype is {dtype}"
        )
    return np.ascontiguousarray(array_)


class StreamShardState(ShardState):
    """A stream shard being written: its element count and record offsets (its records are
    packed straight into the shard file's write buffer)."""

    def __init__(self, file: ShardFileWriter) -> None:
        super().__init__(file)
        self.elements = 0
        self.record_offsets = array("q", [0])
        file.begin_section("data")


def copy_stream_records(state: Any, source: ShardSource, first: int, count: int,
                        itemsize: int) -> tuple[int, int, list[int]]:
    """Copy the elements of records ``first .. first+count-1`` of ``source`` to the end of a
    stream shard being written (``state``: its file, ``elements``, ``records`` and
    ``record_offsets``); return the source's element range ``(begin, end)`` and each record's
    element count."""
    offsets = source.record_offsets(int(source.footer["elements"]))
    if not (first >= 0 and count >= 0 and first + count <= source.records):
        raise IndexError(f"records {first}..{first + count - 1} are not in {source.path} "
                         f"({source.records} records)")
    span = offsets[first:first + count + 1]
    begin, end = int(span[0]), int(span[-1])
    data, _ = source.section("data")
    state.file.copy_from(source.fd, data + begin * itemsize, (end - begin) * itemsize)
    state.record_offsets.extend((span[1:] - begin + state.elements).tolist())
    state.elements += end - begin
    state.records += count
    return begin, end, np.diff(span).tolist()


class StreamWriter(BaseWriter[StreamShardState]):
    """Appends records to shards of a :class:`StreamStorage` (see :class:`BaseWriter`)."""

    kind = KIND
    sections = ("data", "record_offsets")

    def __init__(self, storage: StreamStorage) -> None:
        super().__init__(storage)
        self._dtype = np.dtype(storage.format.stream_dtype)
        # a format that can pack into a buffer lets records be gathered without a copy each
        self._pack_into: Callable[[Any, np.ndarray], int | None] | None = getattr(
            storage.format, "pack_into", None
        )

    def element_dtype(self) -> np.dtype:
        """The dtype of the stream's elements."""
        return self._dtype

    def _new_state(self, file: ShardFileWriter) -> StreamShardState:
        return StreamShardState(file)

    def append(self, shard: int, data: Any) -> None:
        """Pack ``data`` with the storage format and append it as one record of ``shard``."""
        if self._closed:
            raise RuntimeError("this writer is closed")
        state = self._shards.get(check_shard_number(shard))
        # a shard's first record is checked before its file is started (a rejected record
        # leaves the shard untouched); later ones are packed straight into the file's buffer
        pack_into = self._pack_into
        n = None if state is None or pack_into is None else self._pack(pack_into, state, data)
        if state is None or n is None:
            packed = check_stream(self._storage.format.pack(data), self._dtype, "format.pack()")
            state = state if state is not None else self._state(shard)
            state.file.write(packed.view(np.uint8) if len(packed) else b"")
            n = len(packed)
        state.elements += n
        state.records += 1
        state.record_offsets.append(state.elements)

    def _pack(
        self,
        pack_into: Callable[[Any, np.ndarray], int | None],
        state: StreamShardState,
        data: Any,
    ) -> int | None:
        """Pack ``data`` into the free part of the shard file's buffer (making room once);
        ``None`` if it is larger than that."""
        itemsize = self._dtype.itemsize
        for attempt in range(2):
            space = state.file.space()
            n = pack_into(data, np.frombuffer(space, self._dtype, len(space) // itemsize))
            if n is not None:
                state.file.advance(n * itemsize)
                return n
            if attempt == 0:
                state.file.make_room()
        return None

    def copy_records(self, shard: int, source: ShardSource, first: int, count: int) -> list[int]:
        """Append records ``first .. first+count-1`` of the published shard ``source`` to
        ``shard`` as the bytes they are there (the format is not called); return each one's
        element count."""
        state = self._state(shard)
        return copy_stream_records(state, source, first, count, self._dtype.itemsize)[2]

    def _finish(self, state: StreamShardState) -> None:
        state.file.end_section("data")
        offsets = np.asarray(state.record_offsets, dtype=INDEX_DTYPE)
        state.file.write_section("record_offsets", offsets)
        state.file.commit(
            {
                "kind": KIND,
                "dtype": dtype_to_json(self._dtype),
                "elements": state.elements,
                "records": state.records,
            }
        )


class StreamIndex:
    """Locates global element ranges in a list of stream shards (shared with stream-with-meta)."""

    def __init__(self, shards: list[OpenShard], dtype: np.dtype) -> None:
        self.shards = shards
        self.dtype = dtype
        self.itemsize = dtype.itemsize
        self.files = [shard.file for shard in shards]
        self.lengths = [shard.footer["elements"] for shard in shards]
        self.data_offsets = [shard.section("data")[0] for shard in shards]
        self.starts = [0]
        for length in self.lengths:
            self.starts.append(self.starts[-1] + length)
        self.total = self.starts[-1]
        self.starts_array = np.asarray(self.starts, dtype=np.int64)
        # ``shards`` of a one-shard window, copied for each read (cheaper than building it)
        self._one_shard = [np.array([n], dtype=np.int64) for n in range(len(shards))]

    def check_range(self, start: Any, length: Any, *, wrap: bool = True) -> tuple[int, int]:
        """Return ``(start, length)`` as ints, or raise ``IndexError``.

        With ``wrap`` (GuideLoom 1.1's rule) ``start`` must lie in the stream and any
        ``length >= 0`` is allowed: the read continues at element 0 after the last one. Without
        it the whole range must lie in the stream (a zero-length range may start at the end).
        """
        if type(start) is not int:
            start = operator.index(start)
        if type(length) is not int:
            length = operator.index(length)
        if wrap:
            if length < 0:
                raise IndexError(f"a read of {length} elements: the length must be >= 0")
            if not 0 <= start < self.total:
                raise IndexError(
                    f"a read starting at element {start} is outside of size {self.total} (the "
                    "number of elements of the stream)"
                )
        elif start < 0 or length < 0 or start + length > self.total:
            raise IndexError(
                f"elements [{start}, {start + length}) are outside the stream of {self.total}"
            )
        return start, length

    def length(self, shard: Any) -> int:
        """Return the element count of ``shard`` (``IndexError`` outside ``range(num_shards)``)."""
        number = operator.index(shard)
        if not 0 <= number < len(self.lengths):
            raise IndexError(
                f"shard {shard} is out of range: the storage has {len(self.lengths)} shards"
            )
        return int(self.lengths[number])

    def segments(self, start: int, length: int) -> list[tuple[int, int, int]]:
        """Return ``(shard, local_start, count)`` for each shard segment of a range.

        A range running past the last element continues at shard 0 (as often as it needs).
        """
        shard = bisect_right(self.starts, start) - 1
        local = start - self.starts[shard]
        out = []
        remaining = length
        while remaining:
            count = min(self.lengths[shard] - local, remaining)
            if count > 0:
                out.append((shard, local, count))
                remaining -= count
            shard = shard + 1 if shard + 1 < len(self.lengths) else 0
            local = 0
        return out

    @property
    def num_shards(self) -> int:
        """Number of shards."""
        return len(self.shards)

    async def read(
        self, access: Access, start: int, length: int
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Read a checked range; return ``(elements, shard_lengths, shards)``.

        The shard segments of the range are read through ``access`` (concurrently with
        :data:`~guideloom.storage.access.CONCURRENT`).
        """
        out = np.empty(length, dtype=self.dtype)
        if not length:
            empty = np.zeros(0, dtype=np.int64)
            return out, empty, empty
        raw = out.view(np.uint8)
        shard = bisect_right(self.starts, start) - 1
        local = start - self.starts[shard]
        itemsize = self.itemsize
        if local + length <= self.lengths[shard]:  # fast path: one shard
            await access.readinto(self.files[shard], self.data_offsets[shard] + local * itemsize,
                                  raw)
            return out, np.array([length], dtype=np.int64), self._one_shard[shard].copy()
        segments = self.segments(start, length)
        jobs = []
        done = 0
        for shard, local, count in segments:
            jobs.append(access.readinto(
                self.files[shard], self.data_offsets[shard] + local * itemsize,
                raw[done * itemsize : (done + count) * itemsize],
            ))
            done += count
        await access.gather(*jobs)
        return (
            out,
            np.array([s[2] for s in segments], dtype=np.int64),
            np.array([s[0] for s in segments], dtype=np.int64),
        )

    def close(self) -> None:
        """Close the shard files."""
        close_shards(self.shards)


def open_stream_index(storage: BaseStorage, kind: str, sections: tuple[str, ...]) -> StreamIndex:
    dtype = np.dtype(storage.format.stream_dtype)
    shards = open_shards(storage.directory, kind, storage.read_interface, dtype, sections)
    try:
        for shard in shards:
            offsets = shard.read_index("record_offsets")
            check_offsets(
                shard.path, "record_offsets", offsets, shard.footer["records"],
                shard.footer["elements"],
            )
            nbytes = shard.section("data")[1]
            if nbytes != shard.footer["elements"] * dtype.itemsize:
                raise StorageError(
                    f"{shard.path}: not a complete GuideLoom shard (data section of {nbytes} "
                    f"bytes for {shard.footer['elements']} elements)"
                )
        return StreamIndex(shards, dtype)
    except BaseException:
        close_shards(shards)
        raise


class StreamCore:
    """The async core of both stream readers: a :class:`StreamIndex` and the format."""

    def __init__(self, storage: BaseStorage, kind: str = KIND,
                 sections: tuple[str, ...] = ("data", "record_offsets")) -> None:
        self.format = storage.format
        self.index = open_stream_index(storage, kind, sections)
        self.total = self.index.total
        self.num_shards = len(self.index.shards)
        self.length = self.index.length
        self.close = self.index.close

    async def read(self, access: Access, start: Any, length: Any, wrap: bool = True) -> Any:
        """The sample decoded from ``length`` elements from ``start`` (see
        :meth:`StreamIndex.check_range` for ``wrap``)."""
        index = self.index
        start, length = index.check_range(start, length, wrap=wrap)
        return self.format.unpack(*(await index.read(access, start, length)))


class StreamSized:
    """``num_elements`` of a stream reader (both kinds of stream, both façades)."""

    _core: Any

    @property
    def num_elements(self) -> int:
        """Total number of elements of the stream."""
        return self._core.total


class StreamReader(StreamSized, SyncReader, Generic[SampleT]):
    """Reads any global element range of a :class:`StreamStorage`. Thread-safe.

    ``len(reader)`` is the total number of elements.
    """

    def __init__(self, storage: StreamStorage[Any, SampleT, Any]) -> None:
        super().__init__(StreamCore(storage))

    @property
    def shard_lengths(self) -> list[int]:
        """Element count of each shard."""
        return list(self._core.index.lengths)

    def read(self, global_index: int, global_length: int) -> SampleT:
        """Return the sample decoded from ``global_length`` elements from ``global_index``.

        As in GuideLoom 1.1, a read running past the last element continues at element 0, and a
        zero-length read returns an empty window.

        Raises:
            IndexError: ``global_index`` is not in the stream or ``global_length < 0``.
        """
        return run(self._core.read(BLOCKING, global_index, global_length))

    def read_span(self, start: int, length: int) -> SampleT:
        """Return the sample decoded from exactly ``[start, start + length)`` (no wrapping).

        Raises:
            IndexError: The range is not inside the stream.
        """
        return run(self._core.read(BLOCKING, start, length, False))


class AsyncStreamReader(StreamSized, AsyncReader, Generic[SampleT]):
    """asyncio reader of a :class:`StreamStorage`: ``await reader.read(start, length)``."""

    def __init__(self, storage: StreamStorage[Any, SampleT, Any]) -> None:
        super().__init__(StreamCore(storage))

    async def read(self, global_index: int, global_length: int) -> SampleT:
        """Return the sample of ``global_length`` elements from ``global_index`` (wrapping)."""
        return await self._core.read(CONCURRENT, global_index, global_length)


class StreamStorage(
    BaseStorage[StreamStorageFormat[InDataT, OutDataT, StreamDType]],
    Generic[InDataT, OutDataT, StreamDType],
):
    """Records of fixed-size elements, concatenated into one logical stream over shards.

    Args:
        storage_dir: The storage directory (created by the first writer); ``directory=`` is
            another name for it.
        storage_format: A :class:`guideloom.storage.types.StreamStorageFormat`, for example
            :class:`guideloom.storage.StreamNumpyFormat`.
        read_interface: How shard files are read (:class:`guideloom.storage.io.SeekIO` by default;
            a GuideLoom 1.1 ``IOReaderAbstract`` backend works too).
    """

    def __init__(
        self,
        storage_dir: str | os.PathLike[str] | None = None,
        storage_format: StreamStorageFormat[InDataT, OutDataT, StreamDType] | None = None,
        read_interface: Any = None,
        *,
        directory: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(storage_dir, storage_format, read_interface, directory=directory)
        np.dtype(self.format.stream_dtype)  # fail early on a format without a dtype

    def sync_writer(self) -> StreamWriter:
        """Return a writer; use it as a context manager (commits on exit)."""
        return StreamWriter(self)

    def sync_reader(self) -> StreamReader[OutDataT]:
        """Open and validate every shard and return a reader."""
        return StreamReader(self)

    def async_reader(self) -> AsyncStreamReader[OutDataT]:
        """Like :meth:`sync_reader`, for asyncio code."""
        return AsyncStreamReader(self)
