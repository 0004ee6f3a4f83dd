"""Crafted inputs and transforms from the attack run (issue 22): each publishes nothing wrong."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

import guideloom
from guideloom.demo import make_demo_data
from guideloom.errors import ManifestError

BIG_ID = 99999999999999999999  # above int64


def fixed_force(rec):
    """The first 50 force rows, no use of the id."""
    return {"force": np.asarray(rec["force_data"])[:50]}


def out_path(result, target: Path) -> Path:
    """The export directory whatever the export function returned."""
    return target if isinstance(result, dict) else Path(result)


def _with_big_id(root: Path) -> Path:
    make_demo_data(root, n=4, layout="loose", seed=0)
    shutil.copy(root / "h5" / "0003.h5", root / "h5" / f"{BIG_ID}.h5")
    with open(root / "process_parameters.csv", "a") as fh:
        fh.write(f"{BIG_ID},1,1,concave,100,25.526,medium,True,False,val\n")
    return root


@pytest.mark.parametrize("kind", ["npy", "npz", "zarr"])
def test_an_id_above_int64_is_refused_at_plan_time(tmp_path, kind):
    data = _with_big_id(tmp_path / "data")
    target = tmp_path / f"out.{kind}"
    export = {"npy": guideloom.export_to_numpy, "npz": guideloom.export_to_numpy_per_sim,
              "zarr": guideloom.export_to_zarr}[kind]
    with pytest.raises(ManifestError, match=f"64-bit.*{BIG_ID}"):
        export("force-curve", target, data_dir=data, client="sync", record_transform=fixed_force)
    assert not target.exists()
    out = export("force-curve", target, data_dir=data, client="sync",
                 record_transform=fixed_force, sim_ids=[0, 1, 2, 3])
    assert guideloom.load_export(out_path(out, target)).sim_ids.tolist() == [0, 1, 2, 3]


def keys_differ_on_2(rec):
    """Experiment 2's record names another field than the others'."""
    name = "torque" if rec["_sim_id"] == 2 else "force"
    return {name: np.asarray(rec["force_data"])[: 10 + rec["_sim_id"]]}


@pytest.mark.parametrize("client", ["sync", "dask"])
def test_npz_records_with_other_keys_are_refused(demo_zip, tmp_path, client, dask_client):
    target = tmp_path / "per-sim"
    run = {"sync": "sync", "dask": dask_client}[client]
    with pytest.raises(guideloom.errors.RecordValueError,
                       match=r"experiment 2 .*new \['torque'\], missing \['force'\]") as info:
        guideloom.export_to_numpy_per_sim("force-curve", target, data_dir=demo_zip, client=run,
                                          record_transform=keys_differ_on_2, partition_size=2,
                                          sim_ids=[0, 1, 2, 3, 4])
    assert info.value.sim_id == 2
    assert not target.exists()
    with pytest.warns(guideloom.errors.SkippedDataWarning, match="1 experiment"):
        out = guideloom.export_to_numpy_per_sim("force-curve", target, data_dir=demo_zip,
                                                client=run, record_transform=keys_differ_on_2,
                                                partition_size=2, sim_ids=[0, 1, 2, 3, 4],
                                                on_error="skip")
    export = guideloom.load_export(out)
    assert export.sim_ids.tolist() == [0, 1, 3, 4]
    assert [len(row["force"]) for row in export] == [10, 11, 13, 14]


_SHARED = np.zeros(20, dtype=np.float64)


def one_reused_buffer(rec):
    """Returns the same array object for every record, refilled with this record's values."""
    _SHARED[:] = np.asarray(rec["force_data"])[:20, 0]
    return {"force": _SHARED}


@pytest.mark.parametrize("kind", ["npy", "npz", "zarr"])
def test_a_transform_reusing_one_buffer_gives_every_row(demo_zip, tmp_path, kind):
    target = tmp_path / f"out.{kind}"
    export = {"npy": guideloom.export_to_numpy, "npz": guideloom.export_to_numpy_per_sim,
              "zarr": guideloom.export_to_zarr}[kind]
    ids = list(range(12))
    out = export("force-curve", target, data_dir=demo_zip, client="sync", sim_ids=ids,
                 record_transform=one_reused_buffer, partition_size=12)
    loaded = guideloom.load_export(out_path(out, target))
    expected = {r["_sim_id"]: np.asarray(r["force_data"])[:20, 0]
                for r in guideloom.streaming.iter_view("force-curve", data_dir=demo_zip,
                                                       sim_ids=ids)}
    right = [i for i, sim in enumerate(loaded.sim_ids.tolist())
             if np.array_equal(loaded[i]["force"], expected[sim])]
    assert right == list(range(12))
    assert loaded.verify().line()


