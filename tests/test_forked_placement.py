"""Partitions run in processes forked from the driver (guideloom.cluster.forked): real drivers in
subprocesses, real SIGKILLs and SIGINTs to a child, to the driver and to its process group,
the published bytes compared with an in-process export, and reruns that resume."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

import guideloom
from guideloom.runtime.faults import FAULT_ENV, PAUSE_ENV, PAUSE_FIFO_ENV
from guideloom.testing.formats import files_of
from tests.child_processes import start_interruptible

ROOT = Path(__file__).resolve().parents[1]
PART = 4  # 36 demo experiments: 9 partitions
PAUSED = "partition-marked"  # a child waits here (after its partition's marker)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="forked workers are Linux only")

DRIVER = """
import json, sys, threading
import numpy as np
import guideloom
from guideloom.export.api import export

def crop_force(force):
    return np.asarray(force)[:1000]

data, out, raw = sys.argv[1:4]
a = json.loads(raw)
if a.get("thread"):  # another thread in the driver: it must not fork
    stop = threading.Event()
    threading.Thread(target=stop.wait, name="user-thread", daemon=True).start()
guideloom.config.set(**a.get("config", {}))
if a.get("log"):  # guideloom's own lines (the placement) on stderr
    import logging
    logging.basicConfig(level=logging.INFO, format="%(message)s")
kind = a.get("kind", "npy")
sized = {} if a.get("default_partitions") else {"partition_size": 4}
try:
    if a.get("crash_at"):
        from guideloom.runtime.faults import crash_at
        with crash_at(a["crash_at"]):
            r = export("force-curve", out, kind=kind, data_dir=data, client=a["client"],
                       transforms={"force_data": crop_force}, **sized)
    else:
        r = export("force-curve", out, kind=kind, data_dir=data, client=a["client"],
                   transforms={"force_data": crop_force}, **sized)
    again = None
    if a.get("again"):  # a second export in the same process, to out + "-again"
        again = export("force-curve", out + "-again", kind=kind, data_dir=data,
                       client=a["client"], transforms={"force_data": crop_force},
                       **sized).manifest["placement"]
except BaseException as exc:
    print(json.dumps({"error": type(exc).__name__, "message": str(exc),
                      "notes": getattr(exc, "__notes__", [])}), flush=True)
    sys.exit(3)
workers = sorted({s.get("worker", "") for s in r.summaries if "worker" in s})
print(json.dumps({"resumed": r.resumed_partitions, "placement": r.manifest["placement"],
                  "workers": workers, "driver": __import__("os").getpid(), "again": again,
                  "n_partitions": r.manifest["n_partitions"],
                  "summaries": {str(s["index"]): s["started"] for s in r.summaries}}),
      flush=True)
