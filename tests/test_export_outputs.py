"""zarr and npz outputs, load_export on every kind, and where exports run."""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest
import zarr

import guideloom
from guideloom.errors import IncompleteExportError
from tests import export_helpers as helpers
from tests.test_export import serial_reference


def pointcloud_reference(data_dir):
    return serial_reference("pointcloud-op10", data_dir, None, where=lambda r: r["has_pointcloud"])


def test_zarr_local_path_on_cluster_matches_reference(demo_zip, tmp_path, dask_client):
    target = tmp_path / "scans.zarr"
    out = guideloom.export_to_zarr("pointcloud-op10", target, data_dir=demo_zip,
                                   where=lambda r: r["has_pointcloud"], client=dask_client,
                                   partition_size=6)
    assert out == str(target)
    arrays, ids = pointcloud_reference(demo_zip)
    group = zarr.open_group(str(target), mode="r")
    for alias, expected in arrays.items():
        arr = group[alias]
        assert arr.shape == expected.shape
        assert arr.dtype == expected.dtype
        assert 6 % arr.chunks[0] == 0  # chunk boundaries are partition boundaries
        assert arr.compressors[0].to_dict()["name"] == "blosc"
        np.testing.assert_array_equal(arr[...], expected)
    np.testing.assert_array_equal(group["sim_ids"][...], ids)
    assert json.loads((target / "export.json").read_text())["kind"] == "zarr"


def test_zarr_file_url_on_cluster_and_memory_url_in_process(demo_zip, tmp_path, dask_client):
    arrays, ids = pointcloud_reference(demo_zip)
    url = f"file://{tmp_path}/via-url.zarr"
    guideloom.export_to_zarr("pointcloud-op10", url, data_dir=demo_zip, compressor="zstd",
                             where=lambda r: r["has_pointcloud"], client=dask_client,
                             partition_size=4)
    mem = guideloom.export_to_zarr("pointcloud-op10", "memory://guideloom-test/scans.zarr",
                                   data_dir=demo_zip, where=lambda r: r["has_pointcloud"],
                                   client="sync", partition_size=5)
    for location in (url, mem):
        export = guideloom.load_export(location)
        assert len(export) == len(ids)
        np.testing.assert_array_equal(export.sim_ids, ids)
        batch = export.batch(np.arange(len(ids)))
        for alias, expected in arrays.items():
            np.testing.assert_array_equal(batch[alias], expected)


def test_zarr_skip_compacts_rows(demo_zip, tmp_path):
    def fail_on_3(rec):
        if rec["_sim_id"] == 3:
            raise ValueError("bad scan")
        return {"z": rec["pointcloud_op10_z"][:50]}

    with pytest.warns(guideloom.export.SkippedDataWarning):
        guideloom.export_to_zarr("pointcloud-op10", tmp_path / "s.zarr", data_dir=demo_zip,
                                 sim_ids=[1, 2, 3, 4, 5], record_transform=fail_on_3,
                                 client="sync", partition_size=2, on_error="skip")
    export = guideloom.load_export(tmp_path / "s.zarr")
    ref, _ids = serial_reference("pointcloud-op10", demo_zip, None, sim_ids=[1, 2, 4, 5])
    assert export.sim_ids.tolist() == [1, 2, 4, 5]
    np.testing.assert_array_equal(export[0:4]["z"], ref["pointcloud_op10_z"][:, :50])


def test_npz_compressed_and_no_temporary_files(demo_loose, tmp_path, dask_client):
    out = guideloom.export_to_numpy_per_sim("force-curve", tmp_path / "raw", data_dir=demo_loose,
                                            compressed=True, client=dask_client, partition_size=5)
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted([f"{i}.npz" for i in range(36)]
                           + ["checksums.json", "croissant.json", "export.json",
                              "provenance.json", "sim_ids.npy"])
    for i in (0, 17, 35):
        with np.load(out / f"{i}.npz") as npz, guideloom.open_h5(i, data_dir=demo_loose) as f:
            np.testing.assert_array_equal(npz["force_data"], f["force/data"][()])
            assert npz.zip.getinfo("force_data.npy").compress_type != 0  # deflated


