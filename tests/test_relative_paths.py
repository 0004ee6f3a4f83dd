"""Relative paths given to the Python API are made absolute on the driver, before any work is
shipped: workers started in another directory read the same files and write the same target."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import guideloom
from guideloom.cluster.local_procs import start_local_cluster
from guideloom.demo import make_demo_data
from guideloom.export.api import build_spec
from guideloom.read.roots import LocalRoot
from guideloom.select.selection import select
from guideloom.workflow.load import load_workflow

SCRIPT = """
import sys
import numpy as np
import guideloom


def first_rows(rec):
    return {"force": np.asarray(rec["force_data"])[:100], "sim": np.int64(rec["_sim_id"])}


guideloom.export_to_numpy("force-curve", "exports/rel", data_dir="demo-data",
                          record_transform=first_rows, client=sys.argv[1])
print("exported")
"""


def _first_rows(rec):
    return {"force": np.asarray(rec["force_data"])[:100], "sim": np.int64(rec["_sim_id"])}


@pytest.fixture
def user_dir(tmp_path) -> Path:
    """A user's folder holding ``demo-data/`` (the driver's working directory)."""
    folder = tmp_path / "user"
    make_demo_data(folder / "demo-data", n=12)
    return folder


@pytest.mark.cluster
@pytest.mark.slow
def test_relative_data_dir_and_output_on_workers_started_elsewhere(user_dir, tmp_path):
    elsewhere = tmp_path / "elsewhere"  # the workers' working directory: no demo-data here
    with start_local_cluster(2, dashboard_port=None, state_dir=elsewhere) as procs:
        with procs.client(timeout=30) as client:
            cwds = set(client.run(os.getcwd).values())
        assert cwds == {str(elsewhere.resolve())}
        (user_dir / "job.py").write_text(textwrap.dedent(SCRIPT))
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        done = subprocess.run([sys.executable, "job.py", procs.address], cwd=user_dir, env=env,
                              capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "exported" in done.stdout
    assert not (elsewhere / "exports").exists()

    want = tmp_path / "want"
    guideloom.export_to_numpy("force-curve", want, data_dir=user_dir / "demo-data",
                              record_transform=_first_rows, client="sync")
    got = user_dir / "exports" / "rel"
    names = sorted(p.name for p in want.glob("*.npy"))
    assert names == sorted(p.name for p in got.glob("*.npy"))
    assert "force.npy" in names
    for name in names:
        assert np.load(got / name).tobytes() == np.load(want / name).tobytes(), name
    assert len(np.load(got / "sim_ids.npy")) == 12


def test_build_spec_holds_absolute_paths(demo_copy, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    spec = build_spec("force-curve", "npy", "out", data_dir="data",
                      source="data/metadata.json")
    assert spec.data_dir == LocalRoot(tmp_path / "data")  # the root travels (issue 40)
    assert spec.dataset.data_dir == tmp_path / "data"
    assert spec.dataset.manifest_path == tmp_path / "data" / "metadata.json"
    assert spec.target == str(tmp_path / "out")
    assert all(Path(loc.path).is_absolute() for loc in select(
        spec.dataset, spec.data_dir).locations)


def test_build_spec_absolute_for_a_dataset_loaded_with_relative_paths(demo_copy, tmp_path,
                                                                      monkeypatch):
    monkeypatch.chdir(tmp_path)
    ds = guideloom.load("data")
    assert ds.data_dir == tmp_path / "data"
    spec = build_spec("force-curve", "npy", "sub/../out", dataset=ds)
    assert spec.data_dir == LocalRoot(tmp_path / "data")  # the root travels (issue 40)
    assert spec.target == str(tmp_path / "out")


@pytest.mark.parametrize("url", ["memory://guideloom-rel/out.zarr", "s3://bucket/out.zarr",
                                 "https://example.invalid/out.zarr"])
def test_build_spec_keeps_fsspec_urls(demo_zip, url):
    assert build_spec("force-curve", "zarr", url, data_dir=demo_zip).target == url


def test_workflow_paths_are_absolute_from_a_relative_file(demo_copy, tmp_path, monkeypatch):
    jobs = tmp_path / "jobs"
    (jobs / "lib").mkdir(parents=True)
    (jobs / "job.toml").write_text(textwrap.dedent("""
        paths_relative_to = "cwd"
        python_path = ["lib"]
        [dataset]
        data_dir = "data"
        manifest = "data/metadata.json"
        [view]
        name = "force-curve"
        [output]
        kind = "npy"
        path = "exports/out"
    """))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    load_workflow("jobs/job.toml", import_user_code=False)
    assert str(jobs / "lib") not in sys.path  # a dry run's load puts nothing there (B12)
    wf = load_workflow("jobs/job.toml")
    assert sys.path[0] == str(jobs / "lib")
    spec = wf.to_spec()
    assert spec.data_dir == LocalRoot(tmp_path / "data")  # the root travels (issue 40)
    assert spec.dataset.manifest_path == tmp_path / "data" / "metadata.json"
    assert spec.target == str(tmp_path / "exports" / "out")


def test_iter_view_reads_lazily_after_the_working_directory_changes(demo_copy, tmp_path,
                                                                    monkeypatch):
    monkeypatch.chdir(tmp_path)
    records = guideloom.iter_view("force-curve", data_dir="data", sim_ids=[0, 1])
    monkeypatch.chdir(tmp_path.parent)  # records are read later, from elsewhere
    assert [r["_sim_id"] for r in records] == [0, 1]