"""


def crop_force(force):
    """The first 1000 rows (the demo's force curves vary in length); as the driver's."""
    return np.asarray(force)[:1000]


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in (FAULT_ENV, PAUSE_ENV, PAUSE_FIFO_ENV):
        env.pop(name, None)
    env.update(extra)
    return env


def _command(data: Path, out: Path, **a) -> list[str]:
    a.setdefault("client", "fork:2")
    return [sys.executable, "-c", DRIVER, str(data), str(out), json.dumps(a)]


def export(data: Path, out: Path, env: dict[str, str] | None = None, **a):
    """One export by a driver in a fresh interpreter: ``(returncode, result or error, stderr)``."""
    done = subprocess.run(_command(data, out, **a), env=env or _env(), cwd=out.parent,
                          capture_output=True, text=True, timeout=180)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    return done.returncode, (json.loads(lines[-1]) if lines else None), done.stderr


@pytest.fixture(scope="module")
def reference(demo_zip, tmp_path_factory) -> Path:
    """The same export in this process (client='sync')."""
    out = tmp_path_factory.mktemp("forked-ref") / "out"
    guideloom.export_to_numpy("force-curve", out, data_dir=demo_zip, client="sync",
                              partition_size=PART, transforms={"force_data": crop_force})
    return out


def digests(out: Path) -> dict[str, str]:
    doc = json.loads((out / "croissant.json").read_text())
    return {d["name"]: d["sha256"] for d in doc["distribution"] if "sha256" in d}


def assert_same_export(out: Path, reference: Path) -> None:
    assert files_of(out) == files_of(reference)
    assert digests(out) == digests(reference)  # hashed in the driver as children wrote rows
    assert guideloom.load_export(out).verify().rows == 36


class Paused:
    """A driver (fork:2 unless ``a`` says otherwise) whose first child to finish a partition
    waits at :data:`PAUSED` (the driver itself with ``forks=0``: an in-process run)."""

    def __init__(self, data: Path, out: Path, tmp_path: Path, new_session: bool = False,
                 forks: int = 2, **a):
        self.fifo = tmp_path / "pause.fifo"
        os.mkfifo(self.fifo)
        env = _env(**{PAUSE_ENV: PAUSED, PAUSE_FIFO_ENV: str(self.fifo)})
        start = start_interruptible if new_session else subprocess.Popen
        self.proc = start(_command(data, out, **a), env=env, cwd=out.parent,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.holder = self._hold()
        self.children = [c.pid for c in psutil.Process(self.proc.pid).children()]
        assert len(self.children) == forks, self.children
        holders = self.children or [self.proc.pid]
        deadline = time.monotonic() + 30  # its open() returns once the FIFO has a writer
        paused: list[int] = []
        while not paused and time.monotonic() < deadline:
            paused = [pid for pid in holders if self._has_fifo(pid)]
        assert paused, "no process of the run holds the FIFO"
        self.paused = paused[0]  # the other may pause too: a FIFO with a writer opens at once

    def _hold(self) -> int:
        """Open the FIFO for writing once a child waits on it (polling the driver meanwhile,
        so a driver that fails first is reported, not waited for)."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                return os.open(self.fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # ENXIO: no child is at the point yet
                if self.proc.poll() is not None:
                    out, err = self.proc.communicate()
                    pytest.fail(f"the driver ended before a child paused: {out}\n{err}")
                time.sleep(0.01)
        self.proc.kill()
        pytest.fail("no child reached the pause point")

    def _has_fifo(self, pid: int) -> bool:
        fds = Path(f"/proc/{pid}/fd")
        try:
            return any(os.readlink(fd) == str(self.fifo) for fd in fds.iterdir())
        except OSError:
            return False

    def release(self) -> None:
        if self.holder >= 0:
            os.close(self.holder)
            self.holder = -1

    def finish(self) -> tuple[int, str, str]:
        self.release()
        out, err = self.proc.communicate(timeout=120)
        return self.proc.returncode, out, err


def gone(pids: list[int], timeout: float = 20.0) -> list[int]:
    """The processes of ``pids`` still alive (zombies count as gone) after up to ``timeout``."""
    deadline = time.monotonic() + timeout
    alive = list(pids)
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in alive if _alive(pid)]
        if alive:
            time.sleep(0.02)
    return alive


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def resumed_equal(data: Path, out: Path, reference: Path) -> dict:
    code, result, err = export(data, out)
    assert code == 0, err
    assert result["resumed"] >= 1, result  # the markers of the killed run were kept
    assert_same_export(out, reference)
    return result


# --- the placement itself ---------------------------------------------------------------------
def test_a_forked_export_writes_the_in_process_bytes_and_says_it_forked(demo_zip, reference,
                                                                         tmp_path):
    out = tmp_path / "out"
    code, result, err = export(demo_zip, out)
    assert code == 0, err
    assert result["placement"]["mode"] == "forked"
    assert result["placement"]["workers"] == 2
    workers = result["workers"]  # "forked:PID" of each child that ran a partition
    assert len(workers) == 2
    assert f"forked:{result['driver']}" not in workers
    assert_same_export(out, reference)
    manifest = json.loads((out / "export.json").read_text())
    assert manifest["placement"]["mode"] == "forked"
    assert manifest["n_partitions"] == 9


def test_the_default_client_forks_a_job_too_small_for_a_cluster(demo_zip, reference, tmp_path):
    # 36 x 0.05 s estimated: saves 0.9 s on two cores, less than a cluster start (2 s)
    code, result, err = export(demo_zip, tmp_path / "a", client=None,
                               config={"per_record_s": 0.05, "fork_start_s": 0.0})
    assert code == 0, err
    assert result["placement"]["mode"] == "forked", result["placement"]
    assert_same_export(tmp_path / "a", reference)
    code, result, err = export(demo_zip, tmp_path / "b", client=None,
                               config={"per_record_s": 0.05, "fork_start_s": 5.0})
    assert code == 0, err
    assert result["placement"]["mode"] == "in-process", result["placement"]


def test_no_fork_while_another_thread_runs_in_the_driver(demo_zip, reference, tmp_path):
    code, result, err = export(demo_zip, tmp_path / "out", thread=True)
    assert code == 0, err
    placed = result["placement"]
    assert placed["mode"] == "in-process", placed
    assert "user-thread" in placed["reason"]
    assert "deadlock" in placed["reason"]
    assert_same_export(tmp_path / "out", reference)


