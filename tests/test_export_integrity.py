"""Damaged exports are refused when opened, naming the file and what differs; an Export pickled
before its directory was replaced does not serve the new arrays under the old ids."""

from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

import guideloom
from guideloom.errors import CorruptExportError, IncompleteExportError
from tests import export_helpers as helpers


@pytest.fixture(scope="module")
def pristine(demo_zip, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pristine")
    common = {"data_dir": demo_zip, "record_transform": helpers.first_rows, "client": "sync",
              "sim_ids": [0, 2, 4, 6, 8]}
    guideloom.export_to_numpy("force-curve", root / "npy", **common)
    guideloom.export_to_numpy_per_sim("force-curve", root / "npz", **common)
    guideloom.export_to_zarr("force-curve", root / "z.zarr", **common)
    return {"npy": root / "npy", "npz": root / "npz", "zarr": root / "z.zarr"}


@pytest.fixture
def copy_of(pristine, tmp_path):
    def make(kind: str) -> Path:
        target = tmp_path / pristine[kind].name
        shutil.copytree(pristine[kind], target)
        return target
    return make


def edit_manifest(root: Path, **changes) -> None:
    doc = json.loads((root / "export.json").read_text())
    doc.update(changes)
    (root / "export.json").write_text(json.dumps(doc))


def test_the_pristine_exports_open(pristine):
    for root in pristine.values():
        assert len(guideloom.load_export(root)) == 5


def test_count_edited(copy_of):
    root = copy_of("npy")
    edit_manifest(root, count=4)
    with pytest.raises(CorruptExportError, match=r"force\.npy: shape \(5, 100, 8\) but "
                                                 r"export\.json records \(4, 100, 8\)"):
        guideloom.load_export(root)


def test_sim_ids_reversed(copy_of):
    root = copy_of("npy")
    ids = np.load(root / "sim_ids.npy")
    np.save(root / "sim_ids.npy", ids[::-1])
    with pytest.raises(CorruptExportError, match="sim_ids do not match the checksum"):
        guideloom.load_export(root)


def test_dtype_changed(copy_of):
    root = copy_of("npy")
    np.save(root / "force.npy", np.load(root / "force.npy").astype(np.float64))
    with pytest.raises(CorruptExportError, match=r"force\.npy: dtype <f8 but export\.json "
                                                 r"records <f4"):
        guideloom.load_export(root)


def test_array_truncated_or_deleted(copy_of):
    root = copy_of("npy")
    data = (root / "force.npy").read_bytes()
    (root / "force.npy").write_bytes(data[:-7])
    with pytest.raises(CorruptExportError, match=r"force\.npy: \d+ bytes but its header needs"):
        guideloom.load_export(root)
    (root / "force.npy").unlink()
    with pytest.raises(CorruptExportError, match=r"force\.npy: missing"):
        guideloom.load_export(root)


def test_npz_file_deleted(copy_of):
    root = copy_of("npz")
    (root / "4.npz").unlink()
    with pytest.raises(CorruptExportError, match=r"4\.npz: missing"):
        guideloom.load_export(root)


def test_zarr_array_deleted_or_reshaped(copy_of):
    root = copy_of("zarr")
    group = zarr.open_group(str(root), mode="a")
    del group["sim"]
    with pytest.raises(CorruptExportError, match="sim: missing"):
        guideloom.load_export(root)


def test_a_newer_format_version_is_refused(copy_of):
    root = copy_of("npy")
    edit_manifest(root, format_version=99)
    with pytest.raises(IncompleteExportError, match="format version 99"):
        guideloom.load_export(root)


def test_a_pickled_export_does_not_serve_a_replaced_directory(demo_zip, tmp_path):
    target = tmp_path / "out"
    guideloom.export_to_numpy("force-curve", target, data_dir=demo_zip, client="sync",
                              record_transform=helpers.first_rows, sim_ids=[0, 1])
    blob = pickle.dumps(guideloom.load_export(target))
    guideloom.export_to_numpy("force-curve", target, data_dir=demo_zip, client="sync",
                              record_transform=helpers.first_rows, sim_ids=[3, 4],
                              overwrite=True)
    stale = pickle.loads(blob)
    with pytest.raises(CorruptExportError, match="was replaced by another export"):
        stale[0]


def test_inspect_and_status_say_damaged(copy_of):
    root = copy_of("npy")
    (root / "sim.npy").unlink()
    for command in ("inspect", "status"):
        done = subprocess.run([sys.executable, "-m", "guideloom", command, str(root)],
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 1
        assert "damaged:" in done.stdout
        assert "sim.npy: missing" in done.stdout
