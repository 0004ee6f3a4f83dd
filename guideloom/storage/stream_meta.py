"""StreamWithMetaStorage: a stream whose element runs point at variable-size payloads."""

from __future__ import annotations

import itertools
import os
import tempfile
from array import array
from typing import Any, Generic, NamedTuple

import numpy as np

from guideloom.errors import FormatContractError, StorageError
from guideloom.storage.access import BLOCKING, CONCURRENT, Access, run
from guideloom.storage.base import BaseStorage, BaseWriter, ShardState
from guideloom.storage.copying import ShardSource
from guideloom.storage.facade import AsyncReader, SyncReader
from guideloom.storage.shards import (
    INDEX_DTYPE,
    ShardFileWriter,
    check_offsets,
    dtype_to_json,
)
from guideloom.storage.stream import (
    StreamCore,
    StreamSized,
    check_stream,
    copy_stream_records,
)
from guideloom.storage.types import (
    InDataT,
    OutDataT,
    SampleT,
    StreamDType,
    StreamWithMetaStorageFormat,
)

__all__ = [
    "AsyncStreamWithMetaReader",
    "StreamWithMetaReader",
    "StreamWithMetaStorage",
    "StreamWithMetaWriter",
]

KIND = "stream_meta"
_SECTIONS = ("data", "record_offsets", "run_starts", "payload_offsets", "payloads")


class MetaShardState(ShardState):
    """A stream-with-meta shard being written; payloads wait in an unnamed temporary file."""

    def __init__(self, file: ShardFileWriter) -> None:
        super().__init__(file)
        self.elements = 0
        self.record_offsets = array("q", [0])
        self.run_starts = array("q")
        self.payload_offsets = array("q", [0])
        self.payloads = tempfile.TemporaryFile(dir=file.final_path.parent)  # noqa: SIM115
        file.begin_section("data")


def _collect(fmt: Any, data: Any, dtype: np.dtype) -> tuple[np.ndarray, list[int], list[Any]]:
    """Run ``fmt.pack(data)`` and check its contract; return (stream, run starts, payloads)."""
    size = fmt.size(data)
    if not isinstance(size, int | np.integer) or size < 0:
        raise FormatContractError(f"format.size() must return an int >= 0, got {size!r}")
    size = int(size)
    generator = fmt.pack(data)
    if not hasattr(generator, "__next__"):
        raise FormatContractError("format.pack() must be a generator (yield (key, payload))")
    starts: list[int] = []
    payloads: list[Any] = []
    seen: set[Any] = set()
    current: Any = None
    position = 0
    while True:
        try:
            item = next(generator)
        except StopIteration as stop:
            stream = stop.value
            break
        if not isinstance(item, tuple) or len(item) != 2:
            raise FormatContractError(
                f"format.pack() must yield (key, payload | None) pairs, got {item!r} at element "
                f"{position}"
            )
        if position >= size:
            raise FormatContractError(
                f"format.pack() yielded more than format.size() = {size} elements"
            )
        key, payload = item
        try:
            new_run = position == 0 or bool(key != current)
            repeated = new_run and key in seen
        except TypeError as error:
            raise FormatContractError(f"key {key!r} at element {position}: {error}") from None
        if repeated:
            raise FormatContractError(
                f"key {key!r} reappears at element {position} after another key in the same record"
            )
        if new_run:
            if payload is None:
                raise FormatContractError(
                    f"element {position} starts the run of key {key!r} but has no payload"
                )
            if not isinstance(payload, bytes | bytearray | memoryview):
                raise FormatContractError(
                    f"payload of key {key!r} must be bytes, got {type(payload).__name__}"
                )
            seen.add(key)
            current = key
            starts.append(position)
            payloads.append(payload)
        position += 1
    if position != size:
        raise FormatContractError(
            f"format.pack() yielded {position} elements but format.size() = {size}"
        )
    stream = check_stream(stream, dtype, "format.pack()")
    if len(stream) != size:
        raise FormatContractError(
            f"format.pack() returned {len(stream)} elements but format.size() = {size}"
        )
    return stream, starts, payloads


