"""npy rows written with direct I/O: the padded header, the aligned path and every fallback."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

import numpy as np
import pytest

import guideloom
from guideloom.demo import make_demo_data
from guideloom.formats.npy import NpySink, check_npy, create_npy, npy_data_offset
from guideloom.runtime.buffers import PAGE, aligned_empty


def _direct_io_works(folder: Path) -> bool:
    flag = getattr(os, "O_DIRECT", 0)
    if not flag:
        return False
    try:
        fd = os.open(folder / ".probe", os.O_WRONLY | os.O_CREAT | flag, 0o600)
    except OSError:
        return False
    os.close(fd)
    os.unlink(folder / ".probe")
    return True


class Schema:
    def __init__(self, shape, dtype):
        self.shape, self.dtype = shape, dtype


@pytest.mark.parametrize("shape", [(5, 1024), (3, 7), (2, *(1,) * 30, 512)])
def test_created_npy_has_page_aligned_data_and_loads(tmp_path, shape):
    path = str(tmp_path / "a.npy")
    offset = create_npy(path, shape, np.dtype("<f4"))
    assert offset % PAGE == 0
    assert npy_data_offset(path) == offset
    check_npy(str(tmp_path), "a.npy", shape, "<f4")  # the reader's open-time check passes
    arr = np.load(path, mmap_mode="r")
    assert arr.shape == shape
    assert arr.dtype == np.dtype("<f4")
    assert os.path.getsize(path) == offset + arr.nbytes


def test_aligned_rows_go_direct_and_others_buffered(tmp_path):
    path = str(tmp_path / "rows.npy")
    create_npy(path, (4, 2048), np.dtype("<f4"))  # rows of 8192 bytes: two pages
    sink = NpySink({"x": path}, {"x": Schema((2048,), "<f4")})
    aligned = aligned_empty((2048,), "<f4")
    aligned[:] = np.arange(2048)
    sink.write(0, 10, {"x": aligned})
    sink.write(1, 11, {"x": np.arange(2048, dtype="<f4")[::-1].copy()})
    unaligned = np.empty(2049, "<f4")[1:]  # 4 bytes off a page at best
    unaligned[:] = 7
    sink.write(2, 12, {"x": unaligned})
    direct = sink.direct_bytes
    assert sink.close() == 3 * 8192
    rows = np.load(path)
    assert (rows[0] == np.arange(2048)).all()
    assert (rows[1] == np.arange(2048)[::-1]).all()
    assert (rows[2] == 7).all()
    assert (rows[3] == 0).all()
    if _direct_io_works(tmp_path):
        assert direct >= 8192  # at least the page-aligned decode buffer went direct
        assert direct <= 2 * 8192  # never the unaligned one
    else:
        assert direct == 0


def _export_and_compare(data: Path, target: Path) -> guideloom.Export:
    ds = guideloom.load(data_dir=data)
    where = lambda row: bool(row["has_pointcloud"])  # noqa: E731
    guideloom.export_to_numpy("pointcloud-op10", target, dataset=ds, where=where,
                              partition_size=4, client="sync")
    records = list(guideloom.streaming.iter_view("pointcloud-op10", dataset=ds, data_dir=data,
                                                 where=where))
    export = guideloom.load_export(target)
    assert list(export.sim_ids) == [r["_sim_id"] for r in records]
    for alias in ("pointcloud_op10_z", "pointcloud_op10_luminescence"):
        rows = np.load(target / f"{alias}.npy")
        assert rows.nbytes // len(rows) % PAGE == 0  # whole pages: the direct path applies
        for k, rec in enumerate(records):
            assert rows[k].tobytes() == rec[alias].tobytes()
    export.verify()
    return export


def test_export_of_whole_page_rows_is_exact(tmp_path):
    make_demo_data(tmp_path / "data", n=10, scan_shape=(128, 256), seed=2)
    _export_and_compare(tmp_path / "data", tmp_path / "out")


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="no /dev/shm (tmpfs) here")
def test_export_to_tmpfs_is_exact(tmp_path):
    """tmpfs: direct I/O is refused at open by older kernels and taken by newer ones; either way
    the rows are the experiments' own."""
    import tempfile

    make_demo_data(tmp_path / "data", n=6, scan_shape=(128, 256), seed=4)
    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        _export_and_compare(tmp_path / "data", Path(shm) / "out")


def _write_rows(path: str) -> NpySink:
    create_npy(path, (3, 2048), np.dtype("<f4"))
    sink = NpySink({"x": path}, {"x": Schema((2048,), "<f4")})
    for k in range(3):
        row = aligned_empty((2048,), "<f4")
        row[:] = np.arange(2048) * (k + 1)
        sink.write(k, 10 + k, {"x": row})
    return sink


