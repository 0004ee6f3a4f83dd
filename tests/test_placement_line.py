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
    assert runs and parts, done.stdout
    assert int(runs.group(1)) == int(parts.group(1)), done.stdout
    assert not Path(tmp_path / "exports").exists()