class StreamWithMetaWriter(BaseWriter[MetaShardState]):
    """Appends records to shards of a :class:`StreamWithMetaStorage` (see :class:`BaseWriter`)."""

    kind = KIND
    sections = _SECTIONS

    def __init__(self, storage: StreamWithMetaStorage) -> None:
        super().__init__(storage)
        self._dtype = np.dtype(storage.format.stream_dtype)

    def element_dtype(self) -> np.dtype:
        """The dtype of the stream's elements."""
        return self._dtype

    def _new_state(self, file: ShardFileWriter) -> MetaShardState:
        return MetaShardState(file)

    def append(self, shard: int, data: Any) -> None:
        """Pack ``data`` and append it as one record of ``shard``.

        Raises:
            FormatContractError: The format broke its protocol (nothing of the record is written).
        """
        stream, starts, payloads = _collect(self._storage.format, data, self._dtype)
        state = self._state(shard)
        if len(stream):
            state.file.write(stream.view(np.uint8))
        for start, payload in zip(starts, payloads, strict=True):
            view = memoryview(payload).cast("B")
            state.payloads.write(view)
            state.run_starts.append(state.elements + start)
            state.payload_offsets.append(state.payload_offsets[-1] + len(view))
        state.elements += len(stream)
        state.records += 1
        state.record_offsets.append(state.elements)

    def copy_records(self, shard: int, source: ShardSource, first: int, count: int) -> list[int]:
        """Append records ``first .. first+count-1`` of the published shard ``source`` to
        ``shard`` as the bytes they are there (elements, then their runs' payloads; the format
        is not called); return each one's element count."""
        state = self._state(shard)
        elements = state.elements
        begin, end, lengths = copy_stream_records(state, source, first, count,
                                                  self._dtype.itemsize)
        run_starts = source.index("run_starts")
        payload_offsets = source.index("payload_offsets")
        if len(payload_offsets) != len(run_starts) + 1:
            raise StorageError(f"{source.path}: not a complete GuideLoom shard (inconsistent "
                               "'payload_offsets' index)")
        # a record's runs start inside its elements (each record starts a run of its own)
        lo, hi = (int(i) for i in np.searchsorted(run_starts, [begin, end], side="left"))
        pay_begin, pay_end = int(payload_offsets[lo]), int(payload_offsets[hi])
        payloads, _ = source.section("payloads")
        if pay_end > pay_begin:
            state.payloads.flush()
            at = state.payloads.seek(0, os.SEEK_END)
            source.copy_to(state.payloads.fileno(), payloads + pay_begin, pay_end - pay_begin,
                           at)
            state.payloads.seek(at + pay_end - pay_begin)
        state.run_starts.extend((run_starts[lo:hi] - begin + elements).tolist())
        state.payload_offsets.extend(
            (payload_offsets[lo + 1:hi + 1] - pay_begin + state.payload_offsets[-1]).tolist())
        return lengths

    def _finish(self, state: MetaShardState) -> None:
        file = state.file
        try:
            file.end_section("data")
            file.write_section("record_offsets", np.asarray(state.record_offsets, INDEX_DTYPE))
            file.write_section("run_starts", np.asarray(state.run_starts, INDEX_DTYPE))
            file.write_section("payload_offsets", np.asarray(state.payload_offsets, INDEX_DTYPE))
            file.write_file_section("payloads", state.payloads)
        except BaseException:
            file.abort()
            raise
        finally:
            state.payloads.close()
        file.commit(
            {
                "kind": KIND,
                "dtype": dtype_to_json(self._dtype),
                "elements": state.elements,
                "records": state.records,
                "runs": len(state.run_starts),
            }
        )

    def abort(self) -> None:
        """Discard everything this writer wrote."""
        for state in self._shards.values():
            state.payloads.close()
        super().abort()


class _PayloadSpan(NamedTuple):
    """The payload bytes one shard segment of a window needs: one read, cut at ``cuts``."""

    shard: int
    offset: int
    nbytes: int
    cuts: list[int]


class StreamWithMetaCore(StreamCore):
    """The async core of both stream-with-meta readers: the stream, plus each shard's runs and
    payload offsets."""

    def __init__(self, storage: BaseStorage) -> None:
        super().__init__(storage, KIND, _SECTIONS)
        try:
            self._run_starts: list[np.ndarray] = []
            self._payload_offsets: list[np.ndarray] = []
            self._payload_base: list[int] = []
            for shard in self.index.shards:
                runs = shard.read_index("run_starts")
                elements = shard.footer["elements"]
                if elements and (
                    len(runs) == 0
                    or runs[0] != 0
                    or runs[-1] >= elements
                    or bool(np.any(np.diff(runs) <= 0))
                ):
                    raise StorageError(f"{shard.path}: not a complete GuideLoom shard (bad runs)")
                offsets = shard.read_index("payload_offsets")
                base, nbytes = shard.section("payloads")
                check_offsets(shard.path, "payload_offsets", offsets, len(runs), nbytes)
                self._run_starts.append(runs)
                self._payload_offsets.append(offsets)
                self._payload_base.append(base)
        except BaseException:
            self.close()
            raise

    def _plan(self, start: int, length: int) -> tuple[np.ndarray, list[_PayloadSpan]]:
        """Return the payload index of each element of a checked range and the spans to read."""
        index = self.index
        document_index = np.empty(length, dtype=np.int64)
        spans: list[_PayloadSpan] = []
        payloads = done = 0
        for shard, local, count in index.segments(start, length):
            runs = self._run_starts[shard]
            end = local + count
            first = int(np.searchsorted(runs, local, "right")) - 1
            stop = int(np.searchsorted(runs, end, "left"))
            bounds = np.concatenate(([local], runs[first + 1 : stop], [end]))
            document_index[done : done + count] = np.repeat(
                np.arange(payloads, payloads + stop - first), np.diff(bounds)
            )
            offsets = self._payload_offsets[shard]
            low = int(offsets[first])
            spans.append(
                _PayloadSpan(
                    shard,
                    self._payload_base[shard] + low,
                    int(offsets[stop]) - low,
                    (offsets[first : stop + 1] - low).tolist(),
                )
            )
            payloads += stop - first
            done += count
        return document_index, spans

    async def read(self, access: Access, start: Any, length: Any, wrap: bool = True) -> Any:
        """The sample of ``length`` elements from ``start``: the stream segments and the
        payload ranges the window needs are read through ``access`` (at once, concurrently)."""
        index = self.index
        start, length = index.check_range(start, length, wrap=wrap)
        document_index, spans = self._plan(start, length)
        reads = [access.read(index.files[s.shard], s.offset, s.nbytes) for s in spans]
        (stream, _, _), *blobs = await access.gather(index.read(access, start, length), *reads)
        document_data: list[bytes] = []
        document_shard: list[int] = []
        for span, blob in zip(spans, blobs, strict=True):
            cuts = span.cuts
            document_data.extend(blob[a:b] for a, b in itertools.pairwise(cuts))
            document_shard.extend([span.shard] * (len(cuts) - 1))
        return self.format.unpack(
            stream, np.asarray(document_shard, dtype=np.int64), document_index, document_data
        )


