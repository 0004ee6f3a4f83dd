"""Parallel exports on a real LocalCluster, compared bit for bit with serial references."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import psutil
import pytest

import guideloom
from guideloom.errors import CorruptDataError, IncompleteExportError, MissingDataWarning
from guideloom.export import SkippedDataWarning
from tests import export_helpers as helpers
from tests.zip_helpers import corrupt_member

ROOT = Path(__file__).resolve().parents[1]


def force_signals(data_dir):
    ds = guideloom.load(data_dir=data_dir)
    guideloom.add_view(ds, "force-signals", fields={
        "force": "force_data",
        "geometry": "process-parameters/geometry",
        "blankholder_force": "process-parameters/blankholder_force",
        "split": "process-parameters/split",
    })
    return ds


def serial_reference(view, data_dir, transform, **kwargs):
    """Stacked arrays built in the test from iter_view: the truth an export must equal."""
    records, ids = [], []
    for rec in guideloom.streaming.iter_view(view, data_dir=data_dir, **kwargs):
        ids.append(rec["_sim_id"])
        out = transform(dict(rec)) if transform else dict(rec)
        out.pop("_sim_id", None)
        records.append(out)
    arrays = {k: np.stack([np.asarray(r[k]) for r in records]) for k in records[0]}
    return arrays, np.asarray(ids)


def assert_export_equals(export_dir, arrays, ids):
    for alias, expected in arrays.items():
        got = np.load(Path(export_dir) / f"{alias}.npy")
        assert got.dtype == expected.dtype, alias
        assert got.shape == expected.shape, alias
        assert got.tobytes() == expected.tobytes(), alias
    np.testing.assert_array_equal(np.load(Path(export_dir) / "sim_ids.npy"), ids)


# --- the seed's sections 3-6, as written ----------------------------------------------------


def test_seed_sections_3_to_6(demo_zip, tmp_path, dask_client, capsys):
    pytest.importorskip("torch", reason="torch is an optional dependency (section 4 uses it)")
    DATA_DIR = demo_zip
    EXPORT_DIR = tmp_path / "tutorial_export"
    SAMPLE_IDS = [0, 5, 9, 13, 18, 22, 27, 31, 35]
    ds = force_signals(DATA_DIR)
    resample_and_emit = helpers.resample_and_emit
    with dask_client.as_current():
        # 3. export with a shape-fixing transform
        paths = guideloom.streaming.export_to_numpy(
            'force-signals',
            EXPORT_DIR,
            data_dir=DATA_DIR,
            dataset=ds,
            sim_ids=SAMPLE_IDS,
            record_transform=resample_and_emit,
        )
        for alias, path in paths.items():
            size_kb = path.stat().st_size / 1024
            print(f'  {alias:18s} -> {path}   ({size_kb:6.1f} KB)')
        # 4. read back
        export = guideloom.streaming.load_export(EXPORT_DIR)
        print(f'len(export)    = {len(export)}')
        print(f'export.fields  = {export.fields}')
        print(f'export.sim_ids = {export.sim_ids.tolist()}')
        record = export[0]
        for alias, value in record.items():
            print(f'  {alias:18s} shape={value.shape}  dtype={value.dtype}')
        record = export.by_sim_id(22)
        print(f"max total force = {float(record['max_total_force']):.1f} kN")
        from torch.utils.data import DataLoader
        loader = DataLoader(export, batch_size=16, shuffle=True)
        batches = list(loader)
        # 5. both paths back to back
        stream_sum, n = 0.0, 0
        for rec in guideloom.streaming.iter_view('force-signals', data_dir=DATA_DIR, dataset=ds,
                                                 sim_ids=SAMPLE_IDS):
            stream_sum += float(np.asarray(rec['force'])[:, 7].max())
            n += 1
        mmap_sum, m = 0.0, 0
        for record in export:
            mmap_sum += float(record['max_total_force'])
            m += 1
        # 6. variable shapes
        raw = guideloom.streaming.export_to_numpy_per_sim(
            'force-signals',
            tmp_path / 'raw_export',
            data_dir=DATA_DIR,
            dataset=ds,
            compressed=False,
        )
    out = capsys.readouterr().out
    assert set(paths) == {"force", "max_total_force", "blankholder_force", "label_geometry",
                          "sim_ids"}
    assert "len(export)    = 9" in out
    assert "export.fields  = ('blankholder_force', 'force', 'label_geometry', " \
           "'max_total_force')" in out
    assert f"export.sim_ids = {SAMPLE_IDS}" in out
    assert "force              shape=(1000, 8)  dtype=float32" in out
    assert "label_geometry     shape=()  dtype=int8" in out
    assert sum(b["force"].shape[0] for b in batches) == 9
    assert tuple(batches[0]["force"].shape[1:]) == (1000, 8)
    assert (n, m) == (9, 9)
    assert stream_sum == mmap_sum
    arrays, ids = serial_reference("force-signals", DATA_DIR, resample_and_emit, dataset=ds,
                                   sim_ids=SAMPLE_IDS)
    assert_export_equals(EXPORT_DIR, arrays, ids)
    assert float(export.by_sim_id(22)["max_total_force"]) == \
        arrays["max_total_force"][SAMPLE_IDS.index(22)]
    files = sorted(p.name for p in raw.iterdir())
    assert files == sorted([f"{i}.npz" for i in range(36)]
                           + ["checksums.json", "croissant.json", "export.json",
                              "provenance.json", "sim_ids.npy"])
    with np.load(raw / "7.npz") as npz:
        assert set(npz.files) == {"force", "geometry", "blankholder_force", "split"}
        with guideloom.open_h5(7, data_dir=DATA_DIR) as f:
            np.testing.assert_array_equal(npz["force"], f["force/data"][()])


# --- exactness ----------------------------------------------------------------------------------


def test_parallel_npy_equals_serial_reference(demo_zip, tmp_path, dask_client):
    ds = force_signals(demo_zip)
    paths = guideloom.export_to_numpy("force-signals", tmp_path / "out", dataset=ds,
                                      record_transform=helpers.resample_and_emit,
                                      client=dask_client, partition_size=5)
    arrays, ids = serial_reference("force-signals", demo_zip, helpers.resample_and_emit,
                                   dataset=ds)
    assert_export_equals(tmp_path / "out", arrays, ids)
    assert paths["force"] == tmp_path / "out" / "force.npy"
    manifest = json.loads((tmp_path / "out" / "export.json").read_text())
    assert manifest["count"] == 36
    assert manifest["n_partitions"] == 8
    assert manifest["fields"]["force"] == {"shape": [1000, 8], "dtype": "<f4"}
    assert manifest["record_transform"] == "guideloom.workflows.demo_transforms:resample_and_emit"
    assert manifest["guideloom_version"] == guideloom.__version__
    assert not any(p.name.startswith(".") for p in tmp_path.iterdir())  # no staging left


def test_sync_client_and_sim_ids_order(demo_loose, tmp_path):
    wanted = [30, 2, 17, 5, 11]
    guideloom.export_to_numpy("force-curve", tmp_path / "o", data_dir=demo_loose,
                              sim_ids=wanted, sim_ids_order="sim_ids",
                              record_transform=helpers.first_rows,
                              client="sync", partition_size=2)
    arrays, ids = serial_reference("force-curve", demo_loose, helpers.first_rows, sim_ids=wanted,
                                   sim_ids_order="sim_ids")
    assert ids.tolist() == wanted
    assert_export_equals(tmp_path / "o", arrays, ids)
    assert np.load(tmp_path / "o" / "sim.npy").tolist() == wanted


def test_missing_experiments_are_not_rows(demo_copy, tmp_path, dask_client):
    with zipfile.ZipFile(demo_copy / "convex.zip") as zf:
        payload = {m: zf.read(m) for m in zf.namelist() if m not in ("0010.h5", "0012.h5")}
    with zipfile.ZipFile(demo_copy / "convex.zip", "w") as zf:
        for m, data in payload.items():
            zf.writestr(m, data)
    with pytest.warns(MissingDataWarning, match="2 experiment"):
        guideloom.export_to_numpy("force-curve", tmp_path / "o", data_dir=demo_copy,
                                  record_transform=helpers.first_rows, client=dask_client,
                                  partition_size=4)
    ids = np.load(tmp_path / "o" / "sim_ids.npy")
    assert 10 not in ids
    assert 12 not in ids
    assert len(ids) == 34
    assert np.load(tmp_path / "o" / "force.npy").shape == (34, 100, 8)
    np.testing.assert_array_equal(np.load(tmp_path / "o" / "sim.npy"), ids)  # row i is sim_ids[i]
    assert json.loads((tmp_path / "o" / "export.json").read_text())["missing"] == ["10", "12"]


def test_on_error_raise_names_experiment_and_publishes_nothing(demo_copy, tmp_path, dask_client):
    corrupt_member(demo_copy / "concave.zip", "0004.h5")
    with pytest.raises(CorruptDataError, match=r"experiment 4: .*concave.zip::0004.h5"):
        guideloom.export_to_numpy("force-curve", tmp_path / "o", data_dir=demo_copy,
                                  record_transform=helpers.first_rows, client=dask_client,
                                  partition_size=3)
    assert not (tmp_path / "o").exists()
    with pytest.raises(IncompleteExportError, match="not published yet"):
        guideloom.load_export(tmp_path / "o")


def test_on_error_skip_leaves_bad_experiments_out_and_reports_them(demo_copy, tmp_path,
                                                                    dask_client):
    corrupt_member(demo_copy / "concave.zip", "0004.h5")
    with pytest.warns(SkippedDataWarning, match="skipped 6 experiment"):
        guideloom.export_to_numpy("force-curve", tmp_path / "o", data_dir=demo_copy,
                                  record_transform=helpers.fail_on_multiples_of_7,
                                  client=dask_client, partition_size=4, on_error="skip")
    bad = {4, 7, 14, 21, 28, 35}
    ids = np.load(tmp_path / "o" / "sim_ids.npy").tolist()
    assert ids == [i for i in range(36) if i not in bad]
    manifest = json.loads((tmp_path / "o" / "export.json").read_text())
    assert sorted(s["sim_id"] for s in manifest["skipped"]) == sorted(bad)
    errors = {s["sim_id"]: s["error"] for s in manifest["skipped"]}
    assert "damaged" in errors[4]
    assert "0004.h5" in errors[4]
    assert "RuntimeError: cannot handle 7" in errors[7]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingDataWarning)
        arrays, ref_ids = serial_reference("force-curve", demo_copy, helpers.first_rows,
                                           sim_ids=ids)
    assert_export_equals(tmp_path / "o", arrays, ref_ids)


def test_shape_mismatch_names_id_alias_shapes_and_per_sim(demo_zip, tmp_path, dask_client):
    with pytest.raises(ValueError) as info:
        guideloom.export_to_numpy("force-curve", tmp_path / "o", data_dir=demo_zip,
                                  client=dask_client, partition_size=6)
    msg = str(info.value)
    assert "field 'force_data' has shape (" in msg
    assert ", 8)" in msg
    assert "export_to_numpy_per_sim" in msg
    assert "experiment " in msg
    assert ".zip::" in msg
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("transform", "message"), [
    (lambda r: {"a": np.zeros(2)} if r["_sim_id"] == 0 else {"b": np.zeros(2)},
     r"new \['b'\], missing \['a'\]"),
    (lambda r: {"a": np.zeros(2), "b": 1} if r["_sim_id"] == 0 else {"a": np.zeros(2)},
     r"missing \['b'\]"),
    (lambda r: {"label": r["geometry"]}, "field 'label' is not numeric"),
    (lambda r: {"obj": {"x": 1}}, "field 'obj' is not numeric"),
    (lambda r: [1, 2], "returned list, expected a dict"),
    (lambda r: {"a": np.float32(1)} if r["_sim_id"] == 0 else {"a": np.float64(1)},
     "dtype <f8 but the first record's is <f4"),
])
def test_bad_transform_output_is_a_clear_error(demo_zip, tmp_path, transform, message):
    ds = force_signals(demo_zip)
    with pytest.raises(ValueError, match=message) as info:
        guideloom.export_to_numpy("force-signals", tmp_path / "o", dataset=ds, sim_ids=[0, 1],
                                  record_transform=transform, client="sync")
    assert "experiment " in str(info.value)


def test_overwrite_is_required_to_replace(demo_zip, tmp_path):
    kwargs = {"data_dir": demo_zip, "sim_ids": [1, 2], "record_transform": helpers.first_rows,
              "client": "sync"}
    guideloom.export_to_numpy("force-curve", tmp_path / "o", **kwargs)
    with pytest.raises(FileExistsError, match="overwrite=True"):
        guideloom.export_to_numpy("force-curve", tmp_path / "o", **kwargs)
    guideloom.export_to_numpy("force-curve", tmp_path / "o", **{**kwargs, "sim_ids": [3]},
                              overwrite=True)
    assert np.load(tmp_path / "o" / "sim_ids.npy").tolist() == [3]


# --- crash safety --------------------------------------------------------------------------


DRIVER = """
import sys
import guideloom
from tests import export_helpers
guideloom.export_to_numpy("force-curve", sys.argv[1], data_dir=sys.argv[2],
                          record_transform=export_helpers.blocking_first_rows,
                          code_version=export_helpers.BLOCKING_CODE_VERSION,
                          partition_size=2, client="local:2")
