"""The I/O backends of guideloom.storage.io and a user-defined one."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from guideloom import StreamDataset, StreamNumpyFormat, StreamStorage
from guideloom.storage.io import MmapIO, PosixPreadIO, SeekIO, resolve_read_interface
from guideloom.storage.types import FileReader, ReadInterface

BACKENDS = [SeekIO, MmapIO, PosixPreadIO]


@pytest.mark.parametrize("backend", BACKENDS)
def test_backend_reads(tmp_path, backend):
    assert backend.is_supported()
    path = tmp_path / "f.bin"
    path.write_bytes(bytes(range(256)) * 4)
    with backend().open(path) as file:
        assert file.size() == 1024
        buffer = np.zeros(10, dtype=np.uint8)
        file.readinto(250, buffer)
        assert buffer.tolist() == [250, 251, 252, 253, 254, 255, 0, 1, 2, 3]
        assert file.read(1020, 4) == bytes([252, 253, 254, 255])
        assert file.read(5, 0) == b""
        with pytest.raises(EOFError):
            file.readinto(1020, bytearray(5))


def test_seek_backend_gives_each_thread_its_own_handle(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(np.arange(100_000, dtype="<i4").tobytes())
    results = []
    with SeekIO().open(path) as file:

        def work(offset):
            ok = True
            for _ in range(200):
                buffer = np.zeros(1000, dtype="<i4")
                file.readinto(offset * 4, buffer.view(np.uint8))
                ok &= buffer.tolist() == list(range(offset, offset + 1000))
            results.append(ok)

        threads = [threading.Thread(target=work, args=(o,)) for o in (0, 50_000)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert results == [True, True]


def test_resolve_read_interface():
    assert isinstance(resolve_read_interface(None), SeekIO)
    assert isinstance(resolve_read_interface(MmapIO), MmapIO)
    with pytest.raises(TypeError):
        resolve_read_interface("mmap")


class _WholeFileReader(FileReader):
    """Serves range reads from one fetched byte string, as an HTTP range backend would."""

    def __init__(self, data: bytes, log: list[tuple[int, int]]) -> None:
        self._data, self._log = data, log

    def size(self) -> int:
        return len(self._data)

    def readinto(self, offset, buffer):
        view = memoryview(buffer).cast("B")
        chunk = self._data[offset : offset + len(view)]
        if len(chunk) != len(view):
            raise EOFError("short read")
        self._log.append((offset, len(view)))
        view[:] = chunk

    def close(self) -> None:
        self._data = b""


class RangeIO(ReadInterface):
    def __init__(self) -> None:
        self.log: list[tuple[int, int]] = []

    def open(self, path):
        with open(path, "rb") as handle:
            return _WholeFileReader(handle.read(), self.log)


def test_user_defined_backend(tmp_path):
    fmt = StreamNumpyFormat("<u2")
    with StreamStorage(tmp_path, fmt).sync_writer() as writer:
        writer.append(0, np.arange(10))
        writer.append(1, np.arange(10, 25))
    backend = RangeIO()
    with StreamDataset(StreamStorage(tmp_path, fmt, backend), sequence_length=6).sync_reader() as r:
        assert len(r) == 4
        assert r[1].tolist() == [6, 7, 8, 9, 10, 11]
    assert backend.log[-2:] == [(12, 8), (0, 4)]  # the window's two shard segments
