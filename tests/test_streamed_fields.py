"""Each field written while the next decodes (export/streamed.py): the same rows and checksums as
the plain path, a failed write naming its experiment, a record failing after a field was
written leaving no trace in what is published, and no thread left behind."""

from __future__ import annotations

import json
import os
import threading

import h5py
import numpy as np
import pytest

import guideloom
from guideloom.demo import make_demo_data
from guideloom.export.spec import FieldSchema
from guideloom.export.streamed import StreamedFields
from guideloom.formats.base import PartitionSink
from guideloom.formats.npy import NpySink, create_npy

VIEW = "pointcloud-op10"


def _same(record):
    """A record transform that changes nothing: the executor then takes the plain path (no
    reused buffers, each record written whole after it is read)."""
    return record


def _writers() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("guideloom-write")]


@pytest.fixture(scope="module")
def scans(tmp_path_factory):
    root = tmp_path_factory.mktemp("streamed")
    make_demo_data(root, n=10, scan_shape=(120, 160), layout="zip", seed=3)
    return root


def _has_scan(row):
    return bool(row["has_pointcloud"])


def test_rows_and_checksums_equal_the_plain_path(scans, tmp_path):
    ds = guideloom.load(data_dir=scans)
    before = _writers()
    for name, kwargs in (("streamed", {}), ("plain", {"record_transform": _same})):
        guideloom.export_to_numpy(VIEW, tmp_path / name, dataset=ds, where=_has_scan,
                                  partition_size=2, client="sync", **kwargs)
    assert _writers() == before  # every partition's writer thread has ended
    streamed, plain = tmp_path / "streamed", tmp_path / "plain"
    names = sorted(p.name for p in streamed.glob("*.npy"))
    assert names == sorted(p.name for p in plain.glob("*.npy"))
    assert len(names) == 3
    for name in names:
        assert (streamed / name).read_bytes() == (plain / name).read_bytes(), name
    assert (json.loads((streamed / "checksums.json").read_text())
            == json.loads((plain / "checksums.json").read_text()))
    guideloom.load_export(streamed).verify()


class RecordingSink(PartitionSink):
    """Keeps what it was given, field by field, and the thread that wrote it."""

    def __init__(self):
        self.writes: list[tuple[int, str, float, str]] = []
        self.discarded: list[int] = []
        self.closed = False

    def write(self, row, sim_id, arrays):
        for alias, arr in arrays.items():
            self.writes.append((row, alias, float(np.asarray(arr).reshape(-1)[0]),
                                threading.current_thread().name))

    def discard(self, row):
        self.discarded.append(row)

    def close(self):
        self.closed = True
        return len(self.writes)


def test_each_field_is_written_on_the_helper_thread_as_it_is_handed_over():
    sink = RecordingSink()
    bufs = {"a": np.zeros(3), "b": np.zeros(3)}
    fields = StreamedFields(sink, bufs)
    for row in range(3):
        fields.start(row, 100 + row)
        free = fields.buffers()
        for k, alias in enumerate(("a", "b")):
            buf = free[alias]  # waits until its previous write ended
            assert buf is bufs[alias]
            buf[:] = 10 * row + k  # "decode" the field
            fields.field(alias, buf)
        fields.write(row, 100 + row, {"a": bufs["a"], "b": bufs["b"], "n": np.full(1, -1.0)})
    assert fields.close() == 9
    assert sink.closed
    assert [(r, a, v) for r, a, v, _ in sink.writes] == [
        (r, a, v) for r in range(3) for a, v in (("a", 10.0 * r), ("b", 10.0 * r + 1),
                                                  ("n", -1.0))]
    assert all(t.startswith("guideloom-write") for *_, t in sink.writes)
    assert not _writers()


def test_a_value_that_is_not_its_buffer_waits_for_the_record():
    sink = RecordingSink()
    fields = StreamedFields(sink, {"a": np.zeros(2)})
    fields.start(0, 7)
    fields.field("a", np.ones(2))  # decoded elsewhere (a fallback read): not written yet
    fields.drain()
    assert sink.writes == []
    fields.write(0, 7, {"a": np.ones(2)})
    fields.close()
    assert [(r, a, v) for r, a, v, _ in sink.writes] == [(0, "a", 1.0)]