EXPORTERS = {"npy": guideloom.export_to_numpy, "npz": guideloom.export_to_numpy_per_sim,
             "zarr": guideloom.export_to_zarr}


@pytest.mark.parametrize("read_first", [False, True], ids=["unread", "read"])
@pytest.mark.parametrize("kind", ["npy", "npz", "zarr"])
def test_an_export_opened_before_an_overwrite_serves_no_other_data(demo_zip, tmp_path, kind,
                                                                   read_first):
    target = tmp_path / f"out.{kind}"
    export = EXPORTERS[kind]
    export("force-curve", target, data_dir=demo_zip, client="sync", sim_ids=[0, 1, 2],
           record_transform=fixed_force)
    old = guideloom.load_export(target)
    if read_first:
        assert old[1]["force"].shape == (50, 8)
    copied = pickle.dumps(old)  # another process's copy opens the path again
    export("force-curve", target, data_dir=demo_zip, client="sync", sim_ids=[20, 21, 22],
           record_transform=fixed_force, overwrite=True)
    assert guideloom.load_export(target).sim_ids.tolist() == [20, 21, 22]
    first = next(iter(guideloom.streaming.iter_view("force-curve", data_dir=demo_zip,
                                                    sim_ids=[0])))
    # npy: mapped at open; npz, zarr: files opened per read in the directory the Export pins
    # (the overwrite kept it aside): the old files stay readable, and they are the old data
    assert old.sim_ids.tolist() == [0, 1, 2]
    np.testing.assert_array_equal(old[0]["force"], np.asarray(first["force_data"])[:50])
    np.testing.assert_array_equal(old.batch([0])["force"][0], old[0]["force"])
    np.testing.assert_array_equal(old.by_sim_id(0)["force"], old[0]["force"])
    # a copy that opens the path again finds another export there: it says so, never reads it
    again = pickle.loads(copied)
    with pytest.raises(guideloom.errors.CorruptExportError, match="replaced"):
        again[0]
    old.close()


def _cli(*args: str, cwd: Path):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "guideloom", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_a_zarr_export_missing_a_chunk_file_is_damaged(demo_zip, tmp_path):
    store = tmp_path / "out.zarr"
    guideloom.export_to_zarr("force-curve", store, data_dir=demo_zip, client="sync",
                             sim_ids=list(range(8)), record_transform=fixed_force,
                             partition_size=2)
    opened = guideloom.load_export(store)
    chunks = sorted(p for p in (store / "force" / "c").rglob("*") if p.is_file())
    assert len(chunks) == 4  # one chunk per partition of 2 rows
    chunks[1].unlink()  # rows 2-3
    with pytest.raises(guideloom.errors.CorruptExportError, match="chunk file is missing"):
        opened[2]  # opened before: a read of the lost chunk is an error, not zeros
    with pytest.raises(guideloom.errors.CorruptExportError, match="chunk file is missing"):
        opened.batch([0, 3])
    with pytest.raises(guideloom.errors.CorruptExportError, match="force/c/1/0/0"):
        guideloom.load_export(store)
    for command in ("inspect", "verify"):
        done = _cli(command, str(store), cwd=tmp_path)
        assert done.returncode == 1, (command, done.stdout, done.stderr)
        assert "chunk file is missing" in done.stdout + done.stderr


def test_an_all_zero_zarr_chunk_is_stored_and_reads_back(demo_zip, tmp_path):
    store = tmp_path / "zeros.zarr"
    guideloom.export_to_zarr("force-curve", store, data_dir=demo_zip, client="sync",
                             sim_ids=[0, 1], record_transform=zero_force, partition_size=1)
    export = guideloom.load_export(store)
    assert export[1]["force"].sum() == 0
    assert export.verify().line()


def zero_force(rec):
    """All zeros: zarr would skip writing such a chunk unless told to write every chunk."""
    return {"force": np.zeros(5, dtype=np.float32)}


