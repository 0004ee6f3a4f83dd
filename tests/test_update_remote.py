"""Updating an export from the release where it lives (issue 32, item 5), and the command
line's ``--update`` (with ``--dry-run``) and ``[output] update`` of workflow files.

The DOI case serves a release of 8 experiments through the test Dataverse server, exports it,
then serves a new version with 12 (the first 8 byte for byte the same, as a new release
version appends experiments) and updates: only the 4 new members are fetched and decoded.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import guideloom
from tests.dataverse_server import DOI, make_release, serve
from tests.export_helpers import COUNT_FILE_ENV, COUNTED_CODE_VERSION, counted_first_rows

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    """A fresh remote-read cache for the test."""
    path = tmp_path / "cache"
    monkeypatch.setenv("GUIDELOOM_CACHE_DIR", str(path))
    return path


def _export(target: Path, data_dir, update: bool = False):
    return guideloom.export.export(
        "force-curve", target, kind="npy", data_dir=data_dir, record_transform=counted_first_rows,
        code_version=COUNTED_CODE_VERSION,
        client="sync", partition_size=3, update=update)


def _member_bytes(server) -> int:
    return sum(n for path, n in server.counts.snapshot()["bytes"].items()
               if "/api/access/" in path or "/store/" in path or path.endswith(".zip"))


def test_a_new_release_version_is_one_update_fetching_only_the_new_members(
        tmp_path, cache_dir, monkeypatch):
    log = tmp_path / "decoded.txt"
    monkeypatch.setenv(COUNT_FILE_ENV, str(log))
    out, full = tmp_path / "out", tmp_path / "full"
    old = make_release(tmp_path / "v1", n=8)
    with serve(old) as server:
        monkeypatch.setenv("GUIDELOOM_DATAVERSE_URL", server.url)
        _export(out, DOI)
        first_bytes = server.counts.total_bytes()
    log.unlink()
    new = make_release(tmp_path / "v2", n=12)
    with serve(new) as server:
        monkeypatch.setenv("GUIDELOOM_DATAVERSE_URL", server.url)
        result = _export(out, DOI, update=True)
        update_bytes = server.counts.total_bytes()
    assert sorted(int(x) for x in log.read_text().split()) == [8, 9, 10, 11]
    assert result.update == {"added": 4, "removed": 0, "changed": 0, "carried": 8}
    # the 8 old members' archives changed (their MD5 did): their stored bytes are fetched
    # and hashed to prove them unchanged (issue 38), never decoded; beyond that the update
    # fetched the 4 new members only
    plan = result.update_plan
    assert set(plan.rehashed) == set(range(8))
    assert plan.hashed_bytes > 0
    assert update_bytes - plan.hashed_bytes < first_bytes
    log.unlink()
    _export(full, tmp_path / "v2" / "release")  # the new version, local, in full
    got, want = guideloom.load_export(out), guideloom.load_export(full)
    assert got.sim_ids.tolist() == want.sim_ids.tolist() == list(range(12))
    for i in range(12):
        assert np.array_equal(got[i]["force"], want[i]["force"])
    assert (out / "checksums.json").read_bytes() == (full / "checksums.json").read_bytes()
    assert got.verify().rows == 12
    gens = json.loads((out / "export.json").read_text())["generations"]
    assert all(g["data_dir"].startswith(f"{DOI} on http://127.0.0.1:") for g in gens)
    assert [g["release_version"] for g in gens] == ["2.0", "2.0"]


def test_an_export_of_local_data_is_updated_from_its_https_release(tmp_path, cache_dir,
                                                                    monkeypatch):
    """An export made from a local copy carries its rows when updated from the published
    copy: the evidence differs (local stat, the server's validator), so each member's stored
    bytes are fetched and hashed, found equal to the recorded digest, and not decoded."""
    from tests.test_remote_data import serve_logged

    log = tmp_path / "decoded.txt"
    monkeypatch.setenv(COUNT_FILE_ENV, str(log))
    site = tmp_path / "site"
    guideloom.make_demo_data(site / "release", n=10)
    out = tmp_path / "out"
    guideloom.export.export("force-curve", out, kind="npy", data_dir=site / "release",
                            record_transform=counted_first_rows,
                            code_version=COUNTED_CODE_VERSION, client="sync",
                            sim_ids=range(7))
    log.unlink()
    with serve_logged(site) as (url, _):
        result = guideloom.export.export("force-curve", out, kind="npy", data_dir=url,
                                         record_transform=counted_first_rows,
                                         code_version=COUNTED_CODE_VERSION,
                                         client="sync", update=True)
    assert sorted(int(x) for x in log.read_text().split()) == [7, 8, 9]
    assert result.update == {"added": 3, "removed": 0, "changed": 0, "carried": 7}


# --- the command line -------------------------------------------------------------------
WORKFLOW = """
name = "update-test"
paths_relative_to = "cwd"
[dataset]
data_dir = "{data}"
[view]
name = "force-curve"
[filter]
sim_ids = {ids}
[transforms]
record = "tests.export_helpers:first_rows"
[output]
kind = "npy"
path = "out"
{update}
"""


def _guideloom(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop(COUNT_FILE_ENV, None)
    return subprocess.run([sys.executable, "-m", "guideloom", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def _workflow(tmp_path: Path, data: Path, ids, update: bool = False) -> Path:
    path = tmp_path / "job.toml"
    path.write_text(WORKFLOW.format(data=data, ids=list(ids),
                                    update="update = true" if update else ""))
    return path


def test_run_update_and_its_dry_run(tmp_path):
    data = tmp_path / "data"
    guideloom.make_demo_data(data, n=12)
    done = _guideloom(["run", str(_workflow(tmp_path, data, range(8)))], tmp_path)
    assert done.returncode == 0, done.stderr
    wf = _workflow(tmp_path, data, range(11))
    before = (tmp_path / "out" / "export.json").read_bytes()
    plan = _guideloom(["run", str(wf), "--update", "--dry-run"], tmp_path)
    assert plan.returncode == 0, plan.stderr
    line = next(x for x in plan.stdout.splitlines() if x.startswith("update:"))
    assert "3 added, 0 removed, 0 changed, 8 carried" in line
    assert "reads " in line
    assert "carries " in line
    assert (tmp_path / "out" / "export.json").read_bytes() == before  # nothing written
    run = _guideloom(["run", str(wf), "--update"], tmp_path)
    assert run.returncode == 0, run.stderr
    assert "updated to generation 2: 3 added, 0 removed, 0 changed (read), 8 carried" in \
        run.stdout
    again = _guideloom(["run", str(wf), "--update"], tmp_path)
    assert again.returncode == 0, again.stdout
    assert again.stdout.startswith("up to date:"), again.stdout
    idle = _guideloom(["run", str(wf), "--update", "--dry-run"], tmp_path)
    assert "11 carried: up to date, nothing would be read or written" in idle.stdout
    both = _guideloom(["run", str(wf), "--update", "--overwrite"], tmp_path)
    assert both.returncode == 2
    assert "not both" in both.stderr


def test_a_workflow_file_asks_for_an_update(tmp_path):
    data = tmp_path / "data"
    guideloom.make_demo_data(data, n=12)
    assert _guideloom(["run", str(_workflow(tmp_path, data, range(6)))],
                      tmp_path).returncode == 0
    run = _guideloom(["run", str(_workflow(tmp_path, data, range(9), update=True))], tmp_path)
    assert run.returncode == 0, run.stderr
    assert "updated to generation 2: 3 added" in run.stdout
    again = _guideloom(["run", str(_workflow(tmp_path, data, range(9), update=True))],
                       tmp_path)
    assert again.returncode == 0, again.stdout
    assert again.stdout.startswith("up to date:"), again.stdout


def test_a_refused_update_is_one_line_and_exit_2(tmp_path):
    data = tmp_path / "data"
    guideloom.make_demo_data(data, n=6)
    wf = _workflow(tmp_path, data, range(4))
    assert _guideloom(["run", str(wf)], tmp_path).returncode == 0
    wf.write_text(wf.read_text().replace('kind = "npy"', 'kind = "npz"'))
    refused = _guideloom(["run", str(wf), "--update"], tmp_path)
    assert refused.returncode == 2
    assert "cannot update" in refused.stderr
    assert "'npy' export, this job writes 'npz'" in \
        refused.stderr
    assert "Traceback" not in refused.stderr


# --- shown: the run report, the dashboard page's state and JSON -----------------------------
def test_the_report_and_the_page_show_what_an_update_did(tmp_path, dask_client):
    from guideloom.cluster.progress import summary
    from guideloom.cluster.progress_html import export_html

    data = tmp_path / "data"
    guideloom.make_demo_data(data, n=12)
    out = tmp_path / "out"
    guideloom.export.export("force-curve", out, kind="npy", data_dir=data,
                            record_transform=counted_first_rows,
                            code_version=COUNTED_CODE_VERSION, sim_ids=range(8),
                            client=dask_client)
    report = tmp_path / "report.html"
    guideloom.export.export("force-curve", out, kind="npy", data_dir=data,
                            record_transform=counted_first_rows,
                            code_version=COUNTED_CODE_VERSION, sim_ids=range(11),
                            client=dask_client, update=True, report=report)
    shown = "3 added, 0 removed, 0 changed (read), 8 carried (not decoded)"
    assert shown in report.read_text()
    # the events the page's scheduler plugin builds its state from, sent to the scheduler
    from guideloom.cluster.progress import apply_event

    exports: dict = {}
    for _, msg in dask_client.get_events("guideloom"):
        apply_event(exports, msg)
    state = max(exports.values(), key=lambda s: s["started"])  # the update's run
    assert state["update"] == {"added": 3, "removed": 0, "changed": 0, "carried": 8}
    assert shown in export_html(state)
    assert summary(state)["update"] == state["update"]
    tasks = next(p for p in state["phases"] if p["name"] == "read-transform-write")
    assert tasks["detail"].endswith("; update: 3 added, 0 removed, 0 changed, 8 carried")


def test_the_dry_run_of_a_zarr_update_shows_the_partitions_it_keeps(tmp_path):
    data = tmp_path / "data"
    guideloom.make_demo_data(data, n=30)
    wf = _workflow(tmp_path, data, range(20))
    wf.write_text(wf.read_text().replace('kind = "npy"', 'kind = "zarr"'))
    assert _guideloom(["run", str(wf)], tmp_path).returncode == 0
    size = json.loads((tmp_path / "out" / "export.json").read_text())["partition_size"]
    wf.write_text(wf.read_text().replace(str(list(range(20))), str(list(range(30)))))
    plan = _guideloom(["run", str(wf), "--update", "--dry-run"], tmp_path)
    assert plan.returncode == 0, plan.stderr
    assert f"of up to {size} experiments" in plan.stdout
    run = _guideloom(["run", str(wf), "--update"], tmp_path)
    assert run.returncode == 0, run.stderr
    assert json.loads((tmp_path / "out" / "export.json").read_text())["partition_size"] == size