def _assert_rows(path: str) -> None:
    rows = np.load(path)
    for k in range(3):
        assert (rows[k] == np.arange(2048) * (k + 1)).all()


def test_a_file_system_that_refuses_direct_io_at_open_gets_buffered_rows(tmp_path, monkeypatch):
    """Where ``open(O_DIRECT)`` fails (older tmpfs, some network file systems), every row takes
    the buffered path. This kernel's file systems all accept the flag, so the refusal is the
    real ``open`` given a flag it rejects (``O_DIRECT | O_DIRECTORY`` on a file: ENOTDIR)."""
    from guideloom.formats import npy

    flag = getattr(os, "O_DIRECT", 0)
    if not flag:
        pytest.skip("no O_DIRECT on this platform")
    monkeypatch.setattr(npy.os, "O_DIRECT", flag | os.O_DIRECTORY)
    path = str(tmp_path / "rows.npy")
    sink = _write_rows(path)
    assert sink.direct_bytes == 0
    assert sink._direct["x"] is None
    assert sink.close() == 3 * 8192
    _assert_rows(path)


def test_direct_io_refused_at_write_falls_back_once_and_for_good(tmp_path, monkeypatch):
    """Where the file system opens with O_DIRECT but refuses the write (EINVAL: alignment it
    wants bigger than a page), the row is written buffered, the direct descriptor is closed and
    no later row tries it again."""
    import errno

    from guideloom.formats import npy

    if not _direct_io_works(tmp_path):
        pytest.skip("no direct I/O on this file system")
    real_pwrite = os.pwrite
    direct_fds: set[int] = set()
    refused = []
    real_open_direct = npy._open_direct

    def open_direct(path: str) -> int | None:
        fd = real_open_direct(path)
        if fd is not None:
            direct_fds.add(fd)
        return fd

    def pwrite(fd: int, data, offset: int) -> int:
        if fd in direct_fds:
            refused.append(fd)
            raise OSError(errno.EINVAL, "Invalid argument")
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(npy, "_open_direct", open_direct)
    monkeypatch.setattr(npy.os, "pwrite", pwrite)
    path = str(tmp_path / "rows.npy")
    from guideloom.runtime import fallbacks

    before = fallbacks.snapshot()
    sink = _write_rows(path)
    assert len(refused) == 1  # tried once, on the first row only
    assert fallbacks.since(before) == {"npy:o_direct_refused": 1}  # counted for export.json
    assert sink.direct_bytes == 0
    assert sink._direct["x"] is None
    with pytest.raises(OSError):
        os.fstat(refused[0])  # the refused descriptor was closed
    assert sink.close() == 3 * 8192
    _assert_rows(path)


