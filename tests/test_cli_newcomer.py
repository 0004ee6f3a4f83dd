"""What a newcomer runs into on the command line, run as they run it: the ``guideloom`` command
in a subprocess, from a project directory, with real processes, sockets and pipes."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import psutil
import pytest

from guideloom.demo import make_demo_data

ROOT = Path(__file__).resolve().parents[1]

GATED_JOB = f"""
python_path = ["{ROOT}"]
[dataset]
data_dir = "data"
[view]
name = "force-curve"
[transforms]
record = "tests.export_helpers:blocking_first_rows"
code_version = "tests-blocking-1"
[output]
kind = "npy"
path = "exports/out"
partition_size = 2
"""


def shell_env(**extra: str) -> dict[str, str]:
    """A user's shell: ``guideloom`` on PATH, no PYTHONPATH into the checkout."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "GUIDELOOM_TEST_BLOCK_FROM")}
    scripts = [sysconfig.get_path("scripts"), str(Path(sys.executable).parent)]
    env["PATH"] = os.pathsep.join([*scripts, env.get("PATH", "")])
    env["PYTHONUNBUFFERED"] = "1"
    return {**env, **extra}


def guideloom(*args: str, cwd: Path, timeout: float = 180, **env: str,
              ) -> subprocess.CompletedProcess:
    return subprocess.run(["guideloom", *args], cwd=cwd, env=shell_env(**env),
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def project(tmp_path) -> Path:
    """A project directory with 24 demo experiments in ./data and the gated job in ./job.toml."""
    make_demo_data(tmp_path / "data", n=24)
    (tmp_path / "job.toml").write_text(GATED_JOB)
    return tmp_path


def wait_for(predicate, proc: subprocess.Popen, what: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # an event on disk, polled
        assert proc.poll() is None, f"the job ended before {what}"
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.05)


@pytest.mark.cluster
@pytest.mark.fast_case("the same directory")
@pytest.mark.parametrize("where", ["the same directory", "another directory"])
def test_status_after_a_killed_run_prints_a_resume_command_that_works(project, where):
    parts = project / "exports" / ".out.guideloom-staging" / "parts"
    proc = subprocess.Popen(["guideloom", "run", "job.toml", "--scheduler", "local:2"],
                            cwd=project, env=shell_env(GUIDELOOM_TEST_BLOCK_FROM="12"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        wait_for(lambda: parts.is_dir() and any(parts.glob("*.json")), proc,
                 "finished partition")
        workers = psutil.Process(proc.pid).children(recursive=True)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # as a crash or a closed terminal would
        proc.wait()
    _, alive = psutil.wait_procs(workers, timeout=5)
    assert not alive

    shell = project if where == "the same directory" else project / "elsewhere"
    shell.mkdir(exist_ok=True)
    status = guideloom("status", str(project / "exports" / "out"), cwd=shell)
    assert status.returncode == 0, status.stderr
    assert re.search(r"incomplete: \d+/12 partitions done", status.stdout), status.stdout
    hint = re.search(r"^not running \(interrupted\): rerun `([^`]+)` to resume it$",
                     status.stdout, re.M)
    assert hint, status.stdout
    # the exact command shown, typed into the same shell (the gate is gone: the job can finish)
    resumed = subprocess.run(hint.group(1), shell=True, cwd=shell, env=shell_env(),
                             capture_output=True, text=True, timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    assert re.search(r"^resumed: \d+ partitions", resumed.stdout, re.M), resumed.stdout
    assert "wrote 24 records" in resumed.stdout
    done = guideloom("status", "exports/out", cwd=project)
    assert "complete: 12/12 partitions done (24/24 experiments" in done.stdout, done.stdout


@pytest.mark.cluster
def test_a_busy_dashboard_port_is_replaced_without_an_unclosed_socket_warning(project):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = guideloom("run", "job.toml", "--scheduler", "local:1", "--dashboard",
                        f"127.0.0.1:{port}", cwd=project, PYTHONWARNINGS="always",
                        PYTHONDEVMODE="1")
    assert out.returncode == 0, out.stderr
    assert "wrote 24 records" in out.stdout
    url = re.search(r"Dask dashboard: http://127\.0\.0\.1:(\d+)/status", out.stderr)
    assert url, out.stderr
    assert int(url.group(1)) != port
    assert "unclosed" not in out.stderr.lower(), out.stderr
    assert "ResourceWarning" not in out.stderr, out.stderr


def test_inspect_into_head_ends_quietly(project):
    made = guideloom("run", "job.toml", "--scheduler", "sync", cwd=project)
    assert made.returncode == 0, made.stderr
    full = guideloom("inspect", "exports/out", cwd=project)
    assert full.returncode == 0
    assert len(full.stdout.splitlines()) > 1
    piped = subprocess.run(["bash", "-c", "set -o pipefail; guideloom inspect exports/out | "
                            "head -1"], cwd=project, env=shell_env(), capture_output=True,
                           text=True, timeout=120)
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout.splitlines() == full.stdout.splitlines()[:1]
    assert "BrokenPipe" not in piped.stderr, piped.stderr
    assert "Traceback" not in piped.stderr, piped.stderr
    assert piped.stderr == ""
    # the same without a race: the reader is gone before guideloom writes its first line
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        gone = subprocess.run(["guideloom", "inspect", "exports/out"], cwd=project,
                              env=shell_env(), stdout=write_end, stderr=subprocess.PIPE,
                              text=True, timeout=120)
    finally:
        os.close(write_end)
    assert gone.returncode == 0, gone.stderr
    assert gone.stderr == "", gone.stderr


def test_dry_run_on_a_complete_export_says_so_and_names_overwrite(project):
    plain = guideloom("run", "job.toml", "--dry-run", cwd=project)
    assert plain.returncode == 0, plain.stderr
    assert "already holds a complete export" not in plain.stdout
    made = guideloom("run", "job.toml", "--scheduler", "sync", cwd=project)
    assert made.returncode == 0, made.stderr
    again = guideloom("run", "job.toml", "--dry-run", cwd=project)
    assert again.returncode == 0, again.stderr
    target = project / "exports" / "out"
    note = next((line for line in again.stdout.splitlines() if line.startswith("note:")), "")
    assert "already holds a complete export" in note, again.stdout
    assert "--overwrite" in note, again.stdout
    assert str(target) in note or "exports/out" in note
    forced = guideloom("run", "job.toml", "--dry-run", "--overwrite", cwd=project)
    assert "already holds a complete export; this run replaces it" in forced.stdout
    # what the note predicts is what a real run does
    refused = guideloom("run", "job.toml", "--scheduler", "sync", cwd=project)
    assert refused.returncode == 2, refused.stderr
    assert "--overwrite" in refused.stderr, refused.stderr
    replaced = guideloom("run", "job.toml", "--scheduler", "sync", "--overwrite", cwd=project)
    assert replaced.returncode == 0
    assert "wrote 24 records" in replaced.stdout
