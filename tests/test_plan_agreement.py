"""``guideloom run --dry-run`` prints the plan the run follows (issue 40, "one plan"): both take
it from ``plan_job`` and the placement from the one client-text dispatcher, so for each placement
and for an update the printed placement, partitions and job identity are what ``export.json``
records after the run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from guideloom.demo import make_demo_data

ROOT = Path(__file__).resolve().parents[1]
RUNS = re.compile(r"^runs: (\S+): (.*) \((\d+) workers?\)$", re.MULTILINE)
PARTITIONS = re.compile(r"^partitions: (\d+) of up to (\d+) experiments \(job (\w+),",
                        re.MULTILINE)
WORKFLOW = textwrap.dedent("""
    name = "plan-agreement"
    paths_relative_to = "cwd"

    [dataset]
    data_dir = "data"

    [view]
    name = "forces"
    [view.fields]
    force = "force_data"
    blankholder_force = "process-parameters/blankholder_force"

    [output]
    kind = "npz"  # one file per experiment: the force tables differ in length
    path = "out"
    """)


def _guideloom(cwd: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "guideloom", *args], cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def _printed(stdout: str) -> dict:
    runs, parts = RUNS.search(stdout), PARTITIONS.search(stdout)
    assert runs, stdout
    assert parts, stdout
    return {"mode": runs[1], "reason": runs[2], "workers": int(runs[3]),
            "n_partitions": int(parts[1]), "partition_size": int(parts[2]), "job": parts[3]}


def _recorded(out: Path) -> dict:
    manifest = json.loads((out / "export.json").read_text())
    placed = manifest["placement"]
    return {"mode": placed["mode"], "reason": placed["reason"], "workers": placed["workers"],
            "n_partitions": manifest["n_partitions"],
            "partition_size": manifest["partition_size"], "identity": manifest["identity"]}


def _agree(printed: dict, recorded: dict) -> None:
    assert recorded["identity"].startswith(printed["job"])
    for key in ("mode", "workers", "n_partitions", "partition_size"):
        assert printed[key] == recorded[key], (key, printed, recorded)
    if printed["mode"] == "local-cluster":  # the run also says whether it started one
        assert printed["reason"].split(" (")[0] == recorded["reason"].split(" (")[0]
    else:
        assert printed["reason"] == recorded["reason"]


@pytest.fixture
def job(tmp_path: Path) -> Path:
    make_demo_data(tmp_path / "data", n=10)
    (tmp_path / "plan.toml").write_text(WORKFLOW)
    return tmp_path


@pytest.mark.parametrize("scheduler", [None, "sync", "fork:2", "local:2"])
def test_the_dry_run_prints_the_placement_and_partitions_the_run_records(job, scheduler):
    extra = [] if scheduler is None else ["--scheduler", scheduler]
    printed = _printed(_guideloom(job, "run", "plan.toml", "--dry-run", *extra))
    _guideloom(job, "run", "plan.toml", *extra)
    _agree(printed, _recorded(job / "out"))


def test_an_update_dry_run_prints_the_plan_of_the_update(job):
    """An update's estimate is scaled to what it reads: the dry run now scales it too (it did
    not, and could print another partitioning or placement than the update then used)."""
    _guideloom(job, "run", "plan.toml")
    make_demo_data(job / "data", n=16)  # six added; the ten others rewritten alike
    printed = _printed(_guideloom(job, "run", "plan.toml", "--update", "--dry-run"))
    stdout = _guideloom(job, "run", "plan.toml", "--update")
    assert "6 added" in stdout
    _agree(printed, _recorded(job / "out"))