def test_importing_guideloom_starts_and_loads_nothing_for_forking(tmp_path):
    probe = ("import sys, threading, guideloom, guideloom.export.run; "
             "print('guideloom.cluster.forked' in sys.modules, threading.active_count())")
    done = subprocess.run([sys.executable, "-c", probe], env=_env(), cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["False", "1"], done.stderr


# --- errors in a child ------------------------------------------------------------------------
def test_an_error_in_a_forked_partition_is_raised_in_the_driver(demo_loose, tmp_path):
    import h5py

    data = tmp_path / "data"
    shutil.copytree(demo_loose, data)
    with h5py.File(data / "h5" / "0013.h5", "a") as f:
        del f["force/data"]
    code, result, _ = export(data, tmp_path / "out")
    assert code == 3
    assert result["error"] == "MissingFieldError", result
    assert "13" in result["message"], result
    assert any("forked export worker" in note and "partition 3" in note
               for note in result["notes"]), result["notes"]
    assert not (tmp_path / "out").exists()


@pytest.mark.slow  # fast sibling: test_an_error_in_a_forked_partition_is_raised_in_the_driver
def test_an_injected_fault_in_a_child_reaches_the_driver_and_a_rerun_resumes(demo_zip,
                                                                             reference,
                                                                             tmp_path):
    out = tmp_path / "out"
    code, result, _ = export(demo_zip, out, crash_at=PAUSED)
    assert code == 3, result
    assert result["error"] == "InjectedFault", result
    resumed_equal(demo_zip, out, reference)


# --- kills ------------------------------------------------------------------------------------
def test_a_child_killed_at_a_fault_point_fails_the_export_and_a_rerun_resumes(demo_zip,
                                                                              reference,
                                                                              tmp_path):
    out = tmp_path / "out"
    code, result, err = export(demo_zip, out, env=_env(**{FAULT_ENV: PAUSED}))
    assert code == 3, err
    assert result["error"] == "ForkedWorkerError", result
    assert "killed by signal 9 (SIGKILL)" in result["message"]
    assert "rerun the same export to resume" in result["message"]
    assert not out.exists()
    resumed_equal(demo_zip, out, reference)


def test_a_child_killed_from_outside_fails_the_export_and_a_rerun_resumes(demo_zip, reference,
                                                                         tmp_path):
    out = tmp_path / "out"
    run = Paused(demo_zip, out, tmp_path)
    os.kill(run.paused, signal.SIGKILL)
    code, stdout, err = run.finish()
    assert code == 3, err
    result = json.loads(stdout.splitlines()[-1])
    assert result["error"] == "ForkedWorkerError", result
    assert f"worker {run.paused} was killed by signal 9" in result["message"]
    assert gone(run.children) == []  # the other child was ended by the driver
    resumed_equal(demo_zip, out, reference)


def test_a_sigkill_of_the_driver_alone_ends_its_children(demo_zip, reference, tmp_path):
    out = tmp_path / "out"
    run = Paused(demo_zip, out, tmp_path)
    os.kill(run.proc.pid, signal.SIGKILL)  # only the driver: PR_SET_PDEATHSIG ends the rest
    run.proc.wait(timeout=60)
    assert gone(run.children) == []
    run.finish()
    resumed_equal(demo_zip, out, reference)


@pytest.mark.slow  # fast sibling: test_a_sigkill_of_the_driver_alone_ends_its_children
def test_a_sigkill_of_the_process_group_and_a_rerun(demo_zip, reference, tmp_path):
    out = tmp_path / "out"
    run = Paused(demo_zip, out, tmp_path, new_session=True)
    os.killpg(run.proc.pid, signal.SIGKILL)
    run.proc.wait(timeout=60)
    assert run.proc.returncode == -signal.SIGKILL
    assert gone(run.children) == []
    run.finish()
    resumed_equal(demo_zip, out, reference)


def test_ctrl_c_of_the_driver_stops_its_children(demo_zip, reference, tmp_path):
    out = tmp_path / "out"
    run = Paused(demo_zip, out, tmp_path, new_session=True)
    os.killpg(run.proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole group
    run.proc.wait(timeout=60)  # the paused child ignores it; the driver ends both
    assert gone(run.children) == []
    code, stdout, _ = run.finish()
    assert code == 3
    assert json.loads(stdout.splitlines()[-1])["error"] == "KeyboardInterrupt"
    resumed_equal(demo_zip, out, reference)


# fast sibling: test_a_child_killed_at_a_fault_point_fails_the_export_and_a_rerun_resumes
@pytest.mark.slow
def test_the_driver_killed_at_its_own_fault_point_after_forked_partitions(demo_zip, reference,
                                                                          tmp_path):
    out = tmp_path / "out"
    code, result, err = export(demo_zip, out, env=_env(**{FAULT_ENV: "partitions-done"}))
    assert code == -signal.SIGKILL, err  # the driver's point: the driver dies, as in-process
    assert result is None
    assert not out.exists()
    code, result, err = export(demo_zip, out)
    assert code == 0, err
    assert result["resumed"] == 9  # every partition the children wrote was kept
    assert_same_export(out, reference)


# --- every format forks, and the placement printed is the one that ran ----------------------
@pytest.fixture(scope="module")
def zarr_reference(demo_zip, tmp_path_factory) -> Path:
    """The zarr export in this process (client='sync')."""
    out = tmp_path_factory.mktemp("forked-zarr-ref") / "out.zarr"
    guideloom.export_to_zarr("force-curve", out, data_dir=demo_zip, client="sync",
                             partition_size=PART, transforms={"force_data": crop_force})
    return out


def _running_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("guideloom: running ")]


def test_a_forced_fork_of_a_zarr_export_forks_before_zarr_starts_its_threads(
        demo_zip, zarr_reference, tmp_path):
    """zarr's writer starts I/O threads when it allocates the arrays: the children are forked
    before, so the placement printed (forked) is the one that runs, and export.json says it.
    A second zarr export in the same process finds zarr's threads running and says so in its
    one placement line (in-process)."""
    out = tmp_path / "out.zarr"
    code, result, err = export(demo_zip, out, kind="zarr", again=True, log=True)
    assert code == 0, err
    assert result["placement"]["mode"] == "forked", result["placement"]
    assert len(result["workers"]) == 2
    assert all(w.startswith("forked:") for w in result["workers"])
    assert json.loads((out / "export.json").read_text())["placement"]["mode"] == "forked"
    assert files_of(out) == files_of(zarr_reference)
    assert guideloom.load_export(out).verify().rows == 36
    again = result["again"]
    assert again["mode"] == "in-process", again
    assert "zarr's I/O threads" in again["reason"], again
    lines = _running_lines(err)
    assert len(lines) == 2, lines  # one decision per export
    assert lines[0] == ("guideloom: running forked: client='fork:2': 2 processes forked from "
                        "this one")
    assert lines[1].startswith("guideloom: running in-process: client='fork:2', but "), lines


# --- interrupted in one placement, resumed in another ---------------------------------------
MANY = {"per_record_s": 0.05}  # an estimate that splits the 36 experiments into many partitions


def _markers(out: Path) -> dict[str, float]:
    """The finished partitions of the staged job at ``out``: index -> its start time."""
    from guideloom.export.staging import Staging

    staging = Staging.for_target(out)
    return {str(i): s["started"] for i, s in staging.markers().items()}


def _killed(data: Path, out: Path, tmp_path: Path, client: str, forks: int) -> dict[str, float]:
    """Run the export on ``client`` with the default partitioning, SIGKILL the driver's
    process group once a partition is marked; the markers it left."""
    run = Paused(data, out, tmp_path, new_session=True, forks=forks, client=client,
                 default_partitions=True, config=MANY)
    os.killpg(run.proc.pid, signal.SIGKILL)
    run.proc.wait(timeout=60)
    assert run.proc.returncode == -signal.SIGKILL
    assert gone(run.children) == []
    run.finish()
    assert not out.exists()
    left = _markers(out)
    assert left, "no partition was marked before the kill"
    return left


def _resumed_elsewhere(data: Path, out: Path, reference: Path, client: str,
                       left: dict[str, float]) -> dict:
    code, result, err = export(data, out, client=client, default_partitions=True, config=MANY,
                               log=True)
    assert code == 0, err
    assert "discarded" not in err, err
    assert result["n_partitions"] == json.loads((reference / "export.json").read_text())[
        "n_partitions"]
    assert result["resumed"] == len(left), (result["resumed"], left)
    for index, started in left.items():  # kept as they were: not one of them was run again
        assert result["summaries"][index] == started, index
    assert files_of(out) == files_of(reference)
    assert guideloom.load_export(out).verify().rows == 36
    return result


@pytest.fixture(scope="module")
def default_reference(demo_zip, tmp_path_factory) -> Path:
    """The uninterrupted export with the default partitioning, in-process."""
    out = tmp_path_factory.mktemp("forked-default-ref") / "out"
    with guideloom.config.set(**MANY):
        guideloom.export_to_numpy("force-curve", out, data_dir=demo_zip, client="sync",
                                  transforms={"force_data": crop_force})
    return out


def test_a_forked_export_killed_resumes_in_process(demo_zip, default_reference, tmp_path):
    out = tmp_path / "out"
    left = _killed(demo_zip, out, tmp_path, "fork:2", forks=2)
    result = _resumed_elsewhere(demo_zip, out, default_reference, "sync", left)
    assert result["placement"]["mode"] == "in-process"


@pytest.mark.cluster
@pytest.mark.slow  # fast sibling: test_a_forked_export_killed_resumes_in_process
def test_an_in_process_export_killed_resumes_on_the_local_cluster(demo_zip, default_reference,
                                                                 tmp_path):
    out = tmp_path / "out"
    left = _killed(demo_zip, out, tmp_path, "sync", forks=0)
    result = _resumed_elsewhere(demo_zip, out, default_reference, "local:2", left)
    assert result["placement"]["mode"] == "local-cluster"
