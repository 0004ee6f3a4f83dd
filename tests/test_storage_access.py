"""The storage readers' one async core: sync façades run it without an event loop, asyncio
façades await it, and both give the same samples."""

from __future__ import annotations

import asyncio
import os
import threading

import numpy as np
import pytest

from guideloom import DocumentPickleFormat, StreamNumpyFormat
from guideloom.storage import DocumentStorage, StreamStorage, StreamWithMetaStorage
from guideloom.storage.access import BLOCKING, run
from guideloom.storage.io import SeekIO
from guideloom.storage.types import FileReader, ReadInterface
from tests.test_storage_stream_meta import ConceptFormat

DTYPE = np.dtype([("tokens", "<i4"), ("document_ids", "<u4")])


class CountingIO(ReadInterface):
    """A read interface (SeekIO underneath) that counts blocking and awaited reads."""

    def __init__(self) -> None:
        self.calls = {"readinto": 0, "read": 0, "areadinto": 0}
        self.loop_threads: set[int] = set()

    def open(self, path: str | os.PathLike[str]) -> FileReader:
        return _CountingFile(SeekIO().open(path), self)


class _CountingFile(FileReader):
    def __init__(self, file: FileReader, io: CountingIO) -> None:
        self._file, self._io = file, io

    def size(self) -> int:
        return self._file.size()

    def readinto(self, offset, buffer) -> None:
        self._io.calls["readinto"] += 1
        self._file.readinto(offset, buffer)

    def read(self, offset, nbytes) -> bytes:
        self._io.calls["read"] += 1
        return self._file.read(offset, nbytes)

    async def areadinto(self, offset, buffer) -> None:
        self._io.calls["areadinto"] += 1
        self._io.loop_threads.add(threading.get_ident())
        await asyncio.sleep(0)  # a real suspension: the sync path could not run this
        self._file.readinto(offset, buffer)

    def close(self) -> None:
        self._file.close()


def stream_storage(tmp_path, io=None):
    storage = StreamStorage(tmp_path / "s", StreamNumpyFormat(DTYPE), read_interface=io)
    with storage.sync_writer() as writer:
        for shard in range(3):
            for doc in range(4):
                n = 5 + 3 * doc + shard
                writer.append(shard, {"tokens": np.arange(n, dtype="<i4") + 100 * shard,
                                      "document_ids": np.full(n, doc, dtype="<u4")})
    return storage


def assert_same(a, b) -> None:
    assert type(a) is type(b)
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            assert_same(a[key], b[key])
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype
        assert np.array_equal(a, b)
    else:
        assert a == b


def test_the_sync_reader_reads_blocking_and_the_async_reader_awaits(tmp_path):
    io = CountingIO()
    storage = stream_storage(tmp_path, io)
    total = storage.sync_reader().num_elements
    windows = [(0, 7), (10, 40), (total - 3, 9), (total - 1, 0), (5, total + 11)]
    with storage.sync_reader() as reader:
        before = dict(io.calls)
        sync = [reader.read(start, length) for start, length in windows]
        assert io.calls["areadinto"] == before["areadinto"]
        assert io.calls["readinto"] > before["readinto"]

    async def main():
        async with storage.async_reader() as reader:
            return [await reader.read(start, length) for start, length in windows]

    before = dict(io.calls)
    awaited = asyncio.run(main())
    assert io.calls["readinto"] == before["readinto"]  # the file's own readinto, counted apart
    assert io.calls["areadinto"] > before["areadinto"]
    for a, b in zip(sync, awaited, strict=True):
        assert_same(a, b)


def test_a_sync_reader_works_inside_a_running_event_loop(tmp_path):
    """No event loop of its own, no loop thread: calling it from async code cannot deadlock."""
    storage = stream_storage(tmp_path)
    threads = set(threading.enumerate())
    with storage.sync_reader() as reader:
        expected = reader.read(3, 30)

        async def main():
            return reader.read(3, 30)

        assert_same(asyncio.run(main()), expected)
        assert set(threading.enumerate()) == threads


def test_all_three_kinds_agree_sync_and_async(tmp_path):
    docs = DocumentStorage(tmp_path / "d", DocumentPickleFormat())
    with docs.sync_writer() as writer:
        for i in range(10):
            writer.append(i % 3, {"i": i, "payload": list(range(i))})
    meta = StreamWithMetaStorage(tmp_path / "m", ConceptFormat())
    with meta.sync_writer() as writer:
        for shard in range(3):
            writer.append(shard, [([1, 2, 3], [shard]), ([4, 5], [shard, 9])])
            writer.append(shard, [([6], [7])])

    async def main():
        async with docs.async_reader() as d, meta.async_reader() as m:
            return ([await d.read(i) for i in range(10)], await d.read_many([9, 0, 4]),
                    [await m.read(i, 5) for i in range(len(m))])

    with docs.sync_reader() as d, meta.sync_reader() as m:
        sync = ([d.read(i) for i in range(10)], d.read_many([9, 0, 4]),
                [m.read(i, 5) for i in range(len(m))])
    awaited = asyncio.run(main())
    order = [0, 3, 6, 9, 1, 4, 7, 2, 5, 8]  # shard 0's documents first
    assert sync[0] == awaited[0] == [{"i": i, "payload": list(range(i))} for i in order]
    assert sync[1] == awaited[1]
    for a, b in zip(sync[2], awaited[2], strict=True):
        assert_same(a, b)


def test_run_refuses_a_core_that_suspends():
    async def suspends():
        await asyncio.sleep(0)
        return 1

    coroutine = suspends()
    with pytest.raises(RuntimeError, match="suspended"):
        run(coroutine)
    assert coroutine.cr_frame is None  # closed, not left pending


def test_a_failed_blocking_gather_leaves_no_pending_read():
    async def fails():
        raise OSError("disk")

    async def never():
        return 2

    reads = [never(), fails(), never(), never()]
    with pytest.raises(OSError, match="disk"):
        run(BLOCKING.gather(*reads))
    assert all(read.cr_frame is None for read in reads)  # each ran or was closed