"""


@pytest.mark.slow
def test_resume_after_killed_driver_is_bit_identical(demo_zip, tmp_path, dask_client):
    out = tmp_path / "o"
    staging = tmp_path / ".o.guideloom-staging"
    env = {**os.environ, "GUIDELOOM_TEST_BLOCK_FROM": "20", "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(out), str(demo_zip)], cwd=ROOT,
                            env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while len(list((staging / "parts").glob("*.json"))) < 4:  # poll a condition
            assert proc.poll() is None, "the export subprocess ended early"
            assert time.monotonic() < deadline, "no partition finished in time"
            time.sleep(0.05)
        workers = psutil.Process(proc.pid).children(recursive=True)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver; its workers follow it (watchdog)
        proc.wait()
    _, alive = psutil.wait_procs(workers, timeout=5)
    assert not alive, "a worker outlived the killed driver"
    assert not out.exists()
    with pytest.raises(IncompleteExportError):
        guideloom.load_export(out)
    done_before = len(list((staging / "parts").glob("*.json")))
    from guideloom.export import build_spec, run_export

    spec = build_spec("force-curve", "npy", out, data_dir=demo_zip,
                      record_transform=helpers.blocking_first_rows,
                      code_version=helpers.BLOCKING_CODE_VERSION, partition_size=2)
    result = run_export(spec, client=dask_client)
    assert result.resumed_partitions == done_before >= 4
    guideloom.export_to_numpy("force-curve", tmp_path / "clean", data_dir=demo_zip,
                              record_transform=helpers.blocking_first_rows,
                              code_version=helpers.BLOCKING_CODE_VERSION, partition_size=2,
                              client=dask_client)
    for name in ("force.npy", "sim.npy", "sim_ids.npy"):
        assert (out / name).read_bytes() == (tmp_path / "clean" / name).read_bytes()


@pytest.mark.cluster
def test_killed_worker_is_retried_and_result_is_bit_identical(demo_zip, tmp_path, monkeypatch):
    from distributed import Client, LocalCluster

    flags = tmp_path / "flags"
    flags.mkdir()
    monkeypatch.setenv("GUIDELOOM_TEST_FLAG_DIR", str(flags))
    monkeypatch.setenv("GUIDELOOM_TEST_DIE_ID", "13")
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0", silence_logs=50) as cluster, \
            Client(cluster, set_as_default=False) as client:
        pool = ThreadPoolExecutor(1)  # the export runs here while this thread kills a worker
        job = pool.submit(
            guideloom.export_to_numpy, "force-curve", tmp_path / "o", data_dir=demo_zip,
            record_transform=helpers.die_once_first_rows, partition_size=3, client=client)
        pool.shutdown(wait=False)
        deadline = time.monotonic() + 120
        while not (flags / "pid").exists():  # poll a condition: the task reached experiment 13
            assert time.monotonic() < deadline, job
            assert not job.done(), job
            time.sleep(0.05)
        victim = int((flags / "pid").read_text())
        assert victim in client.run(os.getpid).values()
        os.kill(victim, signal.SIGKILL)  # a worker process of the cluster this test started
        job.result(timeout=180)
        assert victim not in client.run(os.getpid).values()
    arrays, ids = serial_reference("force-curve", demo_zip, helpers.first_rows)
    assert_export_equals(tmp_path / "o", arrays, ids)


def test_a_huge_declared_shape_names_the_experiment_and_is_skipped_on_request(demo_loose,
                                                                               tmp_path):
    import h5py

    data = tmp_path / "data"
    shutil.copytree(demo_loose, data)
    with h5py.File(data / "h5" / "0003.h5", "a") as f:  # a damaged header: 8 TB declared
        del f["force/data"]
        f.create_dataset("force/data", shape=(10**12, 8), dtype="<f4", chunks=(1000, 8))
    with pytest.raises(CorruptDataError, match=r"experiment 3: .*0003\.h5: HDF5 dataset "
                                               r"'force/data' declares shape \(1000000000000, 8\)"):
        guideloom.export_to_numpy("force-curve", tmp_path / "o", data_dir=data, client="sync",
                                  sim_ids=[3, 4])
    with pytest.warns(guideloom.SkippedDataWarning, match="experiment 3"):
        guideloom.export_to_numpy_per_sim("force-curve", tmp_path / "z", data_dir=data,
                                          client="sync", sim_ids=[2, 3, 4], on_error="skip")
    assert guideloom.load_export(tmp_path / "z").sim_ids.tolist() == [2, 4]


def test_export_json_splits_task_time_into_reading_and_writing(demo_zip, tmp_path):
    """``timings`` says where the tasks' time went: reading and transforming vs writing."""


    ds = guideloom.load(data_dir=demo_zip)
    guideloom.export_to_numpy("pointcloud-op10", tmp_path / "out", dataset=ds, client="sync",
                              where=lambda row: bool(row["has_pointcloud"]))
    timings = json.loads((tmp_path / "out" / "export.json").read_text())["timings"]
    assert timings["read_transform_s"] > 0
    assert timings["write_s"] > 0
    # each lies within the partitions' time, which the in-process run spends inside compute_s
    # (without transforms, writes run beside the next record's decode: the two overlap)
    assert timings["read_transform_s"] <= timings["compute_s"]
    assert timings["write_s"] <= timings["compute_s"]
