"""guideloom.cluster.jobqueue against a real one-node SLURM (tests/slurm_helpers.py).

Skipped where SLURM or root is missing.

The worker jobs are real ``sbatch`` jobs running ``dask worker`` with this Python; the record
transforms below are defined in this module and reach the workers by pickle.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

import guideloom
from guideloom.cluster.jobqueue import (
    JobqueueError,
    JobqueueTerminated,
    WorkerTimeoutError,
    jobqueue_client,
)

pytestmark = pytest.mark.slurm  # every test here runs on the one-node SLURM of the session

REPO = Path(__file__).resolve().parent.parent


def force_summary(rec, *, marks: str | None = None):
    """A fixed-shape record: the first 64 force rows, their column means, the id.

    With ``marks``, each call also leaves a file naming the SLURM job it ran in (the output
    does not depend on it).
    """
    if marks is not None:
        job = os.environ.get("SLURM_JOB_ID", "none")
        (Path(marks) / f"{rec['_sim_id']}-{job}-{os.getpid()}").touch()
    force = np.asarray(rec["force_data"], dtype=np.float64)
    return {"head": force[:64], "mean": force.mean(axis=0), "sim": np.int64(rec["_sim_id"])}


def hang_once(rec, *, flag_dir: str, victim: int):
    """On experiment ``victim`` the first attempt writes its SLURM job id and blocks forever.

    The test cancels that job with ``scancel``; Dask re-runs the task on the other worker,
    whose attempt finds the flag and proceeds.
    """
    if rec["_sim_id"] == victim:
        try:
            fd = os.open(Path(flag_dir) / "attempt", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return force_summary(rec)
        os.close(fd)
        (Path(flag_dir) / "job.tmp").write_text(os.environ.get("SLURM_JOB_ID", ""))
        os.replace(Path(flag_dir) / "job.tmp", Path(flag_dir) / "job")
        threading.Event().wait()
    return force_summary(rec)


def _export(data_dir, out_dir, transform, client):
    return guideloom.export_to_numpy(
        "force-curve", out_dir, data_dir=data_dir, record_transform=transform, client=client,
        partition_size=3,
    )


def _assert_same_export(got_dir: Path, want_dir: Path) -> None:
    names = sorted(p.name for p in want_dir.glob("*.npy"))
    assert names == sorted(p.name for p in got_dir.glob("*.npy"))
    assert {"head.npy", "mean.npy", "sim.npy", "sim_ids.npy"} <= set(names)
    for name in names:
        got, want = np.load(got_dir / name), np.load(want_dir / name)
        assert got.dtype == want.dtype, name
        assert got.shape == want.shape, name
        assert got.tobytes() == want.tobytes(), name


@pytest.fixture(scope="module")
def sync_export(demo_zip, tmp_path_factory):
    """The reference: the same export run in-process."""
    out = tmp_path_factory.mktemp("sync") / "force"
    _export(demo_zip, out, force_summary, "sync")
    return out


@pytest.mark.slow
def test_api_export_on_slurm_jobs_equals_sync_export(slurm, demo_zip, sync_export, tmp_path,
                                                     capfd, caplog):
    caplog.set_level("INFO", logger="guideloom")  # the dashboard and jobs lines are log records
    marks = tmp_path / "marks"
    marks.mkdir()
    with jobqueue_client("slurm", 2, min_workers=2, wait_timeout=120) as client:
        jobs = {line.split()[0] for line in slurm.queue()}
        assert len(jobs) == 2
        assert all(" RUNNING " in line for line in slurm.queue())
        in_jobs = client.run(lambda: (os.environ.get("SLURM_JOB_ID"), sys.executable))
        assert {job for job, _ in in_jobs.values()} == jobs
        assert {exe for _, exe in in_jobs.values()} == {sys.executable}
        _export(demo_zip, tmp_path / "force",
                functools.partial(force_summary, marks=str(marks)), client)
    assert slurm.queue() == []
    _assert_same_export(tmp_path / "force", sync_export)
    # the driver transforms one record to learn the shapes (it is cheap); every written record
    # was transformed inside a SLURM job
    on_workers = [p for p in marks.iterdir() if not p.name.endswith(f"-{os.getpid()}")]
    ran_in = {p.name.split("-")[1] for p in on_workers}
    assert ran_in
    assert ran_in <= jobs
    assert len({p.name.split("-")[0] for p in on_workers}) == 36
    err = capfd.readouterr().err + caplog.text
    assert "Dask dashboard: http://127.0.0.1:" in err
    assert "ssh -L 8787:127.0.0.1:" in err
    assert f"jobs {', '.join(sorted(jobs, key=int))}" in err


@pytest.mark.slow
def test_export_completes_identically_when_a_worker_job_is_cancelled(
    slurm, demo_zip, sync_export, tmp_path
):
    flags = tmp_path / "flags"
    flags.mkdir()
    transform = functools.partial(hang_once, flag_dir=str(flags), victim=13)
    with jobqueue_client("slurm", 2, min_workers=2, wait_timeout=120) as client:
        jobs = {line.split()[0] for line in slurm.queue()}
        with ThreadPoolExecutor(1) as pool:
            job = pool.submit(_export, demo_zip, tmp_path / "force", transform, client)
            deadline = time.monotonic() + 120
            while not (flags / "job").exists():  # poll a condition: the task reached id 13
                assert time.monotonic() < deadline, job
                assert not job.done(), job
                time.sleep(0.05)
            victim = (flags / "job").read_text()
            assert victim in jobs
            cancelled = slurm.command("scancel", victim)
            assert cancelled.returncode == 0, cancelled.stderr
            job.result(timeout=300)
        # scancel is asynchronous: the export may finish on the other worker while SLURM is
        # still completing the cancelled job; wait (bounded) for SLURM to drop it
        deadline = time.monotonic() + 60
        while any(line.split()[0] == victim for line in slurm.queue()):
            assert time.monotonic() < deadline, f"cancelled job still listed: {slurm.queue()}"
            time.sleep(0.1)
        left = {line.split()[0] for line in slurm.queue()}
        assert victim not in left
        assert left <= jobs
    assert slurm.queue() == []
    _assert_same_export(tmp_path / "force", sync_export)


@pytest.mark.slow  # ~4 s; fast: the jobs cancelled when their holding process is signalled
def test_jobs_cancelled_after_an_exception_inside_the_context(slurm):
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(RuntimeError, match="boom"):
        with jobqueue_client("slurm", 2, min_workers=2, wait_timeout=120, quiet=True):
            assert len(slurm.queue()) == 2
            assert signal.getsignal(signal.SIGTERM) is not before  # SIGTERM -> clean exit
            raise RuntimeError("boom")
    assert slurm.queue() == []
    assert signal.getsignal(signal.SIGTERM) is before  # the previous handler is back


HOLDER = textwrap.dedent("""
    import signal
    import threading
    from guideloom.cluster.jobqueue import jobqueue_client

    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C as in a terminal
    with jobqueue_client("slurm", 2, min_workers=2, wait_timeout=120):
        print("ready", flush=True)
        threading.Event().wait()
