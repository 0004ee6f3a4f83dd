"""Writes that overlap the next record's decode: order, errors, buffers, skipped records."""

from __future__ import annotations

import threading

import h5py
import numpy as np
import pytest

import guideloom
from guideloom.demo import make_demo_data
from guideloom.export.overlap import OverlappedWrites
from guideloom.formats.base import PartitionSink


class RecordingSink(PartitionSink):
    """Keeps copies of what it was given; fails on row ``fail_at``."""

    def __init__(self, fail_at: int | None = None):
        self.rows: list[tuple[int, bytes, str]] = []
        self.fail_at = fail_at
        self.closed = self.aborted = False

    def write(self, row, sim_id, arrays):
        if row == self.fail_at:
            raise OSError(28, f"No space left on device while writing row {row}")
        self.rows.append((row, arrays["x"].tobytes(), threading.current_thread().name))

    def close(self):
        self.closed = True
        return len(self.rows)

    def abort(self):
        self.aborted = True


def _sets():
    return ({"x": np.zeros(4)}, {"x": np.zeros(4)})


def test_rows_arrive_in_order_and_buffers_alternate():
    sink = RecordingSink()
    writes = OverlappedWrites(sink, _sets())
    used = []
    for k in range(6):
        buf = writes.buffers()["x"]
        used.append(id(buf))
        buf[:] = k  # "decode" record k
        writes.write(k, k, {"x": buf})
    assert writes.close() == 6
    assert sink.closed
    assert [r for r, _, _ in sink.rows] == list(range(6))
    assert [np.frombuffer(b)[0] for _, b, _ in sink.rows] == [float(k) for k in range(6)]
    assert all(name.startswith("guideloom-write") for _, _, name in sink.rows)
    assert used[0] != used[1]
    assert used[0] == used[2]
    assert used[1] == used[3]
    assert writes.busy_s >= 0


def test_a_failed_write_is_raised_by_the_next_call_and_nothing_after_it_is_written():
    sink = RecordingSink(fail_at=2)
    writes = OverlappedWrites(sink, _sets())
    with pytest.raises(OSError, match="row 2"):
        for k in range(6):
            writes.write(k, k, {"x": writes.buffers()["x"]})
    writes.abort()
    assert sink.aborted
    assert not sink.closed
    assert [r for r, _, _ in sink.rows] == [0, 1]


def test_a_failed_last_write_is_raised_by_close():
    sink = RecordingSink(fail_at=1)
    writes = OverlappedWrites(sink, _sets())
    writes.write(0, 0, {"x": writes.buffers()["x"]})
    writes.write(1, 1, {"x": writes.buffers()["x"]})
    with pytest.raises(OSError, match="row 1"):
        writes.close()


def test_skipped_experiment_between_overlapped_writes(tmp_path):
    """npy without transforms (overlapped writes): an experiment that cannot be read is skipped
    and every other row holds its own experiment's data, in sim_ids order."""
    make_demo_data(tmp_path / "data", n=12, scan_shape=(180, 200), layout="loose", seed=5)
    ds = guideloom.load(data_dir=tmp_path / "data")
    where = lambda row: bool(row["has_pointcloud"])  # noqa: E731
    records = list(guideloom.streaming.iter_view("pointcloud-op10", dataset=ds,
                                                 data_dir=tmp_path / "data", where=where))
    victim = records[2]["_sim_id"]
    (path,) = (tmp_path / "data").rglob(f"{victim:04d}.h5")
    with h5py.File(path, "a") as f:
        del f["pointcloud/op10/z"]
    with pytest.warns(guideloom.SkippedDataWarning):
        guideloom.export_to_numpy("pointcloud-op10", tmp_path / "out", dataset=ds, where=where,
                                  on_error="skip", partition_size=20, client="sync")
    ids = list(np.load(tmp_path / "out" / "sim_ids.npy"))
    kept = [r for r in records if r["_sim_id"] != victim]
    assert ids == [r["_sim_id"] for r in kept]
    z = np.load(tmp_path / "out" / "pointcloud_op10_z.npy")
    for k, rec in enumerate(kept):
        assert z[k].tobytes() == rec["pointcloud_op10_z"].tobytes()
