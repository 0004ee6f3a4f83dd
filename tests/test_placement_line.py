"""The placement line states the tasks the job runs (issue 22, cosmetics).

With ``client=None`` the decision compares one task per core with the cluster's cost, but an
in-process job's partitions are sized for one worker: the line said "2 tasks" for a job that
ran 3 partitions. It now states what runs, in the export and in ``run --dry-run``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import guideloom

SCRIPT = textwrap.dedent("""
    import logging

    import numpy as np
    from guideloom.export import export

    logging.basicConfig(level=logging.INFO, format="%(message)s")  # the library logs (issue 24)

    def mean_force(rec):
        return {"mean": np.asarray(rec["force_data"], dtype=np.float64).mean(axis=0)}

    export("force-curve", "out", kind="npy", data_dir="demo-data", record_transform=mean_force)
""")


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def _tasks(stderr: str) -> int:
    match = re.search(r"guideloom: running in-process: about [\d.]+ s of work in (\d+) tasks?",
                      stderr)
    assert match, stderr
    return int(match.group(1))


def test_in_process_line_names_the_partitions_that_ran(tmp_path):
    guideloom.make_demo_data(tmp_path / "demo-data", n=6)
    (tmp_path / "job.py").write_text(SCRIPT)
    done = subprocess.run([sys.executable, "job.py"], cwd=tmp_path, env=_env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((tmp_path / "out" / "export.json").read_text())
    assert _tasks(done.stderr) == manifest["n_partitions"] > 1, done.stderr


def test_dry_run_line_names_the_partitions_it_lists(tmp_path):
    guideloom.make_demo_data(tmp_path / "demo-data", n=6)
    done = subprocess.run([sys.executable, "-m", "guideloom", "run", "force_signals",
                           "--dry-run"], cwd=tmp_path, env=_env(), capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    runs = re.search(r"^runs: in-process: about [\d.]+ s of work in (\d+) tasks?", done.stdout,
                     re.M)
    parts = re.search(r"^partitions: (\d+) of up to", done.stdout, re.M)
    assert runs, done.stdout
    assert parts, done.stdout
    assert int(runs.group(1)) == int(parts.group(1)), done.stdout
    assert not Path(tmp_path / "exports").exists()


# --- the Python API's one line on stderr when guideloom starts a cluster (issue 31) ----------
API_JOB = textwrap.dedent("""
    import logging, sys

    import numpy as np
    from guideloom.export import export

    client, mode = sys.argv[1], sys.argv[2]
    if mode == "logging":  # a user who configured logging: its records, no second line
        logging.basicConfig(level=logging.INFO, format="%(message)s")

    def mean_force(rec):
        return {"mean": np.asarray(rec["force_data"], dtype=np.float64).mean(axis=0)}

    export("force-curve", "out", kind="npy", data_dir="demo-data", record_transform=mean_force,
           client=client, quiet=mode == "quiet")
    print("exported", flush=True)
    sys.stdin.readline()  # the embedded cluster (and its dashboard) lives until the test says