# --- load_export ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def three_exports(demo_zip, tmp_path_factory):
    root = tmp_path_factory.mktemp("three")
    common = {"data_dir": demo_zip, "record_transform": helpers.first_rows, "client": "sync",
              "partition_size": 7}
    guideloom.export_to_numpy("force-curve", root / "npy", **common)
    guideloom.export_to_numpy_per_sim("force-curve", root / "npz", **common)
    guideloom.export_to_zarr("force-curve", root / "zarr", **common)
    return {kind: root / kind for kind in ("npy", "npz", "zarr")}


@pytest.mark.parametrize("kind", ["npy", "npz", "zarr"])
def test_load_export_protocol(three_exports, demo_zip, kind):
    arrays, ids = serial_reference("force-curve", demo_zip, helpers.first_rows)
    export = guideloom.load_export(three_exports[kind])
    assert len(export) == 36
    assert export.fields == ("force", "sim")
    np.testing.assert_array_equal(export.sim_ids, ids)
    row = export[5]
    assert set(row) == {"force", "sim"}
    assert isinstance(row["force"], np.ndarray)
    np.testing.assert_array_equal(row["force"], arrays["force"][5])
    np.testing.assert_array_equal(export[-1]["sim"], arrays["sim"][-1])
    rows = list(export)
    assert len(rows) == 36
    assert int(rows[20]["sim"]) == 20
    sl = export[3:9]
    np.testing.assert_array_equal(sl["force"], arrays["force"][3:9])
    idx = [30, 2, 2, 17]
    batch = export.batch(idx)
    np.testing.assert_array_equal(batch["force"], arrays["force"][idx])
    np.testing.assert_array_equal(batch["sim"], arrays["sim"][idx])
    np.testing.assert_array_equal(export.by_sim_id(np.int64(12))["force"], arrays["force"][12])
    with pytest.raises(KeyError, match="999"):
        export.by_sim_id(999)
    with pytest.raises(IndexError):
        export[36]
    text = repr(export)
    assert kind in text
    assert "force-curve" in text
    assert "rows=36" in text
    only = guideloom.load_export(three_exports[kind], fields=["sim"])
    assert only.fields == ("sim",)
    assert set(only[0]) == {"sim"}
    with pytest.raises(ValueError, match=r"unknown field.*'nope'.*fields: force, sim"):
        guideloom.load_export(three_exports[kind], fields=["nope"])
    clone = pickle.loads(pickle.dumps(export))
    np.testing.assert_array_equal(clone[7]["force"], arrays["force"][7])


def test_export_pickles_without_its_data(three_exports):
    export = guideloom.load_export(three_exports["npy"])
    export.batch(np.arange(36))  # open the memmaps
    assert len(pickle.dumps(export)) < 20_000
    assert (three_exports["npy"] / "force.npy").stat().st_size > 100_000


def test_torch_dataloader_with_worker_processes(three_exports):
    pytest.importorskip("torch", reason="torch is an optional dependency")
    from torch.utils.data import DataLoader

    export = guideloom.load_export(three_exports["npy"])
    loader = DataLoader(export, batch_size=16, shuffle=True, num_workers=2)
    seen = []
    for batch in loader:
        assert tuple(batch["force"].shape[1:]) == (100, 8)
        seen.extend(batch["sim"].tolist())
    assert sorted(seen) == list(range(36))


def test_load_export_refuses_foreign_and_damaged_directories(tmp_path, three_exports):
    with pytest.raises(FileNotFoundError):
        guideloom.load_export(tmp_path / "missing")
    (tmp_path / "plain").mkdir()
    np.save(tmp_path / "plain" / "force.npy", np.zeros(3))
    with pytest.raises(IncompleteExportError, match=r"no export.json"):
        guideloom.load_export(tmp_path / "plain")
    (tmp_path / "plain" / "export.json").write_text('{"something": "else"}')
    with pytest.raises(IncompleteExportError, match="not a guideloom export"):
        guideloom.load_export(tmp_path / "plain")
    (tmp_path / "plain" / "export.json").write_text("{torn")
    with pytest.raises(IncompleteExportError, match="damaged"):
        guideloom.load_export(tmp_path / "plain")


