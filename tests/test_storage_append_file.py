"""The shard files' write path (guideloom/storage/append_file.py): whole blocks written with
direct I/O from a buffer while the other fills, partial blocks buffered; every byte read back
in place, with and without direct I/O, across flushes and kernel copies in the middle."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest

from guideloom.runtime import fallbacks
from guideloom.storage import append_file
from guideloom.storage.append_file import AppendFile


def _pieces(seed: int, count: int, longest: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 256, int(rng.integers(0, longest)), dtype=np.uint8).tobytes()
            for _ in range(count)]


@pytest.mark.parametrize("direct", [True, False])
@pytest.mark.parametrize("capacity", [4096, 8192, 1 << 20])
def test_appended_bytes_read_back_in_place(tmp_path, monkeypatch, direct, capacity):
    monkeypatch.setattr(append_file, "CAPACITY", capacity)
    path = tmp_path / "f.bin"
    out = AppendFile(path, direct=direct)
    want = bytearray()
    for k, piece in enumerate(_pieces(1, 400, 3 * capacity // 2)):
        if k % 3 == 0:  # written through the buffer (pieces larger than it included)
            out.write(piece)
        elif k % 3 == 1:  # packed in place, as the stream writer does
            space = out.space()
            if len(space) < len(piece):
                out.drain()
                space = out.space()
            if len(space) < len(piece):
                out.write(piece)
            else:
                space[:len(piece)] = piece
                out.advance(len(piece))
        else:  # flushed, then appended behind the buffer (a kernel copy of another shard's)
            out.flush()
            os.pwrite(out.fileno(), piece, out.position)
            out.appended_by_kernel(len(piece))
        want += piece
        assert out.position == len(want)
    out.sync()
    out.close()
    assert out.closed
    assert path.read_bytes() == bytes(want)


def test_where_direct_io_is_refused_the_bytes_are_written_buffered():
    shm = Path("/dev/shm")
    if not shm.is_dir() or not os.access(shm, os.W_OK):
        pytest.skip("no /dev/shm (tmpfs, which refuses O_DIRECT) here")
    path = shm / f"guideloom-append-{os.getpid()}.bin"
    if append_file.O_DIRECT:
        try:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT | append_file.O_DIRECT, 0o600))
            path.unlink()
            pytest.skip("this kernel's tmpfs accepts O_DIRECT: no file system here refuses it")
        except OSError:
            pass
    before = fallbacks.snapshot().get("storage:o_direct_refused", 0)
    try:
        out = AppendFile(path)
        pieces = _pieces(2, 50, 300_000)
        for piece in pieces:
            out.write(piece)
        out.sync()
        out.close()
        assert path.read_bytes() == b"".join(pieces)
    finally:
        path.unlink(missing_ok=True)
    if append_file.O_DIRECT:  # a platform with direct I/O: tmpfs said no, and it was counted
        assert fallbacks.snapshot().get("storage:o_direct_refused", 0) > before


def test_the_helper_thread_ends_with_the_file(tmp_path, monkeypatch):
    monkeypatch.setattr(append_file, "CAPACITY", 8192)
    out = AppendFile(tmp_path / "f.bin")
    out.write(bytes(100_000))  # several buffers: the helper thread writes them
    assert any(t.name.startswith("guideloom-shard-write") for t in threading.enumerate())
    out.sync()
    out.close()
    assert not any(t.name.startswith("guideloom-shard-write") for t in threading.enumerate())
    assert (tmp_path / "f.bin").stat().st_size == 100_000


def test_advance_refuses_more_than_the_buffer_holds(tmp_path):
    out = AppendFile(tmp_path / "f.bin")
    try:
        with pytest.raises(ValueError, match="do not fit"):
            out.advance(len(out.space()) + 1)
    finally:
        out.close()


def test_the_writer_fills_free_buffers_while_writes_are_under_way(tmp_path, monkeypatch):
    """Direct writes that do not return (held at a gate): the writer still fills and hands
    over buffers up to MAX_BUFFERS, with IN_FLIGHT writes under way at once and no more; the
    bytes read back whole once the writes are let go."""
    if not append_file.O_DIRECT:
        pytest.skip("no O_DIRECT on this platform")
    monkeypatch.setattr(append_file, "CAPACITY", 8192)
    gate, started = threading.Event(), threading.Condition()
    running = [0, 0]  # now, most at once
    real_pwrite = append_file.pwrite

    def held_pwrite(fd: int, data: memoryview, offset: int) -> int:
        with started:
            running[0] += 1
            running[1] = max(running[1], running[0])
            started.notify_all()
        try:
            if offset:  # the first write (at 0) goes through: direct I/O is proven
                assert gate.wait(timeout=60)
            return real_pwrite(fd, data, offset)
        finally:
            with started:
                running[0] -= 1

    monkeypatch.setattr(append_file, "pwrite", held_pwrite)
    out = AppendFile(tmp_path / "f.bin")
    if out._direct is None:
        out.close()
        pytest.skip("this file system refuses O_DIRECT")
    data = np.random.default_rng(3).integers(0, 256, 8192 * 12, dtype=np.uint8).tobytes()
    # every buffer handed over but the last, which stays one byte short of full
    held = 8192 * (append_file.MAX_BUFFERS + 1) - 1
    filled = threading.Event()

    def fill() -> None:
        out.write(data[:8192])  # the first buffer: its write runs alone, and goes through
        for start in range(8192, held, 1000):
            out.write(data[start:min(start + 1000, held)])
        filled.set()

    writer = threading.Thread(target=fill)
    writer.start()
    try:
        assert filled.wait(timeout=60), "the writer waited for a write while a buffer was free"
        with started:  # the helper threads pick up the handed-over buffers in their own time
            assert started.wait_for(lambda: running[0] >= append_file.IN_FLIGHT, timeout=60)
            assert running[0] == append_file.IN_FLIGHT  # writes under way at once, rest queued
        assert len(out._buffers) == append_file.MAX_BUFFERS
    finally:
        gate.set()
        writer.join()
    out.write(data[held:])  # past every buffer: the writer now waits for the oldest write
    out.sync()
    out.close()
    assert running[1] == append_file.IN_FLIGHT
    assert (tmp_path / "f.bin").read_bytes() == data
