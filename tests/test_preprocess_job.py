"""The preprocess job: resume and update rules, carried groups, bad input, the output folder's
guard and marker, parameters refused up front, and the processed folder read by views and
exports. Real raw files (h5py), real zips, in-process and on a real local cluster."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

import guideloom
from guideloom.preprocess import force as force_stage
from guideloom.preprocess.job import parse_ids, preprocess
from guideloom.preprocess.publish import MARKER, RECORD_ATTR
from tests.preprocess_helpers import make_raw_dataset, rewrite_measurements, tree_digest

N = 12
TABLES = ["force", "sheet", "oil"]


@pytest.fixture(scope="module")
def raw_loose(tmp_path_factory) -> Path:
    """12 loose raw experiments of every cleaning branch (read-only: copy to change)."""
    return make_raw_dataset(tmp_path_factory.mktemp("pre") / "raw", N, "loose")


@pytest.fixture
def raw_copy(raw_loose, tmp_path) -> Path:
    target = tmp_path / "raw"
    shutil.copytree(raw_loose, target)
    return target


def _inodes(out: Path) -> dict[str, int]:
    return {p.name: p.stat().st_ino for p in out.glob("*.h5")}


def _run(raw: Path, out: Path, names=TABLES, **kw):
    return preprocess(names, data_dir=raw, out_dir=out, client="sync", quiet=True, **kw)


def test_rerun_keeps_current_files_and_overwrite_redoes_them(raw_loose, tmp_path):
    out = tmp_path / "out"
    first = _run(raw_loose, out)
    assert first.counts["force"] == {"processed": N - 1, "no_group": 1}
    assert (out / MARKER).is_file()
    assert (out / "process_parameters.csv").is_file()
    before = _inodes(out)
    again = _run(raw_loose, out)
    assert again.counts["force"] == {"exists": N - 1, "no_group": 1}
    assert again.counts["sheet"] == {"exists": N - 1, "no_group": 1}
    assert _inodes(out) == before  # nothing was rewritten
    redone = _run(raw_loose, out, overwrite=True)
    assert redone.counts["force"] == {"processed": N - 1, "no_group": 1}
    assert all(_inodes(out)[name] != ino for name, ino in before.items())


def test_forked_processes_give_the_same_files(raw_loose, tmp_path):
    _run(raw_loose, tmp_path / "a")
    report = preprocess(TABLES, data_dir=raw_loose, out_dir=tmp_path / "b", client="fork:2",
                        quiet=True)
    if report.placement != "forked":  # another thread of this test process is running
        pytest.skip(f"this process cannot fork now (placement {report.placement})")
    assert report.errors == {}
    assert report.counts["force"]["processed"] == N - 1
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == \
        sorted(p.name for p in (tmp_path / "a").iterdir())  # the run folder is gone
    for name in sorted(p.name for p in (tmp_path / "a").glob("*.h5")):
        with h5py.File(tmp_path / "a" / name, "r") as x, h5py.File(tmp_path / "b" / name) as y:
            for group in x:
                assert np.array_equal(x[f"{group}/data"][()], y[f"{group}/data"][()],
                                      equal_nan=True)

def test_a_changed_parameter_redoes_only_its_stage(raw_loose, tmp_path):
    out = tmp_path / "out"
    _run(raw_loose, out)
    with h5py.File(out / "0003.h5", "r") as f:
        force_before = f["force/data"][()]
        oil_before = f["oil_thickness"].attrs["n_hampel_outliers"]
    report = _run(raw_loose, out, config={"oil": {"hampel_k": 1.5}})
    assert report.counts["oil"] == {"processed": N - 1, "no_group": 1}
    assert report.counts["force"] == {"exists": N - 1, "no_group": 1}
    with h5py.File(out / "0003.h5", "r") as f:
        assert np.array_equal(f["force/data"][()], force_before)  # carried as it was
        assert f["oil_thickness"].attrs["hampel_k"] == 1.5
        assert f["oil_thickness"].attrs["n_hampel_outliers"] > oil_before


def test_a_changed_raw_file_redoes_that_experiment_only(raw_copy, tmp_path):
    out = tmp_path / "out"
    _run(raw_copy, out)
    before = _inodes(out)
    rewrite_measurements(raw_copy / "0004.h5", 14)  # other measurements, same id
    report = _run(raw_copy, out)
    assert report.counts["force"] == {"processed": 1, "exists": N - 2, "no_group": 1}
    after = _inodes(out)
    assert [n for n in before if before[n] != after[n]] == ["0004.h5"]
    with h5py.File(raw_copy / "0004.h5", "r") as raw, h5py.File(out / "0004.h5", "r") as f:
        table, _ = force_stage.process(raw["force/data"][()],
                                       force_stage.column_names(raw["force"].attrs),
                                       force_stage.DEFAULTS)
        assert np.array_equal(f["force/data"][()], table)


def test_a_modality_added_later_keeps_the_others(raw_loose, tmp_path):
    out = tmp_path / "out"
    _run(raw_loose, out, ["force"])
    with h5py.File(out / "0002.h5", "r") as f:
        force_before = f["force/data"][()]
        assert "sheet_thickness" not in f
    report = _run(raw_loose, out, ["sheet"])
    assert report.counts == {"sheet": {"processed": N - 1, "no_group": 1}}
    with h5py.File(out / "0002.h5", "r") as f:
        assert sorted(f) == ["force", "sheet_thickness"]
        assert np.array_equal(f["force/data"][()], force_before)
    assert _run(raw_loose, out, ["force", "sheet"]).counts["force"]["exists"] == N - 1


def test_a_damaged_file_is_an_error_naming_it_and_the_others_finish(raw_copy, tmp_path):
    out = tmp_path / "out"
    damaged = raw_copy / "0005.h5"
    data = bytearray(damaged.read_bytes())
    damaged.write_bytes(bytes(data[:2048]))  # truncated: the superblock is there, the rest not
    report = _run(raw_copy, out, run_report=tmp_path / "run.html")
    assert list(report.errors) == [5]
    html = (tmp_path / "run.html").read_text()
    assert "preprocess force+sheet+oil" in html
    assert "0005.h5" in html
    assert "experiment 5" in report.errors[5]
    assert "0005.h5" in report.errors[5]
    assert report.counts["force"]["error"] == 1
    assert report.counts["force"]["processed"] == N - 2
    assert not (out / "0005.h5").exists()
    assert not list(out.glob(".*.tmp-*"))  # its temporary file was removed
    cli = subprocess.run([sys.executable, "-m", "guideloom", "preprocess", "force",
                          "--data-dir", str(raw_copy), "--out", str(tmp_path / "cli"), "-q"],
                         capture_output=True, text=True, check=False)
    assert cli.returncode == 1
    assert "experiment 5" in cli.stderr
    assert "0005.h5" in cli.stderr


def test_ids_without_a_raw_file_are_reported(raw_copy, tmp_path):
    (raw_copy / "0002.h5").unlink()
    report = _run(raw_copy, tmp_path / "out", ["sheet"], ids="1-3,7")
    assert report.counts["sheet"] == {"processed": 3, "no_file": 1}
    assert sorted(p.name for p in (tmp_path / "out").glob("*.h5")) == \
        ["0001.h5", "0003.h5", "0007.h5"]


def test_parse_ids():
    assert parse_ids("0-3,42, 7") == [0, 1, 2, 3, 42, 7]
    with pytest.raises(ValueError, match="'5-2'"):
        parse_ids("5-2")


@pytest.mark.parametrize(("config", "message"), [
    ("[oil]\nhampel_k = -1.0\n", "[oil] hampel_k = -1.0: must be > 0"),
    ("[force]\ntime_window_end = 0.1\n", "time_window_end = 0.1: must be greater"),
    ("[sheet]\nlast = 3\n", "unknown key 'last' in [sheet]"),
    ("[sheets]\nlast_n = 3\n", "unknown config table [sheets]"),
    ("[sheet]\nlast_n = 2.5\n", "[sheet] last_n = 2.5: must be an integer"),
])
def test_parameters_out_of_range_are_refused_before_anything_runs(raw_loose, tmp_path,
                                                                  config, message):
    path = tmp_path / "bad.toml"
    path.write_text(config)
    out = tmp_path / "out"
    cli = subprocess.run([sys.executable, "-m", "guideloom", "preprocess", "--data-dir",
                          str(raw_loose), "--out", str(out), "--config", str(path), "-y"],
                         capture_output=True, text=True, check=False)
    assert cli.returncode == 2
    assert message in cli.stderr
    assert len(cli.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_dump_config_is_a_config_file_of_the_defaults(tmp_path):
    cli = subprocess.run([sys.executable, "-m", "guideloom", "preprocess", "--dump-config"],
                         capture_output=True, text=True, check=True)
    path = tmp_path / "defaults.toml"
    path.write_text(cli.stdout)
    from guideloom.preprocess.params import defaults, load

    assert load(str(path)) == defaults()
    assert "[oil]\nmax_sensor_position = 200\n" in cli.stdout


def test_the_output_folder_is_guarded(raw_loose, tmp_path):
    with pytest.raises(ValueError, match="is the raw data folder"):
        _run(raw_loose, raw_loose)
    rawish = tmp_path / "rawish"
    rawish.mkdir()
    (rawish / "metadata.json").write_text("{}")
    with pytest.raises(ValueError, match=r"looks like a raw dataset \(metadata.json\)"):
        _run(raw_loose, rawish)
    assert sorted(p.name for p in rawish.iterdir()) == ["metadata.json"]
    (rawish / MARKER).touch()  # a processed folder (rddac's marker) is accepted
    assert _run(raw_loose, rawish, ["sheet"]).counts["sheet"]["processed"] == N - 1


def test_views_and_exports_read_the_processed_folder(raw_loose, tmp_path):
    out = tmp_path / "out"
    _run(raw_loose, out)
    manifest = raw_loose / "metadata.json"
    ids = [i for i in range(N) if i % 10 != 9]  # variant 9 has no sheet
    records = list(guideloom.iter_view("sheet-thickness", data_dir=out, source=manifest,
                                       sim_ids=ids))
    assert [r["_sim_id"] for r in records] == ids
    for record in records:
        with h5py.File(out / f"{record['_sim_id']:04d}.h5", "r") as f:
            assert np.array_equal(record["sheet_thickness_data"], f["sheet_thickness/data"][()],
                                  equal_nan=True)
    paths = guideloom.export_to_numpy("oil-thickness", tmp_path / "export", data_dir=out,
                                      source=manifest, sim_ids=ids, client="sync")
    rows = np.load(paths["oil_thickness_data"])
    assert rows.shape == (len(ids), 200, 2)
    assert rows.dtype == np.float32


def test_a_dask_cluster_gives_the_same_files(raw_loose, tmp_path, dask_client):
    _run(raw_loose, tmp_path / "a")
    report = preprocess(TABLES, data_dir=raw_loose, out_dir=tmp_path / "b", client=dask_client,
                        quiet=True)
    assert report.placement == "client"
    assert report.errors == {}
    for name in sorted(p.name for p in (tmp_path / "a").glob("*.h5")):
        with h5py.File(tmp_path / "a" / name, "r") as x, h5py.File(tmp_path / "b" / name) as y:
            assert sorted(x) == sorted(y)
            for group in x:
                assert np.array_equal(x[f"{group}/data"][()], y[f"{group}/data"][()],
                                      equal_nan=True)
            assert x.attrs[RECORD_ATTR] == y.attrs[RECORD_ATTR]


def test_the_raw_folder_is_unchanged_byte_for_byte(raw_copy, tmp_path):
    before = tree_digest(raw_copy)
    _run(raw_copy, raw_copy / "processed")
    _run(raw_copy, raw_copy / "processed", overwrite=True)
    after = tree_digest(raw_copy)
    assert {k: v for k, v in after.items() if not k.startswith("processed/")} == before


def test_the_shipped_workflow_preprocesses_then_exports(tmp_path):
    workflow = Path(__file__).resolve().parents[1] / "workflows" / "preprocessed_thickness.toml"
    from guideloom.demo import make_demo_data

    make_demo_data(tmp_path / "demo-data", n=8, layout="zip", scan_shape=(8, 12))
    done = subprocess.run([sys.executable, "-m", "guideloom", "run", str(workflow),
                           "--scheduler", "sync"], cwd=tmp_path, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "preprocess: oil:" in done.stdout
    export = guideloom.load_export(tmp_path / "exports" / "preprocessed-thickness")
    assert len(export) > 0
    for i, sim_id in enumerate(export.sim_ids):
        with h5py.File(tmp_path / "demo-data" / "processed" / f"{sim_id:04d}.h5", "r") as f:
            assert np.array_equal(export[i]["oil_thickness_data"], f["oil_thickness/data"][()])
    dry = subprocess.run([sys.executable, "-m", "guideloom", "run", str(workflow), "--dry-run"],
                         cwd=tmp_path, capture_output=True, text=True, check=False)
    assert dry.returncode == 0
    assert "would preprocess sheet, oil" in dry.stdout


def test_pointcloud_asked_for_without_its_stage_is_one_line(raw_loose, tmp_path):
    from guideloom.preprocess.params import pointcloud_module

    if pointcloud_module() is not None:
        pytest.skip("the pointcloud stage is installed: its own tests cover it")
    cli = subprocess.run([sys.executable, "-m", "guideloom", "preprocess", "pointcloud",
                          "--data-dir", str(raw_loose), "--out", str(tmp_path / "out"), "-y"],
                         capture_output=True, text=True, check=False)
    assert cli.returncode == 2
    assert cli.stderr.strip().splitlines() == [
        "guideloom: error: pointcloud: the stage is not installed (guideloom.preprocess."
        "pointcloud); run force, sheet and oil by naming them"]
    assert not (tmp_path / "out").exists()
    report = preprocess(None, data_dir=raw_loose, out_dir=tmp_path / "all", client="sync",
                        quiet=True)  # all modalities: the missing one is skipped, with a warning
    assert report.stages == ("force", "sheet", "oil")



def test_split_selects_the_experiments_of_one_split(raw_loose, tmp_path):
    import csv

    with open(raw_loose / "process_parameters.csv", newline="") as fh:
        train = sorted(int(r["index"]) for r in csv.DictReader(fh) if r["split"] == "train")
    assert 0 < len(train) < N
    _run(raw_loose, tmp_path / "out", ["oil"], split="train")
    assert sorted(int(p.stem) for p in (tmp_path / "out").glob("*.h5")) == train


def test_a_raw_file_rewritten_with_its_size_and_mtime_restored_is_redone(raw_copy, tmp_path):
    """Size and mtime are no proof (issue 38): a raw file rewritten with both put back (as
    ``touch -r`` or ``cp -p`` do) shows a new ctime; the rerun hashes it, finds other bytes
    and redoes it, and keeps the others (re-hashed: unchanged)."""
    out = tmp_path / "out"
    path = raw_copy / "0004.h5"
    with open(path, "ab") as fh:  # room for the rewrite: bytes past the HDF5 file's end
        fh.write(bytes(1 << 20))
    _run(raw_copy, out)
    st = path.stat()
    rewrite_measurements(path, 14)
    with open(path, "r+b") as fh:  # the size put back: trailing bytes past the file's end
        fh.truncate(max(st.st_size, path.stat().st_size))
    if path.stat().st_size != st.st_size:
        pytest.skip("the rewritten file grew past the original size")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (st.st_size, st.st_mtime_ns)
    before = _inodes(out)
    report = _run(raw_copy, out)
    assert report.counts["force"] == {"processed": 1, "exists": N - 2, "no_group": 1}
    after = _inodes(out)
    assert [n for n in before if before[n] != after[n]] == ["0004.h5"]