def _npy_sink(tmp_path, n_rows=4):
    path = str(tmp_path / "x.npy")
    schema = {"x": FieldSchema((1024,), "<f4")}
    create_npy(path, (n_rows, 1024), np.dtype("<f4"))
    return NpySink({"x": path}, schema), path


def test_a_failed_write_names_the_experiment_and_leaves_no_thread(tmp_path):
    sink, path = _npy_sink(tmp_path)
    buf = np.ones(1024, "<f4")
    fields = StreamedFields(sink, {"x": buf})
    readonly = os.open(path, os.O_RDONLY)
    try:
        os.close(sink._fds["x"])  # the descriptor now refuses writes: EBADF on the thread
        sink._fds["x"] = readonly
        if sink._direct.get("x") is not None:
            os.close(sink._direct["x"])
        sink._direct["x"] = None
        fields.start(2, 4242)
        fields.field("x", buf)
        with pytest.raises(OSError, match="experiment 4242: cannot write row 2"):
            fields.drain()
    finally:
        fields.abort()
    assert not _writers()


def test_a_discarded_row_leaves_no_checksum(tmp_path):
    sink, _ = _npy_sink(tmp_path)
    bufs = {"x": np.ones(1024, "<f4")}
    fields = StreamedFields(sink, bufs)
    fields.start(0, 1)
    fields.field("x", bufs["x"])
    fields.write(0, 1, bufs)
    fields.start(1, 2)
    fields.field("x", bufs["x"])  # written, then its record fails
    fields.discard(1)
    fields.start(2, 3)
    fields.write(2, 3, bufs)
    assert fields.close() == 2 * 4096
    assert sink.extra_summary()["checksums"]["x.npy"]["order"] == [0, 2]
    assert not _writers()


def test_a_record_failing_after_a_written_field_is_skipped_cleanly(tmp_path):
    """The second field of one experiment is missing: its first field was already written
    when the read failed; the experiment is skipped, and the published rows, checksums and
    sim_ids are exactly those of the others."""
    data = tmp_path / "data"
    make_demo_data(data, n=8, scan_shape=(120, 160), layout="loose", seed=4)
    ds = guideloom.load(data_dir=data)
    records = list(guideloom.streaming.iter_view(VIEW, dataset=ds, data_dir=data,
                                                 where=_has_scan))
    victim = records[1]["_sim_id"]
    (path,) = data.rglob(f"{victim:04d}.h5")
    with h5py.File(path, "a") as f:
        del f["pointcloud/op10/luminescence"]
    with pytest.warns(guideloom.SkippedDataWarning):
        guideloom.export_to_numpy(VIEW, tmp_path / "out", dataset=ds, where=_has_scan,
                                  on_error="skip", partition_size=20, client="sync")
    out = guideloom.load_export(tmp_path / "out")
    kept = [r for r in records if r["_sim_id"] != victim]
    assert list(np.load(tmp_path / "out" / "sim_ids.npy")) == [r["_sim_id"] for r in kept]
    z = np.load(tmp_path / "out" / "pointcloud_op10_z.npy")
    for k, rec in enumerate(kept):
        assert z[k].tobytes() == rec["pointcloud_op10_z"].tobytes()
    assert json.loads((tmp_path / "out" / "checksums.json").read_text())  # recorded, whole
    out.verify()
    assert not _writers()


def test_buffers_go_back_to_the_process_spares_once_their_writes_ended():
    from guideloom.runtime.buffers import PAGE, give_back, take_aligned
    from guideloom.runtime.caches import clear_caches

    clear_caches()
    first = take_aligned((3000,), "<f4")
    assert first.ctypes.data % PAGE == 0
    give_back([first])
    assert take_aligned((3000,), "<f8") is not first  # another dtype: not that one
    again = take_aligned((3000,), "<f4")
    assert again is first  # its pages mapped already
    assert take_aligned((3000,), "<f4") is not first  # taken once only

    sink = RecordingSink()
    fields = StreamedFields(sink, {"x": again})
    fields.start(0, 5)
    fields.field("x", again)
    fields.close()
    assert take_aligned((3000,), "<f4") is again  # back after close, its write done
    clear_caches()
    give_back([again])
    clear_caches()
    assert take_aligned((3000,), "<f4") is not again  # clear_caches lets the memory go
