"""What rddac 2.0 code depends on: allowlist order and unknown ids, rddac export folders."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import guideloom
from guideloom.errors import (
    IncompleteExportError,
    MissingDataWarning,
    UnverifiableExportError,
    UnverifiedExportWarning,
)
from guideloom.export import plan_export
from guideloom.workflow import load_workflow

RDDAC_PYTHON = Path("/work/venv-rddac/bin/python")
WORKFLOWS = Path(__file__).resolve().parents[1] / "workflows"


def ids_of(records) -> list[int]:
    return [int(r["_sim_id"]) for r in records]


def first_row(record):
    return {"first": np.asarray(record["force_data"][0])}


# --- allowlist order and ids that are not in the index ---------------------------------------

def test_sim_ids_rows_follow_the_index_unless_asked_otherwise(demo_zip, tmp_path):
    wanted = [30, 2, 17, 5]
    assert ids_of(guideloom.streaming.iter_view(
        "force-curve", data_dir=demo_zip, sim_ids=wanted)) == [2, 5, 17, 30]
    assert ids_of(guideloom.streaming.iter_view(
        "force-curve", data_dir=demo_zip, sim_ids=wanted, sim_ids_order="sim_ids")) == wanted
    out = guideloom.export_to_numpy("force-curve", tmp_path / "a", data_dir=demo_zip,
                                    sim_ids=wanted, record_transform=first_row, client="sync")
    assert np.load(out["sim_ids"]).tolist() == [2, 5, 17, 30]
    out = guideloom.export_to_numpy("force-curve", tmp_path / "b", data_dir=demo_zip,
                                    sim_ids=wanted, sim_ids_order="sim_ids",
                                    record_transform=first_row, client="sync")
    assert np.load(out["sim_ids"]).tolist() == wanted
    with pytest.raises(ValueError, match="sim_ids_order must be 'index' or 'sim_ids'"):
        guideloom.streaming.iter_view("force-curve", data_dir=demo_zip, sim_ids=wanted,
                                      sim_ids_order="csv")


def test_a_workflow_files_rows_still_follow_its_list(demo_zip, tmp_path):
    text = (WORKFLOWS / "force_signals.toml").read_text().replace(
        "[transforms]", "[filter]\nsim_ids = [12, 0, 5]\n\n[transforms]", 1)
    (tmp_path / "job.toml").write_text(text)
    wf = load_workflow(tmp_path / "job.toml", data_dir=demo_zip, output=tmp_path / "o")
    assert plan_export(wf.to_spec()).selection.ids == [12, 0, 5]


def test_ids_not_in_the_index_warn_and_are_skipped(demo_zip, tmp_path):
    with pytest.warns(MissingDataWarning) as caught:
        records = list(guideloom.streaming.iter_view("force-curve", data_dir=demo_zip,
                                                     sim_ids=[7, 999, 3, 4242]))
    assert ids_of(records) == [3, 7]
    message = str(caught[0].message)
    assert "999" in message
    assert "4242" in message
    assert f"not present in process_parameters.csv (in {demo_zip})" in message
    with pytest.warns(MissingDataWarning, match="999"):
        out = guideloom.export_to_numpy("force-curve", tmp_path / "o", data_dir=demo_zip,
                                        sim_ids=[7, 999, 3], record_transform=first_row,
                                        client="sync")
    assert np.load(out["sim_ids"]).tolist() == [3, 7]
    with pytest.raises(ValueError, match="more than once"):
        guideloom.streaming.iter_view("force-curve", data_dir=demo_zip, sim_ids=[3, 3])


def test_rddac_dataset_reads_allowlist_in_index_order(demo_zip):
    pytest.importorskip("torch")
    from guideloom.pytorch import RDDACDataset, ViewDataset

    with pytest.warns(MissingDataWarning, match="999"):
        ds = RDDACDataset("force-curve", data_dir=demo_zip, sim_ids=[9, 999, 1])
    assert ds.sim_ids == [1, 9]
    assert ViewDataset("force-curve", data_dir=demo_zip, sim_ids=[9, 1],
                       sim_ids_order="sim_ids").sim_ids == [9, 1]


# --- rddac export folders --------------------------------------------------------------------

RDDAC_EXPORT = """
import sys, warnings, rddac
warnings.simplefilter("ignore")
rddac.streaming.export_to_numpy("pointcloud-op10", sys.argv[2], data_dir=sys.argv[1],
                                sim_ids=[int(i) for i in sys.argv[3].split(",")],
                                where=lambda row: bool(row["has_pointcloud"]))
