"""DocumentStorage: each record kept whole as one encoded document."""

from __future__ import annotations

import operator
import os
from array import array
from bisect import bisect_right
from typing import Any, Generic

import numpy as np

from guideloom.errors import FormatContractError
from guideloom.storage.access import BLOCKING, CONCURRENT, Access, run
from guideloom.storage.base import BaseStorage, BaseWriter, ShardState
from guideloom.storage.copying import ShardSource
from guideloom.storage.facade import AsyncReader, SyncReader
from guideloom.storage.shards import (
    INDEX_DTYPE,
    ShardFileWriter,
    check_offsets,
    close_shards,
    open_shards,
)
from guideloom.storage.types import DocumentStorageFormat, InDataT, OutDataT, SampleT

__all__ = ["AsyncDocumentReader", "DocumentReader", "DocumentStorage", "DocumentWriter"]

KIND = "document"
_SECTIONS = ("data", "record_offsets")


class DocumentShardState(ShardState):
    """A document shard being written: the byte offset of each record."""

    def __init__(self, file: ShardFileWriter) -> None:
        super().__init__(file)
        self.byte_offsets = array("q", [0])
        file.begin_section("data")


class DocumentWriter(BaseWriter[DocumentShardState]):
    """Appends documents to shards of a :class:`DocumentStorage` (see :class:`BaseWriter`)."""

    kind = KIND
    sections = _SECTIONS

    def _new_state(self, file: ShardFileWriter) -> DocumentShardState:
        return DocumentShardState(file)

    def append(self, shard: int, data: Any) -> None:
        """Encode ``data`` with the storage format and append it to ``shard``."""
        encoded = self._storage.format.pack(data)
        if not isinstance(encoded, bytes | bytearray | memoryview):
            raise FormatContractError(
                f"format.pack() must return bytes, got {type(encoded).__name__}"
            )
        state = self._state(shard)
        view = memoryview(encoded).cast("B")
        state.file.write(view)
        state.records += 1
        state.byte_offsets.append(state.byte_offsets[-1] + len(view))

    def copy_records(self, shard: int, source: ShardSource, first: int, count: int) -> list[int]:
        """Append documents ``first .. first+count-1`` of the published shard ``source`` to
        ``shard`` as the bytes they are there (never decoded); return each one's element
        count (1: a document is one element)."""
        if not (first >= 0 and count >= 0 and first + count <= source.records):
            raise IndexError(f"documents {first}..{first + count - 1} are not in "
                             f"{source.path} ({source.records} documents)")
        state = self._state(shard)
        data, nbytes = source.section("data")
        span = source.record_offsets(nbytes)[first:first + count + 1]
        begin, end = int(span[0]), int(span[-1])
        state.file.copy_from(source.fd, data + begin, end - begin)
        state.byte_offsets.extend((span[1:] - begin + state.byte_offsets[-1]).tolist())
        state.records += count
        return [1] * count

    def _finish(self, state: DocumentShardState) -> None:
        state.file.end_section("data")
        state.file.write_section("record_offsets", np.asarray(state.byte_offsets, INDEX_DTYPE))
        state.file.commit({"kind": KIND, "elements": state.records, "records": state.records})


def _checked_indexes(global_indexes: Any, total: int) -> list[int]:
    """``global_indexes`` as ints, each in ``range(total)`` (negatives refused, as in 1.1)."""
    wanted = [operator.index(i) for i in np.asarray(global_indexes).reshape(-1).tolist()]
    for index in wanted:
        if not 0 <= index < total:
            raise IndexError(
                f"document index {index} is out of range (outside of size {total}, the number "
                "of documents); read_many takes no negative indexes"
            )
    return wanted


class DocumentCore:
    """The async core of both document readers: the shards' record offsets and the format."""

    def __init__(self, storage: BaseStorage) -> None:
        self.format = storage.format
        self.shards = open_shards(storage.directory, KIND, storage.read_interface, None,
                                  _SECTIONS)
        try:
            self.offsets: list[np.ndarray] = []
            self.data_offsets: list[int] = []
            for shard in self.shards:
                offsets = shard.read_index("record_offsets")
                data_offset, nbytes = shard.section("data")
                records = shard.footer["records"]
                check_offsets(shard.path, "record_offsets", offsets, records, nbytes)
                self.offsets.append(offsets)
                self.data_offsets.append(data_offset)
        except BaseException:
            close_shards(self.shards)
            raise
        self.files = [shard.file for shard in self.shards]
        self.starts = [0]
        for shard in self.shards:
            self.starts.append(self.starts[-1] + shard.footer["records"])
        self.total = self.starts[-1]

    @property
    def num_shards(self) -> int:
        """Number of shards."""
        return len(self.shards)

    def length(self, shard: Any) -> int:
        """Documents of ``shard`` (``IndexError`` outside ``range(num_shards)``)."""
        number = operator.index(shard)
        if not 0 <= number < len(self.shards):
            raise IndexError(
                f"shard {shard} is out of range: the storage has {len(self.shards)} shards"
            )
        return self.starts[number + 1] - self.starts[number]

    def locate(self, index: Any) -> tuple[int, int]:
        """Return ``(shard, index within shard)`` of document ``index`` (negative counts back)."""
        if type(index) is not int:
            index = operator.index(index)
        if index < 0:
            index += self.total
        if not 0 <= index < self.total:
            raise IndexError(
                f"document index {index} is out of range (outside of size {self.total}, the "
                "number of documents)"
            )
        shard = bisect_right(self.starts, index) - 1
        return shard, index - self.starts[shard]

    def span(self, index: Any) -> tuple[int, int, int]:
        """Return ``(shard, byte offset in the shard file, nbytes)`` of document ``index``."""
        shard, local = self.locate(index)
        offsets = self.offsets[shard]
        begin, end = int(offsets[local]), int(offsets[local + 1])
        return shard, self.data_offsets[shard] + begin, end - begin

    async def read_encoded(self, access: Access, index: Any) -> tuple[bytes, int]:
        """Return ``(encoded bytes, shard)`` of document ``index``."""
        shard, offset, nbytes = self.span(index)
        return await access.read(self.files[shard], offset, nbytes), shard

    async def read(self, access: Access, index: Any) -> Any:
        """Return document ``index`` decoded by the format."""
        shard, offset, nbytes = self.span(index)  # not through read_encoded: one await less
        return self.format.unpack(await access.read(self.files[shard], offset, nbytes), shard)

    async def read_many(self, access: Access, indexes: Any) -> list[Any]:
        """Return the documents at ``indexes``, in order; all are checked before any is read."""
        wanted = _checked_indexes(indexes, self.total)
        return await access.gather(*(self.read(access, i) for i in wanted))

    def close(self) -> None:
        """Close the shard files."""
        close_shards(self.shards)