def test_an_extra_storage_shard_is_damage(demo_zip, tmp_path):
    from guideloom import StreamDataset, StreamNumpyFormat, StreamStorage
    from tests import storage_helpers as helpers

    fmt = StreamNumpyFormat(np.dtype([("force", "<f4"), ("document_ids", "<u4")]))
    storage = StreamStorage(tmp_path / "stream", fmt)
    out = guideloom.export_to_storage("force-curve", storage, data_dir=demo_zip, client="sync",
                                      record_transform=helpers.total_force_tokens,
                                      partition_size=4, sim_ids=list(range(8)))
    with storage.sync_reader() as reader:
        elements = len(reader)
    shutil.copy(out / "shard-000001.gls", out / "shard-000002.gls")  # a third shard, unlisted
    with pytest.raises(guideloom.errors.CorruptExportError, match=r"shard-000002.gls.*not list"):
        guideloom.load_export(out)
    done = _cli("verify", str(out), cwd=tmp_path)
    assert done.returncode == 1, done
    assert "shard-000002.gls" in done.stderr, done
    with pytest.raises(guideloom.errors.StorageError, match=r"shard-000002.gls"):
        StreamStorage(out, fmt).sync_reader()
    with pytest.raises(guideloom.errors.StorageError, match=r"shard-000002.gls"):
        StreamDataset(StreamStorage(out, fmt), sequence_length=16).sync_reader()
    (out / "shard-000002.gls").unlink()
    with StreamStorage(out, fmt).sync_reader() as reader:
        assert len(reader) == elements


LE_F4_DATATYPE = bytes([0x11, 0x20, 0x1F, 0x00, 0x04, 0, 0, 0])  # HDF5 datatype message, <f4


def _flip_force_byte_order(data_dir: Path, sim_id: int) -> None:
    """Flip the byte-order bit of ``force/data``'s datatype in the stored zip member of
    ``sim_id`` (the member's CRC then no longer matches; nothing else changes)."""
    import io
    import re
    import struct
    import zipfile

    import h5py

    name = f"{sim_id:04d}.h5"
    archive = next(z for z in sorted(data_dir.glob("*.zip"))
                   if name in zipfile.ZipFile(z).namelist())
    with zipfile.ZipFile(archive) as zf:
        info = zf.getinfo(name)
        member = zf.read(name)
    assert info.compress_type == zipfile.ZIP_STORED
    for match in re.finditer(re.escape(LE_F4_DATATYPE), member):
        damaged = bytearray(member)
        damaged[match.start() + 1] ^= 1
        with h5py.File(io.BytesIO(bytes(damaged))) as f:
            if f["force/data"].dtype.str == ">f4":
                break
    else:
        raise AssertionError("no datatype message of force/data found")
    with open(archive, "r+b") as fh:
        fh.seek(info.header_offset)
        local = fh.read(30)
        name_len, extra_len = struct.unpack("<HH", local[26:30])
        fh.seek(info.header_offset + 30 + name_len + extra_len + match.start() + 1)
        fh.write(bytes([damaged[match.start() + 1]]))


def as_float64(rec):
    """A transform that casts: the schema check alone no longer sees the stored byte order."""
    return {"force": np.asarray(rec["force_data"], dtype=np.float64)[:50]}


@pytest.mark.parametrize("kind", ["npy", "npz"])
def test_a_flipped_byte_order_bit_in_hdf5_metadata_is_damage(demo_copy, tmp_path, kind):
    _flip_force_byte_order(demo_copy, 2)
    target = tmp_path / f"out.{kind}"
    transform = as_float64 if kind == "npy" else None
    with pytest.raises(guideloom.errors.CorruptDataError,
                       match=r"experiment 2: .*0002\.h5.*'force/data'.*>f4.*<f4") as info:
        EXPORTERS[kind]("force-curve", target, data_dir=demo_copy, client="sync",
                        sim_ids=[0, 1, 2, 3], record_transform=transform)
    assert info.value.sim_id == 2
    assert not target.exists()
    with pytest.warns(guideloom.errors.SkippedDataWarning, match="1 experiment"):
        out = EXPORTERS[kind]("force-curve", target, data_dir=demo_copy, client="sync",
                              sim_ids=[2, 0, 1, 3], record_transform=transform,
                              on_error="skip")
    export = guideloom.load_export(out_path(out, target))
    assert export.sim_ids.tolist() == [0, 1, 3]
    field = "force" if kind == "npy" else "force_data"
    assert all(float(np.abs(row[field]).max()) < 1e6 for row in export)