def test_small_buffered_rows_start_their_writeback_in_runs(tmp_path, monkeypatch):
    from guideloom.formats import npy
    from guideloom.runtime import os_support

    advised: list[tuple[int, int]] = []
    real = os_support.advise

    def spy(fd, offset, length, advice):
        advised.append((offset, length))
        return real(fd, offset, length, advice)

    monkeypatch.setattr(os_support, "advise", spy)
    path = str(tmp_path / "rows.npy")
    n, row = 400, 32000  # the seed transform's force rows: not whole pages, buffered
    create_npy(path, (n, row // 4), np.dtype("<f4"))
    sink = NpySink({"x": path}, {"x": Schema((row // 4,), "<f4")})
    for i in range(n):
        sink.write(i, i, {"x": np.full(row // 4, i, "<f4")})
    sink.close()
    start = npy_data_offset(path)
    runs = len(advised)
    assert runs == n * row // npy.WRITEBACK_BYTES  # 12.8 MB: twelve runs of >= 1 MiB
    assert advised[0][0] == start
    assert all(length >= npy.WRITEBACK_BYTES for _, length in advised)
    assert all(a + la == b for (a, la), (b, _) in itertools.pairwise(advised))
    assert (np.load(path)[:, 0] == np.arange(n)).all()


def test_a_default_partition_of_small_rows_leaves_little_to_its_fsync(tmp_path, monkeypatch):
    """The 2,000-experiment force-signals export's partitions (job_partition_size: 127 rows of
    32 kB, 4.06 MB) start most of their writeback while the task still runs: with runs of 4 MiB
    none did, and each partition's fsync wrote all its rows with the task waiting."""
    from guideloom.cluster.runtime import job_partition_size
    from guideloom.formats import npy
    from guideloom.runtime import os_support

    advised: list[int] = []
    real = os_support.advise

    def spy(fd, offset, length, advice):
        advised.append(length)
        return real(fd, offset, length, advice)

    monkeypatch.setattr(os_support, "advise", spy)
    n, row = job_partition_size(2_000, 1.5787 / 2_000), 32000  # the benchmark's estimate
    assert n == 127
    path = str(tmp_path / "rows.npy")
    create_npy(path, (n, row // 4), np.dtype("<f4"))
    sink = NpySink({"x": path}, {"x": Schema((row // 4,), "<f4")})
    for i in range(n):
        sink.write(i, i, {"x": np.full(row // 4, i, "<f4")})
    sink.close()
    left = n * row - sum(advised)  # what the fsync alone writes back
    assert left < npy.WRITEBACK_BYTES, (n * row, advised)
    assert left <= n * row // 4, (n * row, advised)


def test_small_rows_are_written_in_batches_of_consecutive_rows(tmp_path, monkeypatch):
    """Buffered rows of a field are copied into a batch and written one run of consecutive
    rows per pwrite (about WRITEBACK_BYTES each; a gap in the rows starts a new run), and
    every byte lands where a write per row would put it; close writes what is left."""
    from guideloom.formats import npy

    calls: list[tuple[int, int]] = []
    real = os.pwrite

    def counting(fd, data, offset):
        calls.append((offset, len(data)))
        return real(fd, data, offset)

    monkeypatch.setattr(npy.os, "pwrite", counting)
    n, row = 100, 32000
    paths = {"x": str(tmp_path / "x.npy"), "s": str(tmp_path / "s.npy")}
    create_npy(paths["x"], (n, row // 4), np.dtype("<f4"))
    create_npy(paths["s"], (n,), np.dtype("<i8"))
    sink = NpySink(paths, {"x": Schema((row // 4,), "<f4"), "s": Schema((), "<i8")})
    written = [i for i in range(n) if i != 50]  # a skipped experiment: two runs
    for i in written:
        kept = np.full(row // 4, i, "<f4")
        sink.write(i, 1000 + i, {"x": kept, "s": np.asarray(i * 3, "<i8")})
        kept[:] = -1  # the caller reuses its arrays at once: the batch holds a copy
    assert sink.close() == len(written) * (row + 8)
    per_run = -(-npy.WRITEBACK_BYTES // row)  # 33 rows
    runs_x = -(-50 // per_run) + -(-49 // per_run)  # rows 0-49 and 51-99
    assert len(calls) == runs_x + 2  # and the scalar field's two runs
    x, s = np.load(paths["x"]), np.load(paths["s"])
    for i in range(n):
        assert (x[i] == (0 if i == 50 else i)).all()
        assert s[i] == (0 if i == 50 else i * 3)
    digests = sink.extra_summary()
    if digests:  # one checksum per row written, as before
        assert digests["checksums"]["x.npy"]["order"] == written


def test_a_batch_that_cannot_be_written_names_its_experiments_and_rows(tmp_path, monkeypatch):
    import errno

    from guideloom.formats import npy

    def full(fd, data, offset):
        raise OSError(errno.ENOSPC, "No space left on device")

    path = str(tmp_path / "x.npy")
    create_npy(path, (4, 8), np.dtype("<f4"))
    sink = NpySink({"x": path}, {"x": Schema((8,), "<f4")})
    for i in range(3):
        sink.write(i, 70 + i, {"x": np.full(8, i, "<f4")})
    monkeypatch.setattr(npy.os, "pwrite", full)
    with pytest.raises(OSError) as raised:
        sink.close()
    assert raised.value.errno == errno.ENOSPC
    assert "experiments 70 to 72: cannot write rows 0 to 2 of" in str(raised.value)
    assert "free space there" in str(raised.value)
    assert sink._fds == {}  # every descriptor closed


def test_after_write_apart_each_small_row_is_written_by_its_own_call(tmp_path, monkeypatch):
    """A sink told the caller writes fields apart (streamed fields) batches nothing more: the
    rows held are written at once, and a failed write raises from the write that failed."""
    import errno

    from guideloom.formats import npy

    path = str(tmp_path / "x.npy")
    create_npy(path, (4, 8), np.dtype("<f4"))
    sink = NpySink({"x": path}, {"x": Schema((8,), "<f4")})
    sink.write(0, 70, {"x": np.full(8, 1, "<f4")})  # batched
    sink.write_apart()  # writes row 0 now
    assert np.load(path)[0].tolist() == [1.0] * 8

    def full(fd, data, offset):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(npy.os, "pwrite", full)
    with pytest.raises(OSError, match="experiment 71: cannot write row 1 of"):
        sink.write(1, 71, {"x": np.full(8, 2, "<f4")})
    monkeypatch.undo()
    sink.close()