# --- where the export runs -------------------------------------------------------------------


def test_active_client_runs_tasks_named_after_stage_and_view(demo_zip, tmp_path, dask_client,
                                                              monkeypatch):
    from distributed import get_task_stream

    monkeypatch.setenv("GUIDELOOM_DRIVER_PROBE_MAX_S", "0")  # probe on a worker, as for big records
    with dask_client.as_current(), get_task_stream(dask_client) as stream:
        guideloom.export_to_numpy("force-curve", tmp_path / "o", data_dir=demo_zip,
                                  record_transform=helpers.first_rows, partition_size=9)
    from dask.utils import key_split

    names = [key_split(t["key"]) for t in stream.data]
    assert names.count("export-part") == 4  # ASCII: grep finds what the docs name
    assert names.count("probe-schema") == 1
    keys = [t["key"] for t in stream.data if key_split(t["key"]) == "export-part"]
    assert sorted(k[3] for k in keys) == [0, 1, 2, 3]
    assert all(k[1] == "force-curve" and str(k).isascii() for k in keys)


def test_a_cheap_first_record_is_probed_in_the_driver(demo_zip, tmp_path, dask_client):
    from dask.utils import key_split
    from distributed import get_task_stream

    with get_task_stream(dask_client) as stream:
        guideloom.export_to_numpy("force-curve", tmp_path / "o", data_dir=demo_zip,
                                  record_transform=helpers.first_rows, partition_size=9,
                                  client=dask_client)
    names = [key_split(t["key"]) for t in stream.data]
    assert names.count("export-part") == 4
    assert "probe-schema" not in names
    manifest = json.loads((tmp_path / "o" / "export.json").read_text())
    assert 0 < manifest["placement"]["estimate_s"] < 36 * plan_module().DRIVER_PROBE_MAX_S


def plan_module():
    from guideloom.export import plan

    return plan


def test_task_names_read_whole_for_views_with_digits():
    from dask.utils import key_split

    from guideloom.cluster.runtime import task_key

    key = task_key("export-part", "pointcloud-op10", "deadbeef", 3)
    assert key_split(key) == "export-part"
    assert key[1] == "pointcloud-op10"




@pytest.mark.fast_case("sync")
@pytest.mark.parametrize("client", ["sync", "local:2"])
def test_rows_decoded_into_reused_buffers_are_each_their_own(tmp_path, client):
    """Without transforms, every record of a partition is decoded into the same buffers (npy):
    each row must still hold its own experiment's data, bit for bit, in sim_ids order."""
    import guideloom
    from guideloom.demo import make_demo_data

    make_demo_data(tmp_path / "data", n=14, scan_shape=(180, 200), seed=3)
    ds = guideloom.load(data_dir=tmp_path / "data")
    where = lambda row: bool(row["has_pointcloud"])  # noqa: E731
    guideloom.export_to_numpy("pointcloud-op10", tmp_path / "out", dataset=ds, where=where,
                              partition_size=5, client=client)
    ids = np.load(tmp_path / "out" / "sim_ids.npy")
    expected = list(guideloom.streaming.iter_view("pointcloud-op10", dataset=ds,
                                                  data_dir=tmp_path / "data", where=where))
    assert [r["_sim_id"] for r in expected] == list(ids)
    assert len(ids) > 5
    for alias in ("pointcloud_op10_z", "pointcloud_op10_luminescence"):
        rows = np.load(tmp_path / "out" / f"{alias}.npy")
        assert rows.nbytes // len(rows) >= 1 << 17  # large enough for the fast chunk path
        for k, rec in enumerate(expected):
            assert rows[k].tobytes() == np.asarray(rec[alias]).tobytes()
        assert len({rows[k].tobytes() for k in range(len(rows))}) == len(rows)