class StreamWithMetaReader(StreamSized, SyncReader, Generic[SampleT]):
    """Reads any global element range of a :class:`StreamWithMetaStorage`. Thread-safe."""

    def __init__(self, storage: StreamWithMetaStorage[Any, SampleT, Any]) -> None:
        super().__init__(StreamWithMetaCore(storage))

    def read(self, global_index: int, global_length: int) -> SampleT:
        """Return the sample of ``global_length`` elements from ``global_index``.

        As in GuideLoom 1.1, a read running past the last element continues at element 0.

        Raises:
            IndexError: ``global_index`` is not in the stream or ``global_length < 0``.
        """
        return run(self._core.read(BLOCKING, global_index, global_length))

    def read_span(self, start: int, length: int) -> SampleT:
        """Return the sample decoded from exactly ``[start, start + length)`` (no wrapping)."""
        return run(self._core.read(BLOCKING, start, length, False))


class AsyncStreamWithMetaReader(StreamSized, AsyncReader, Generic[SampleT]):
    """asyncio reader of a :class:`StreamWithMetaStorage`: ``await reader.read(start, length)``.

    Shards are opened and validated when the reader is created; a read awaits the window's stream
    segments and payload ranges concurrently. Use it as an async context manager.
    """

    def __init__(self, storage: StreamWithMetaStorage[Any, SampleT, Any]) -> None:
        super().__init__(StreamWithMetaCore(storage))

    async def read(self, global_index: int, global_length: int) -> SampleT:
        """Return the sample of ``global_length`` elements from ``global_index`` (wrapping).

        Raises:
            IndexError: ``global_index`` is not in the stream or ``global_length < 0``.
        """
        return await self._core.read(CONCURRENT, global_index, global_length)


class StreamWithMetaStorage(
    BaseStorage[StreamWithMetaStorageFormat[InDataT, OutDataT, StreamDType]],
    Generic[InDataT, OutDataT, StreamDType],
):
    """A stream of fixed-size elements whose runs carry variable-size payloads.

    Use it for annotations on token spans (for example concept lists): each element points at the
    payload of its run, and a read returns the payloads its window needs.

    Args:
        storage_dir: The storage directory (created by the first writer); ``directory=`` is
            another name for it.
        storage_format: A :class:`guideloom.storage.types.StreamWithMetaStorageFormat`.
        read_interface: How shard files are read (:class:`guideloom.storage.io.SeekIO` by default;
            a GuideLoom 1.1 ``IOReaderAbstract`` backend works too).
    """

    def __init__(
        self,
        storage_dir: str | os.PathLike[str] | None = None,
        storage_format: StreamWithMetaStorageFormat[InDataT, OutDataT, StreamDType] | None = None,
        read_interface: Any = None,
        *,
        directory: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(storage_dir, storage_format, read_interface, directory=directory)
        np.dtype(self.format.stream_dtype)

    def sync_writer(self) -> StreamWithMetaWriter:
        """Return a writer; use it as a context manager (commits on exit)."""
        return StreamWithMetaWriter(self)

    def sync_reader(self) -> StreamWithMetaReader[OutDataT]:
        """Open and validate every shard and return a reader."""
        return StreamWithMetaReader(self)

    def async_reader(self) -> AsyncStreamWithMetaReader[OutDataT]:
        """Like :meth:`sync_reader`, for asyncio code (``await reader.read(start, length)``)."""
        return AsyncStreamWithMetaReader(self)