""")


@pytest.mark.fast_case("15-143")
@pytest.mark.parametrize(
    ("signum", "returncode"),
    [(signal.SIGTERM, JobqueueTerminated().code), (signal.SIGINT, -signal.SIGINT)],
)
def test_signal_to_the_holding_process_cancels_its_jobs(slurm, tmp_path, signum, returncode):
    err = tmp_path / "stderr.txt"
    with open(err, "w") as err_file:
        proc = subprocess.Popen(
            [sys.executable, "-c", HOLDER], stdout=subprocess.PIPE, stderr=err_file,
            stdin=subprocess.DEVNULL, text=True, cwd=REPO, env=slurm.env,
        )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == "ready\n", err.read_text()
        assert len(slurm.queue()) == 2
        proc.send_signal(signum)  # the process this test started
        assert proc.wait(timeout=120) == returncode, err.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    assert slurm.queue() == []


@pytest.mark.slow
def test_pending_jobs_time_out_naming_the_reason(slurm):
    never_now = {"job_extra_directives": ["--begin=now+3600"]}
    start = time.monotonic()
    with pytest.raises(WorkerTimeoutError) as caught:
        with jobqueue_client("slurm", 1, job_options=never_now, wait_timeout=3, quiet=True):
            pytest.fail("the block must not run without a worker")
    message = str(caught.value)
    assert "\n" not in message
    assert "no SLURM worker connected within 3 s" in message
    assert "PENDING (BeginTime)" in message
    assert time.monotonic() - start < 60
    assert slurm.queue() == []


def test_rejected_submission_is_one_line(slurm):
    with pytest.raises(JobqueueError) as caught:
        with jobqueue_client("slurm", 1, job_options={"queue": "no-such-partition"},
                             wait_timeout=60, quiet=True):
            pytest.fail("the block must not run without a worker")
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith("sbatch failed:")
    assert "partition" in message.lower()
    assert slurm.queue() == []


def test_slurm_script_submits_and_cancels_on_sigterm(slurm, tmp_path):
    err = tmp_path / "stderr.txt"
    with open(err, "w") as err_file:
        proc = subprocess.Popen(
            [sys.executable, str(REPO / "cluster" / "slurm.py"), "--jobs", "1",
             "--config", str(slurm.jobqueue_config)],
            stdout=subprocess.PIPE, stderr=err_file, stdin=subprocess.DEVNULL, text=True,
            cwd=REPO, env=slurm.env,
        )
    try:
        assert proc.stdout is not None
        lines = _lines_until_stop(proc.stdout)
        assert lines[0].startswith("scheduler: tls://127.0.0.1:"), err.read_text()
        assert any(line.startswith("submit:    guideloom run WORKFLOW --scheduler tls://")
                   for line in lines), lines
        assert len(slurm.queue()) == 1
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == JobqueueTerminated().code, err.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    assert slurm.queue() == []


def _lines_until_stop(stream) -> list[str]:
    """What ``cluster/slurm.py`` printed, up to its ``stop:`` line."""
    lines: list[str] = []
    while not lines or not lines[-1].startswith("stop:"):
        line = stream.readline()
        assert line, f"slurm.py ended early after {lines}"
        lines.append(line.rstrip("\n"))
    return lines


@pytest.mark.slow  # ~6 s; fast: the same script's submit/cancel, the embedded cluster's TLS refusal
def test_slurm_script_is_tls_and_its_printed_address_works_from_another_shell(slurm, tmp_path,
                                                                              demo_zip):
    """cluster/slurm.py run from a temporary directory: the scheduler needs TLS, `guideloom
    run --scheduler tls://...` finds the credentials in the state folder, a plain TCP client
    gets nowhere, and the credentials are gone once it stops."""
    from distributed import Client

    state = tmp_path / "state"
    err = tmp_path / "stderr.txt"
    with open(err, "w") as err_file:
        proc = subprocess.Popen(
            [sys.executable, str(REPO / "cluster" / "slurm.py"), "--jobs", "1",
             "--config", str(slurm.jobqueue_config), "--state-dir", str(state)],
            stdout=subprocess.PIPE, stderr=err_file, stdin=subprocess.DEVNULL, text=True,
            cwd=tmp_path, env=slurm.env,
        )
    try:
        assert proc.stdout is not None
        shown = dict(line.split(":", 1) for line in _lines_until_stop(proc.stdout))
        address = shown["scheduler"].strip()
        assert address.startswith("tls://127.0.0.1:"), err.read_text()
        modes = {p.name: p.stat().st_mode & 0o777 for p in (state / "tls").iterdir()}
        assert modes == {"ca.pem": 0o600, "cert.pem": 0o600, "key.pem": 0o600}
        assert (state / "tls").stat().st_mode & 0o777 == 0o700
        with pytest.raises(OSError):
            Client(address.replace("tls://", "tcp://"), timeout=3)
        env = {k: v for k, v in slurm.env.items() if k != "PYTHONPATH"}
        words = shown["submit"].split()
        assert words[:3] == ["guideloom", "run", "WORKFLOW"], words
        done = subprocess.run(
            [sys.executable, "-m", "guideloom", "run", "force_signals", *words[3:],
             "--data-dir", str(demo_zip), "--output", "out"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        assert f"running scheduler: scheduler {address}" in done.stderr
        ref = subprocess.run(
            [sys.executable, "-m", "guideloom", "run", "force_signals", "--scheduler", "sync",
             "--data-dir", str(demo_zip), "--output", "ref"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        assert ref.returncode == 0, ref.stderr
        for name in sorted(p.name for p in (tmp_path / "ref").glob("*.npy")):
            assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "ref" / name).read_bytes()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == JobqueueTerminated().code, err.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
    assert not (state / "tls").exists()
    assert not (state / "scheduler.json").exists()
    assert not list(tmp_path.glob(".guideloom-tls-*"))  # the workers' copy is gone too
    assert slurm.queue() == []


def test_jobs_that_end_before_a_worker_connects_fail_fast(slurm):
    broken = {"job_script_prologue": ["echo 'module load nonsense: not found' >&2", "exit 3"]}
    start = time.monotonic()
    with pytest.raises(JobqueueError) as caught:
        with jobqueue_client("slurm", 2, job_options=broken, wait_timeout=120, quiet=True):
            pytest.fail("the block must not run without a worker")
    message = str(caught.value)
    assert "\n" not in message
    assert "all 2 SLURM jobs ended before 1 worker(s) connected" in message
    assert f"see the job logs in {slurm.log_dir}" in message
    assert time.monotonic() - start < 60  # not the 120 s timeout
    logs = " ".join(p.read_text() for p in slurm.log_dir.glob("*.err"))
    assert "module load nonsense: not found" in logs
    assert slurm.queue() == []


# --- one command: the CLI and client="slurm:N" -------------------------------------------
def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-m", "guideloom", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_shipped_workflow_runs_on_slurm_from_one_command(slurm, tmp_path):
    guideloom.make_demo_data(tmp_path / "demo-data", n=12)
    done = _cli("run", "force_signals", "--cluster", "slurm", "--jobs", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "2 SLURM worker jobs" in done.stderr
    assert "ssh -L" in done.stderr
    assert slurm.queue() == []
    reference = tmp_path / "reference"
    ref = _cli("run", "force_signals", "--scheduler", "sync", "--output", str(reference),
               cwd=tmp_path)
    assert ref.returncode == 0, ref.stderr
    for name in sorted(p.name for p in reference.glob("*.npy")):
        assert (tmp_path / "exports" / "force-signals" / name).read_bytes() == \
            (reference / name).read_bytes(), name
    manifest = (tmp_path / "exports" / "force-signals" / "export.json").read_text()
    assert '"mode": "slurm"' in manifest


@pytest.mark.slow
def test_run_cluster_table_and_api_client_string(slurm, tmp_path):
    guideloom.make_demo_data(tmp_path / "data", n=9)
    (tmp_path / "job.toml").write_text(textwrap.dedent("""
        [dataset]
        data_dir = "data"
        [view]
        name = "force-curve"
        [transforms]
        record = "guideloom.workflows.demo_transforms:total_force_stream"
        [output]
        kind = "npz"
        path = "out"
        [run.cluster]
        kind = "slurm"
        jobs = 1
        wait_timeout = 120
        """))
    done = _cli("run", "job.toml", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "1 SLURM worker jobs" in done.stderr
    assert len(list((tmp_path / "out").glob("*.npz"))) == 9
    # the same from Python, with a transform defined in this test module
    _export(tmp_path / "data", tmp_path / "api", force_summary, "slurm:2")
    _export(tmp_path / "data", tmp_path / "api-sync", force_summary, "sync")
    _assert_same_export(tmp_path / "api", tmp_path / "api-sync")
    assert slurm.queue() == []


# --- what a run listens on ------------------------------------------------------------------
def _listening_sockets(pid: int) -> set[tuple[str, int]]:
    """The ``(host, port)`` pairs process ``pid`` listens on over TCP."""
    import psutil

    return {
        (conn.laddr.ip, conn.laddr.port) for conn in psutil.net_connections(kind="tcp")
        if conn.pid == pid and conn.status == psutil.CONN_LISTEN
    }


def _listening(pid: int) -> set[str]:
    """The TCP addresses process ``pid`` listens on, as ``host`` strings."""
    return {host for host, _ in _listening_sockets(pid)}


def test_shipped_config_listens_on_loopback_only(slurm, tmp_path):
    """The shipped cluster/jobqueue.yaml names no interface: the scheduler in this process and
    the worker and its nanny in the job listen on 127.0.0.1, never on 0.0.0.0 or [::]."""
    from guideloom.cluster.jobqueue import REPO_CONFIG

    assert "interface: null" in REPO_CONFIG.read_text()
    before = _listening_sockets(os.getpid())  # e.g. an embedded cluster of an earlier test
    logs = {"log_directory": str(tmp_path), "local_directory": str(tmp_path)}
    with jobqueue_client("slurm", 1, config_file=REPO_CONFIG, job_options=logs,
                         min_workers=1, wait_timeout=120, quiet=True) as client:
        address = client.scheduler.address
        ours = {host for host, _ in _listening_sockets(os.getpid()) - before}
        worker_pids = client.run(os.getpid)
        nanny_pids = client.run(os.getppid)
        workers = {addr: (_listening(pid), _listening(nanny_pids[addr]))
                   for addr, pid in worker_pids.items()}
    assert ours == {"127.0.0.1"}, ours  # scheduler and dashboard
    assert address.split("://")[1].startswith("127.0.0.1:"), address
    loopback = ({"127.0.0.1"}, {"127.0.0.1"})  # the worker's sockets, the nanny's sockets
    assert workers, workers
    assert all(found == loopback for found in workers.values()), workers
    assert all(addr.split("://")[1].startswith("127.0.0.1:") for addr in workers)


@pytest.mark.slow
def test_another_process_cannot_run_code_through_a_slurm_run(slurm, tmp_path, monkeypatch):
    """client="slurm:N" talks TLS with throwaway credentials: a plain Client (or one with
    credentials of its own) on the scheduler's or the worker's port runs nothing."""
    from tests.attack_helpers import all_refused, attack

    monkeypatch.chdir(tmp_path)  # the private credentials folder is made here and removed
    markers = tmp_path / "markers"
    markers.mkdir()
    with jobqueue_client("slurm", 1, min_workers=1, wait_timeout=120, quiet=True) as client:
        address = client.scheduler.address
        info = client.scheduler_info(n_workers=-1)
        servers = [*info["workers"], *(w["nanny"] for w in info["workers"].values())]
        results = attack(markers, address, servers, tmp_path)
        assert client.submit(sum, [1, 2, 3]).result(timeout=60) == 6  # our own client works
        modes = [d.stat().st_mode & 0o777 for d in tmp_path.glob(".guideloom-tls-*")]
    assert sorted(markers.iterdir()) == [], results  # no attacker code ran anywhere
    assert len(servers) == 2, results
    assert all_refused(results), results
    assert address.startswith("tls://127.0.0.1:"), address
    assert modes == [0o700]  # the workers' copy of the credentials: private
    assert not list(tmp_path.glob(".guideloom-tls-*"))  # removed with the cluster