class DocumentReader(SyncReader, Generic[SampleT]):
    """Reads documents by global index (shard 0's documents first). Thread-safe.

    ``len(reader)`` is the number of documents.
    """

    _core: DocumentCore

    def __init__(self, storage: DocumentStorage[Any, SampleT]) -> None:
        super().__init__(DocumentCore(storage))

    def locate(self, index: Any) -> tuple[int, int]:
        """Return ``(shard, index within shard)`` of document ``index`` (negative counts back)."""
        return self._core.locate(index)

    def span(self, index: Any) -> tuple[int, int, int]:
        """Return ``(shard, byte offset in the shard file, nbytes)`` of document ``index``."""
        return self._core.span(index)

    def read_encoded(self, index: Any) -> tuple[bytes, int]:
        """Return ``(encoded bytes, shard)`` of document ``index``."""
        return run(self._core.read_encoded(BLOCKING, index))

    def read(self, global_index: int) -> SampleT:
        """Return document ``global_index`` decoded by the format.

        Raises:
            IndexError: No such document.
        """
        return run(self._core.read(BLOCKING, global_index))

    def read_many(self, global_indexes: Any) -> list[SampleT]:
        """Return the documents at ``global_indexes`` (ints or an integer array), in order.

        Raises:
            IndexError: An index is out of range (nothing is read).
        """
        return run(self._core.read_many(BLOCKING, global_indexes))


class AsyncDocumentReader(AsyncReader, Generic[SampleT]):
    """asyncio reader of a :class:`DocumentStorage` (GuideLoom 1.1's async document reader).

    ``await reader.read(i)`` and ``await reader.read_many(indices)``; use it as an async context
    manager. Shards are opened and validated when the reader is created. Reads go through the
    read interface's ``areadinto`` (a worker thread for local backends, a non-blocking request
    for the HTTP backend), so many reads can be awaited at once.
    """

    _core: DocumentCore

    def __init__(self, storage: DocumentStorage[Any, SampleT]) -> None:
        super().__init__(DocumentCore(storage))

    async def read(self, global_index: int) -> SampleT:
        """Return document ``global_index`` decoded by the format (negative counts back).

        Raises:
            IndexError: No such document.
        """
        return await self._core.read(CONCURRENT, global_index)

    async def read_many(self, global_indexes: Any) -> list[SampleT]:
        """Return the documents at ``global_indexes`` (ints or an integer array), in request order.

        Every index is checked before anything is read; the reads run concurrently.

        Raises:
            IndexError: An index is out of range (nothing is read).
        """
        return await self._core.read_many(CONCURRENT, global_indexes)


class DocumentStorage(
    BaseStorage[DocumentStorageFormat[InDataT, OutDataT]], Generic[InDataT, OutDataT]
):
    """Records kept whole, each encoded to bytes by the format.

    Args:
        storage_dir: The storage directory (created by the first writer); ``directory=`` is
            another name for it.
        storage_format: A :class:`guideloom.storage.types.DocumentStorageFormat`, for example
            :class:`guideloom.storage.DocumentPickleFormat` (trusted data only).
        read_interface: How shard files are read (:class:`guideloom.storage.io.SeekIO` by default;
            a GuideLoom 1.1 ``IOReaderAbstract`` backend works too).
    """

    def __init__(
        self,
        storage_dir: str | os.PathLike[str] | None = None,
        storage_format: DocumentStorageFormat[InDataT, OutDataT] | None = None,
        read_interface: Any = None,
        *,
        directory: str | os.PathLike[str] | None = None,
    ) -> None:
        super().__init__(storage_dir, storage_format, read_interface, directory=directory)

    def sync_writer(self) -> DocumentWriter:
        """Return a writer; use it as a context manager (commits on exit)."""
        return DocumentWriter(self)

    def sync_reader(self) -> DocumentReader[OutDataT]:
        """Open and validate every shard and return a reader."""
        return DocumentReader(self)

    def async_reader(self) -> AsyncDocumentReader[OutDataT]:
        """Like :meth:`sync_reader`, for asyncio code (``async with``, ``await reader.read(i)``)."""
        return AsyncDocumentReader(self)
