"""DocumentStorage: each record kept whole as one encoded document."""

from __future__ import annotations

import asyncio
import operator
import os
from array import array
from bisect import bisect_right
from typing import Any, Generic

import numpy as np

from guideloom.errors import FormatContractError
from guideloom.storage.abstract import Closed
from guideloom.storage.base import BaseStorage, BaseWriter, ShardState
from guideloom.storage.shards import (
    INDEX_DTYPE,
    ShardFileWriter,
    check_offsets,
    close_shards,
    open_shards,
)
from guideloom.storage.types import DocumentStorageFormat, InDataT, OutDataT

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


class DocumentReader(Generic[OutDataT]):
    """Reads documents by global index (shard 0's documents first). Thread-safe.

    ``len(reader)`` is the number of documents.
    """

    def __init__(self, storage: DocumentStorage[Any, OutDataT]) -> None:
        self._format = storage.format
        self._shards = open_shards(storage.directory, KIND, storage.read_interface, None, _SECTIONS)
        try:
            self._offsets: list[np.ndarray] = []
            self._data_offsets: list[int] = []
            for shard in self._shards:
                offsets = shard.read_index("record_offsets")
                data_offset, nbytes = shard.section("data")
                records = shard.footer["records"]
                check_offsets(shard.path, "record_offsets", offsets, records, nbytes)
                self._offsets.append(offsets)
                self._data_offsets.append(data_offset)
        except BaseException:
            close_shards(self._shards)
            raise
        self._files = [shard.file for shard in self._shards]
        self._starts = [0]
        for shard in self._shards:
            self._starts.append(self._starts[-1] + shard.footer["records"])
        self._total = self._starts[-1]

    def __len__(self) -> int:
        return self._total

    @property
    def num_shards(self) -> int:
        """Number of shards."""
        return len(self._shards)

    @property
    def total_length(self) -> int:
        """Number of documents (GuideLoom 1.1's name for ``len(reader)``)."""
        return self._total

    def length(self, shard: int) -> int:
        """Return the number of documents in ``shard``.

        Raises:
            IndexError: ``shard`` is not in ``range(num_shards)``.
        """
        number = operator.index(shard)
        if not 0 <= number < len(self._shards):
            raise IndexError(
                f"shard {shard} is out of range: the storage has {len(self._shards)} shards"
            )
        return self._starts[number + 1] - self._starts[number]

    def locate(self, index: Any) -> tuple[int, int]:
        """Return ``(shard, index within shard)`` of document ``index`` (negative counts back)."""
        if type(index) is not int:
            index = operator.index(index)
        if index < 0:
            index += self._total
        if not 0 <= index < self._total:
            raise IndexError(
                f"document index {index} is out of range (outside of size {self._total}, the "
                "number of documents)"
            )
        shard = bisect_right(self._starts, index) - 1
        return shard, index - self._starts[shard]

    def span(self, index: Any) -> tuple[int, int, int]:
        """Return ``(shard, byte offset in the shard file, nbytes)`` of document ``index``."""
        shard, local = self.locate(index)
        offsets = self._offsets[shard]
        begin, end = int(offsets[local]), int(offsets[local + 1])
        return shard, self._data_offsets[shard] + begin, end - begin

    def read_encoded(self, index: Any) -> tuple[bytes, int]:
        """Return ``(encoded bytes, shard)`` of document ``index``."""
        shard, offset, nbytes = self.span(index)
        return self._files[shard].read(offset, nbytes), shard

    async def aread_encoded(self, index: Any) -> tuple[bytes, int]:
        """Asynchronous :meth:`read_encoded` (through the file's ``areadinto``)."""
        shard, offset, nbytes = self.span(index)
        buffer = bytearray(nbytes)
        if nbytes:
            await self._files[shard].areadinto(offset, buffer)
        return bytes(buffer), shard

    def read(self, global_index: int) -> OutDataT:
        """Return document ``global_index`` decoded by the format.

        Raises:
            IndexError: No such document.
        """
        encoded, shard = self.read_encoded(global_index)
        return self._format.unpack(encoded, shard)

    def read_many(self, global_indexes: Any) -> list[OutDataT]:
        """Return the documents at ``global_indexes`` (ints or an integer array), in order.

        Raises:
            IndexError: An index is out of range (nothing is read).
        """
        wanted = _checked_indexes(global_indexes, self._total)
        return [self.read(i) for i in wanted]

    def open(self) -> None:
        """Nothing to do: the shards are opened when the reader is created (1.1 calls this)."""

    def close(self) -> None:
        """Close the shard files."""
        close_shards(self._shards)

    def __enter__(self) -> DocumentReader[OutDataT]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncDocumentReader(Generic[OutDataT]):
    """asyncio reader of a :class:`DocumentStorage` (GuideLoom 1.1's async document reader).

    ``await reader.read(i)`` and ``await reader.read_many(indices)``; use it as an async context
    manager. Shards are opened and validated when the reader is created. Reads go through the
    read interface's ``areadinto`` (a worker thread for local backends, a non-blocking request
    for the HTTP backend), so many reads can be awaited at once.
    """

    def __init__(self, storage: DocumentStorage[Any, OutDataT]) -> None:
        self._reader: DocumentReader[OutDataT] = DocumentReader(storage)
        self._format = storage.format

    def __len__(self) -> int:
        return len(self._reader)

    @property
    def num_shards(self) -> int:
        """Number of shards."""
        return self._reader.num_shards

    @property
    def total_length(self) -> int:
        """Number of documents."""
        return self._reader.total_length

    def length(self, shard: int) -> int:
        """Return the number of documents in ``shard``."""
        return self._reader.length(shard)

    async def read(self, global_index: int) -> OutDataT:
        """Return document ``global_index`` decoded by the format (negative counts back).

        Raises:
            IndexError: No such document.
        """
        encoded, shard = await self._reader.aread_encoded(global_index)
        return self._format.unpack(encoded, shard)

    async def open(self) -> None:
        """Nothing to do: the shards are opened when the reader is created."""

    async def read_many(self, global_indexes: Any) -> list[OutDataT]:
        """Return the documents at ``global_indexes`` (ints or an integer array), in request order.

        Every index is checked before anything is read; the reads run concurrently.

        Raises:
            IndexError: An index is out of range (nothing is read).
        """
        wanted = _checked_indexes(global_indexes, self._reader.total_length)
        return list(await asyncio.gather(*(self.read(i) for i in wanted)))

    def close(self) -> Closed:
        """Close the shard files (awaiting the result, as 1.1 code does, is optional)."""
        self._reader.close()
        return Closed()

    async def aclose(self) -> None:
        """Close the shard files."""
        self.close()

    async def __aenter__(self) -> AsyncDocumentReader[OutDataT]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class DocumentStorage(BaseStorage, Generic[InDataT, OutDataT]):
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
        self.format: DocumentStorageFormat[InDataT, OutDataT] = storage_format

    def sync_writer(self) -> DocumentWriter:
        """Return a writer; use it as a context manager (commits on exit)."""
        return DocumentWriter(self)

    def sync_reader(self) -> DocumentReader[OutDataT]:
        """Open and validate every shard and return a reader."""
        return DocumentReader(self)

    def async_reader(self) -> AsyncDocumentReader[OutDataT]:
        """Like :meth:`sync_reader`, for asyncio code (``async with``, ``await reader.read(i)``)."""
        return AsyncDocumentReader(self)
