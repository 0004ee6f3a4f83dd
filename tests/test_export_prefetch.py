"""A partition's local records are read on a helper thread while the transform runs
(guideloom.export.prefetch): same records in the same order, errors raised at their record,
nothing left running."""

from __future__ import annotations

import shutil
import threading

import numpy as np
import pytest
from guideloom.workflows.demo_transforms import resample_and_emit

import guideloom
from guideloom.errors import ExperimentReadError
from guideloom.export.prefetch import Prefetch
from guideloom.records import RecordReader
from guideloom.selection import select


def prefetch_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "guideloom-prefetch"]


def records_of(data, view="force-curve"):
    ds = guideloom.load(data_dir=data)
    sel = select(ds, data)
    return RecordReader(ds.view(view)), sel.locations, sel.rows


def same_record(a, b):
    assert list(a) == list(b)
    for key in a:
        if isinstance(a[key], np.ndarray):
            assert a[key].dtype == b[key].dtype and np.array_equal(a[key], b[key]), key
        else:
            assert a[key] == b[key], key


def test_records_come_back_as_read_directly_and_in_order(demo_zip):
    reader, locations, rows = records_of(demo_zip)
    with Prefetch(reader, locations, rows, depth=2) as ahead:
        got = [ahead.read(loc, row) for loc, row in zip(locations, rows, strict=True)]
    assert [r["_sim_id"] for r in got] == [loc.sim_id for loc in locations]
    for record, loc, row in zip(got, locations, rows, strict=True):
        same_record(record, reader.read(loc, row))
    assert not prefetch_threads()


def test_an_error_is_raised_at_its_record_and_the_rest_still_read(demo_loose, tmp_path):
    import h5py

    data = tmp_path / "data"
    shutil.copytree(demo_loose, data)
    with h5py.File(data / "h5" / "0003.h5", "a") as f:
        del f["force/data"]
    reader, locations, rows = records_of(data)
    with Prefetch(reader, locations, rows) as ahead:
        for loc, row in zip(locations, rows, strict=True):
            if loc.sim_id == 3:
                with pytest.raises(ExperimentReadError, match=r"experiment 3: .*0003\.h5"):
                    ahead.read(loc, row)
            else:
                assert ahead.read(loc, row)["_sim_id"] == loc.sim_id


def test_closing_early_stops_the_reads(demo_zip):
    reader, locations, rows = records_of(demo_zip)
    ahead = Prefetch(reader, locations, rows, depth=1)
    assert ahead.read(locations[0], rows[0])["_sim_id"] == locations[0].sim_id
    ahead.close()  # the helper is blocked on a full queue: it must still end
    assert not prefetch_threads()


def test_a_record_asked_out_of_order_is_read_directly(demo_zip):
    reader, locations, rows = records_of(demo_zip)
    with Prefetch(reader, locations, rows) as ahead:
        same_record(ahead.read(locations[5], rows[5]), reader.read(locations[5], rows[5]))
        assert ahead.read(locations[0], rows[0])["_sim_id"] == locations[0].sim_id


def test_the_export_reads_on_the_helper_thread(demo_zip, tmp_path, monkeypatch):
    threads: list[str] = []
    real = RecordReader.read

    def spy(self, loc, row, into=None):
        threads.append(threading.current_thread().name)
        return real(self, loc, row, into)

    monkeypatch.setattr(RecordReader, "read", spy)
    ds = guideloom.load(data_dir=demo_zip)
    guideloom.add_view(ds, "force-signals", fields={
        "force": "force_data", "geometry": "process-parameters/geometry",
        "blankholder_force": "process-parameters/blankholder_force"})
    out = tmp_path / "e"
    guideloom.export_to_numpy("force-signals", out, dataset=ds, client="sync",
                              partition_size=10, record_transform=resample_and_emit)
    assert threads.count("guideloom-prefetch") >= 30  # all but the schema probe's reads
    monkeypatch.undo()
    export = guideloom.load_export(out)
    reader, locations, rows = RecordReader(ds.view("force-signals")), *_sel(ds, demo_zip)
    for i, (loc, row) in enumerate(zip(locations, rows, strict=True)):
        want = resample_and_emit(reader.read(loc, row))
        got = export[i]
        for key, value in want.items():
            assert np.array_equal(np.asarray(got[key]), value), (loc.sim_id, key)
    assert not prefetch_threads()


def _sel(ds, data):
    sel = select(ds, data)
    return sel.locations, sel.rows
