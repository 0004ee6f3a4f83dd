"""Data layouts that rddac 2.0 and ddacs 3.2 read: archives under ``h5/``, one zip per id."""

from __future__ import annotations

import shutil
import warnings
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest

import guideloom
from guideloom.errors import MissingDataWarning
from guideloom.export.extract import plan_extract
from tests.conftest import REFERENCE_MANIFEST


def _ids(records) -> list[int]:
    return [r["_sim_id"] for r in records]


def _members(archive: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(archive) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def _write_zip(path: Path, members: dict[str, bytes]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)


def test_named_archives_are_found_under_h5(demo_copy):
    everything = _ids(guideloom.streaming.iter_view("force-curve", data_dir=demo_copy))
    (demo_copy / "h5").mkdir()
    for name in ("concave.zip", "convex.zip"):
        shutil.move(demo_copy / name, demo_copy / "h5" / name)
    with warnings.catch_warnings():
        warnings.simplefilter("error", MissingDataWarning)
        moved = _ids(guideloom.streaming.iter_view("force-curve", data_dir=demo_copy))
    assert moved == everything
    assert len(moved) == 36
    with guideloom.open_h5(7, data_dir=demo_copy) as f:
        assert int(f.attrs["index"]) == 7


@pytest.mark.skipif(not REFERENCE_MANIFEST.is_file(),
                    reason="shared/reference (published RDDAC manifest) is not beside this repo")
def test_sample_zip_under_h5_is_read_with_the_published_manifest(demo_zip, tmp_path):
    """What ``rddac download --small`` leaves: the CSV, metadata.json and ``h5/sample.zip``."""
    shutil.copy(demo_zip / "process_parameters.csv", tmp_path / "process_parameters.csv")
    members = _members(demo_zip / "concave.zip")
    sample = {n: members[n] for n in sorted(members)[:3]}
    _write_zip(tmp_path / "h5" / "sample.zip", sample)
    ds = guideloom.load(data_dir=tmp_path, source=REFERENCE_MANIFEST)
    assert "sample.zip" in ds.archives
    with pytest.warns(MissingDataWarning):
        records = list(guideloom.streaming.iter_view("force-curve", dataset=ds))
    want = sorted(int(Path(n).stem) for n in sample)
    assert _ids(records) == want
    with guideloom.open_h5(want[0], data_dir=demo_zip) as f:
        np.testing.assert_array_equal(records[0]["force_data"], f["force/data"][()])


def test_one_zip_per_experiment_under_h5(demo_zip, tmp_path):
    """The DDACS download layout: ``h5/<id>.zip`` each holding ``<id>.h5`` (no archive named)."""
    for name in ("process_parameters.csv", "metadata.json"):
        shutil.copy(demo_zip / name, tmp_path / name)
    members = {**_members(demo_zip / "concave.zip"), **_members(demo_zip / "convex.zip")}
    for name in ("0004.h5", "0011.h5", "0020.h5"):
        _write_zip(tmp_path / "h5" / f"{int(Path(name).stem)}.zip", {name: members[name]})
    with pytest.warns(MissingDataWarning):
        assert _ids(guideloom.streaming.iter_view("force-curve", data_dir=tmp_path)) == [4, 11, 20]
    with guideloom.open_h5(11, data_dir=tmp_path) as f:
        assert int(f.attrs["index"]) == 11


def test_loose_files_win_over_archives_under_h5(demo_copy):
    (demo_copy / "h5").mkdir()
    shutil.move(demo_copy / "concave.zip", demo_copy / "h5" / "concave.zip")
    sim_id = next(iter(sorted(_members(demo_copy / "h5" / "concave.zip"))))
    loose = demo_copy / "h5" / sim_id
    loose.write_bytes(_members(demo_copy / "h5" / "concave.zip")[sim_id])
    with h5py.File(loose, "r+") as f:
        f["force/data"][0, 0] = 12345.0
    rec = next(guideloom.streaming.iter_view("force-curve", data_dir=demo_copy,
                                             sim_ids=[int(Path(sim_id).stem)]))
    assert rec["force_data"][0, 0] == 12345.0


def test_an_unrelated_zip_under_h5_is_ignored(demo_copy):
    _write_zip(demo_copy / "h5" / "notes.zip", {"readme.txt": b"not an experiment"})
    assert len(_ids(guideloom.streaming.iter_view("force-curve", data_dir=demo_copy))) == 36
    plan = plan_extract(guideloom.load(data_dir=demo_copy), demo_copy)
    assert sorted(Path(a.path).name for a in plan.archives) == ["concave.zip", "convex.zip"]