""")
LINE = re.compile(r"^guideloom: running local-cluster: local cluster of (\d+) workers? "
                  r"\(started\); dashboard (http://127\.0\.0\.1:\d+/status), guideloom page "
                  r"(http://127\.0\.0\.1:\d+/guideloom)$", re.M)


def _api_job(tmp_path: Path, client: str, mode: str) -> subprocess.CompletedProcess[str]:
    guideloom.make_demo_data(tmp_path / "demo-data", n=6)
    (tmp_path / "job.py").write_text(API_JOB)
    return subprocess.run([sys.executable, "job.py", client, mode], cwd=tmp_path, env=_env(),
                          input="\n", capture_output=True, text=True, timeout=300)


@pytest.mark.cluster
def test_a_python_export_on_a_cluster_it_starts_prints_one_line_with_both_urls(tmp_path):
    """No logging configured (a notebook, a script): one line on stderr says where the job
    runs, with the dashboard's and the page's URLs; both answer over HTTP while the cluster
    lives, and the page's JSON shows the published export with starting the cluster as its
    own phase."""
    import urllib.request

    guideloom.make_demo_data(tmp_path / "demo-data", n=6)
    (tmp_path / "job.py").write_text(API_JOB)
    proc = subprocess.Popen([sys.executable, "job.py", "local:1", "none"], cwd=tmp_path,
                            env=_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None
    assert proc.stdout is not None
    assert proc.stderr is not None
    try:
        line = proc.stderr.readline()  # the first thing the job prints
        match = LINE.match(line.rstrip("\n"))
        assert match, line
        assert proc.stdout.readline() == "exported\n"
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(match.group(2), timeout=30) as status:
            assert status.status == 200
        with opener.open(match.group(3), timeout=30) as page:
            assert page.status == 200
            assert 'href="guideloom"' in page.read().decode()
        with opener.open(match.group(3) + "/json", timeout=30) as answer:
            (shown,) = json.loads(answer.read())["exports"]
    finally:
        proc.stdin.write("\n")
        proc.stdin.close()
        rest = proc.stderr.read()
        proc.wait(timeout=120)
    assert proc.returncode == 0, rest
    assert "guideloom: running" not in rest, rest  # one line, not one per record
    manifest = json.loads((tmp_path / "out" / "export.json").read_text())
    assert shown["status"] == "published"
    assert shown["experiments"]["done"] == 6
    assert shown["tasks"]["finished"] == shown["tasks"]["total"] == manifest["n_partitions"]
    names = [p["name"] for p in shown["phases"]]
    assert names == ["plan", "cluster-start", "plan", "read-transform-write", "finalize",
                     "checksums", "publish"], names
    start = shown["phases"][1]["seconds"]
    assert start > 0
    assert manifest["timings"]["cluster_start_s"] == pytest.approx(start, abs=0.01)
    # the plan phase no longer holds the cluster's start
    assert manifest["timings"]["plan_s"] + start <= manifest["timings"]["total_s"]


@pytest.mark.cluster
def test_quiet_silences_the_line_and_configured_logging_gets_the_records_once(tmp_path):
    quiet = _api_job(tmp_path / "quiet", "local:1", "quiet")
    assert quiet.returncode == 0, quiet.stderr
    assert "guideloom" not in quiet.stderr, quiet.stderr
    assert "http://" not in quiet.stderr, quiet.stderr

    logged = _api_job(tmp_path / "logged", "local:1", "logging")
    assert logged.returncode == 0, logged.stderr
    assert not LINE.search(logged.stderr), logged.stderr  # the records, not a second copy
    assert logged.stderr.count("guideloom: running local-cluster: local cluster of 1 worker"
                               ) == 1, logged.stderr
    assert re.search(r"^Dask dashboard: http://127\.0\.0\.1:\d+/status$", logged.stderr, re.M)
    assert re.search(r"^guideloom page: http://127\.0\.0\.1:\d+/guideloom ", logged.stderr,
                     re.M)


def test_an_in_process_python_export_prints_nothing(tmp_path):
    for client in ("sync", "fork:2"):
        done = _api_job(tmp_path / client.replace(":", "-"), client, "none")
        assert done.returncode == 0, done.stderr
        assert done.stderr == "", done.stderr


@pytest.mark.parametrize(("text", "kind", "count"), [
    ("sync", "sync", None), ("local", "local", None), ("local:3", "local", 3),
    ("fork", "fork", None), ("fork:2", "fork", 2), ("tcp://10.0.0.1:8786", "scheduler", None),
    ("tls://head:8786", "scheduler", None), ("slurm:4", "slurm", 4), ("pbs:2", "pbs", 2)])
def test_every_client_text_is_parsed_in_one_place(text, kind, count):
    from guideloom.cluster.runtime import parse_client_text

    parsed = parse_client_text(text)
    assert (parsed.text, parsed.kind, parsed.count) == (text, kind, count)


@pytest.mark.parametrize("text", ["fork:0", "local:", "tcp://host", "Sync", "k8s:2"])
def test_a_bad_client_text_is_refused_listing_every_form(text):
    from guideloom.cluster.runtime import parse_client_text

    with pytest.raises(ValueError, match=r"fork, fork:N, sync") as raised:
        parse_client_text(text)
    assert repr(text) in str(raised.value)