"""


def write_rddac_export(how: str, data_dir: Path, out: Path, ids: list[int]) -> None:
    """An export as rddac 2.0 writes it: by rddac itself, or the same layout by hand."""
    if how == "rddac":
        if not RDDAC_PYTHON.is_file():
            pytest.skip("no rddac 2.0 installation at /work/venv-rddac")
        subprocess.run([str(RDDAC_PYTHON), "-c", RDDAC_EXPORT, str(data_dir), str(out),
                        ",".join(map(str, ids))], cwd=out.parent, check=True,
                       capture_output=True, env={**os.environ, "PYTHONPATH": ""})
        return
    records = list(guideloom.streaming.iter_view("pointcloud-op10", data_dir=data_dir,
                                                 sim_ids=ids))
    out.mkdir()
    for alias in ("pointcloud_op10_z", "pointcloud_op10_luminescence"):
        arr = np.lib.format.open_memmap(out / f"{alias}.npy", mode="w+", dtype=np.float32,
                                        shape=(len(records), *records[0][alias].shape))
        arr[:] = np.stack([r[alias] for r in records])
        arr.flush()
    np.save(out / "sim_ids.npy", np.asarray(ids_of(records), dtype=np.int64))


@pytest.fixture(scope="module")
def pointcloud_ids(demo_zip) -> list[int]:
    index = guideloom.load(demo_zip).index()
    return [i for i in index.ids if index.row(i)["has_pointcloud"]][:5]


@pytest.mark.fast_case("numpy")
@pytest.mark.parametrize("how", ["rddac", "numpy"])
def test_load_export_reads_an_rddac_export_unverified(how, demo_zip, pointcloud_ids, tmp_path):
    out = tmp_path / "rddac-export"
    write_rddac_export(how, demo_zip, out, pointcloud_ids)
    assert not (out / "export.json").exists()
    before = {p.name: p.stat().st_mtime_ns for p in out.iterdir()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        export = guideloom.load_export(out)
    notices = [w for w in caught if issubclass(w.category, UnverifiedExportWarning)]
    assert len(notices) == 1
    assert "\n" not in str(notices[0].message)
    assert str(out) in str(notices[0].message)
    assert "unverified" in str(notices[0].message)
    assert len(export) == len(pointcloud_ids)
    assert export.sim_ids.tolist() == pointcloud_ids
    assert export.fields == ("pointcloud_op10_luminescence", "pointcloud_op10_z")
    assert export.directory == out
    truth = {r["_sim_id"]: r for r in guideloom.streaming.iter_view(
        "pointcloud-op10", data_dir=demo_zip, sim_ids=pointcloud_ids)}
    for i, sim_id in enumerate(pointcloud_ids):
        row = export[i]
        np.testing.assert_array_equal(row["pointcloud_op10_z"], truth[sim_id]["pointcloud_op10_z"])
        assert not row["pointcloud_op10_z"].flags.writeable  # read-only
    np.testing.assert_array_equal(export.by_sim_id(pointcloud_ids[2])["pointcloud_op10_luminescence"],
                                  truth[pointcloud_ids[2]]["pointcloud_op10_luminescence"])
    assert export.batch([1, 0])["pointcloud_op10_z"].shape == (2, 100 * 160)
    with pytest.warns(UnverifiedExportWarning):
        only = guideloom.streaming.load_export(out, fields=["pointcloud_op10_z"])
    assert set(only[0]) == {"pointcloud_op10_z"}
    again = pickle.loads(pickle.dumps(export))
    np.testing.assert_array_equal(again[3]["pointcloud_op10_z"], export[3]["pointcloud_op10_z"])
    with pytest.raises(UnverifiableExportError, match=r"no export.json"):
        export.verify()
    assert {p.name: p.stat().st_mtime_ns for p in out.iterdir()} == before  # untouched


def test_a_damaged_or_absent_rddac_export_is_refused(demo_zip, pointcloud_ids, tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no export.json"):
        guideloom.load_export(tmp_path)  # an empty directory holds no export
    out = tmp_path / "e"
    write_rddac_export("numpy", demo_zip, out, pointcloud_ids)
    np.save(out / "extra.npy", np.zeros((len(pointcloud_ids) + 1, 3)))
    with pytest.raises(IncompleteExportError, match=r"extra\.npy.*5 rows"):
        guideloom.load_export(out)
    (out / "extra.npy").unlink()
    full = (out / "pointcloud_op10_z.npy").read_bytes()
    (out / "pointcloud_op10_z.npy").write_bytes(full[:-100])  # truncated
    with pytest.raises(IncompleteExportError, match=r"pointcloud_op10_z.npy"):
        guideloom.load_export(out)


def test_exporting_onto_an_rddac_export_needs_overwrite(demo_zip, pointcloud_ids, tmp_path):
    out = tmp_path / "e"
    write_rddac_export("numpy", demo_zip, out, pointcloud_ids)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(FileExistsError, match=r"rddac.*overwrite=True"):
        guideloom.export_to_numpy("force-curve", out, data_dir=demo_zip, sim_ids=[1, 2],
                                  record_transform=first_row, client="sync")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    guideloom.export_to_numpy("force-curve", out, data_dir=demo_zip, sim_ids=[1, 2],
                              record_transform=first_row, client="sync", overwrite=True)
    assert json.loads((out / "export.json").read_text())["count"] == 2
    names = {p.name for p in out.iterdir()}
    assert {"export.json", "first.npy", "sim_ids.npy"} <= names
    assert not names & {"pointcloud_op10_z.npy", "pointcloud_op10_luminescence.npy"}
    assert guideloom.load_export(out).sim_ids.tolist() == [1, 2]
    shutil.rmtree(out)


@pytest.mark.fast_case("numpy")
@pytest.mark.parametrize("how", ["rddac", "numpy"])
def test_cli_inspect_shows_what_load_export_reads_from_an_rddac_export(how, demo_zip,
                                                                      pointcloud_ids, tmp_path):
    out = tmp_path / "rddac-export"
    write_rddac_export(how, demo_zip, out, pointcloud_ids)
    with pytest.warns(UnverifiedExportWarning) as caught:
        export = guideloom.load_export(out)
    done = subprocess.run([sys.executable, "-m", "guideloom", "inspect", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # the API's warning, as the command line's one warning line
    assert done.stderr == f"guideloom: warning: {caught[0].message}\n", done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == f"export: {out}"
    assert lines[1] == "kind: npy (written by rddac/ddacs export_to_numpy (no export.json))"
    assert lines[2] == f"records: {len(export)}"
    assert len(export) == len(pointcloud_ids)
    fields = {line.split()[0]: line for line in lines if line.startswith("  ")}
    assert sorted(fields) == sorted(export.fields)
    for alias in export.fields:
        shape = tuple(export.manifest["fields"][alias]["shape"])
        assert f"shape {shape}" in fields[alias]
        assert "dtype float32" in fields[alias]
    assert lines[-1].startswith("status: unverified: no export.json")
    full = (out / "pointcloud_op10_z.npy").read_bytes()
    (out / "pointcloud_op10_z.npy").write_bytes(full[:-100])  # truncated: refused, named
    damaged = subprocess.run([sys.executable, "-m", "guideloom", "inspect", str(out)],
                             capture_output=True, text=True, timeout=120)
    assert damaged.returncode == 1, damaged.stderr  # as a damaged guideloom export
    assert damaged.stdout.splitlines()[0] == f"export: {out}"
    assert damaged.stdout.splitlines()[1].startswith("status: damaged: ")
    assert "pointcloud_op10_z.npy" in damaged.stdout, damaged.stdout
