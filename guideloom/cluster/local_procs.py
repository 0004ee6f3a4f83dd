"""Start and stop a real Dask scheduler and worker processes on this machine.

Every process binds to 127.0.0.1 only, and by default they talk TLS with throwaway credentials
made for this cluster (:mod:`guideloom.cluster.security`): the CA, certificate and key are
written to ``STATE_DIR/tls/`` (mode 0o700, files 0o600) in the state directory (created with
mode 0o700), so another local user who finds the ports can neither connect nor read the key.
``tls=False`` starts plain-TCP processes that anyone on this machine can use to run code as
you. Ports default to 0, so the operating system picks free
ones and parallel runs (tests included) never collide; the actual addresses are read back from
the scheduler file that ``dask scheduler`` writes. Each worker is its own process with one
thread (h5py holds a global lock, so threads would not run reads in parallel).

The PIDs, process creation times and addresses are written to a JSON state file, so a later
command (``python3 cluster/local.py stop``) stops exactly those processes, and a PID reused by
an unrelated process is never signalled.

Example:
    >>> with start_local_cluster(2) as procs:  # doctest: +SKIP
    ...     client = distributed.Client(procs.address, security=procs.security)
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psutil

from guideloom.cluster import security as sec
from guideloom.cluster.page import PRELOAD as PAGE_PRELOAD
from guideloom.cluster.page import page_link
from guideloom.errors import LocalClusterError
from guideloom.runtime.private_files import private_dir

STATE_FILE_NAME = "local-cluster.json"
# the default when this module was imported; functions read the variable when they run
DEFAULT_STATE_DIR = sec.default_state_dir()


# Popen objects of the processes started by this interpreter, by PID (the processes outlive
# the call that started them and are stopped by PID, possibly from another interpreter).
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def find_free_port(host: str = sec.HOST) -> int:
    """Ask the operating system for a free TCP port on ``host``.

    Prefer port 0 where the server itself can bind it (no race); this is for callers that must
    name a port in advance.

    Args:
        host: Interface to probe.

    Returns:
        A port number that was free a moment ago.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class ProcessRecord:
    """One process we started: its role, PID, creation time and log file."""

    role: str
    pid: int
    create_time: float
    log: str

    def process(self) -> psutil.Process | None:
        """Return the live process if it is still the one we started, else ``None``."""
        try:
            proc = psutil.Process(self.pid)
            if abs(proc.create_time() - self.create_time) > 1.0:
                return None  # the PID was reused by another process
            if proc.status() == psutil.STATUS_ZOMBIE:
                return None
            return proc
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            return None

    def is_running(self) -> bool:
        """Whether the recorded process is still alive."""
        return self.process() is not None


@dataclass
class StopReport:
    """What :meth:`LocalClusterProcesses.stop` did to each PID."""

    terminated: list[int] = field(default_factory=list)
    killed: list[int] = field(default_factory=list)
    already_gone: list[int] = field(default_factory=list)

    def __str__(self) -> str:
        return (
            f"terminated (SIGTERM): {self.terminated or '-'}; killed (SIGKILL): "
            f"{self.killed or '-'}; already gone: {self.already_gone or '-'}"
        )


@dataclass
class LocalClusterProcesses:
    """A scheduler and workers started by :func:`start_local_cluster`.

    Attributes:
        address: Scheduler address, e.g. ``tls://127.0.0.1:40123``.
        dashboard_url: Dashboard status page, or ``None`` when the dashboard is off.
        state_dir: Folder with the state file, scheduler file, credentials and logs.
        scheduler: The scheduler process record.
        workers: One record per worker (nanny) process.
        tls: Whether the processes talk TLS (credentials in ``state_dir/tls``).
        page: Whether the scheduler serves the ``/guideloom`` page (preloaded).
    """

    address: str
    dashboard_url: str | None
    state_dir: Path
    scheduler: ProcessRecord
    workers: list[ProcessRecord]
    tls: bool = False
    page: bool = False

    @property
    def page_url(self) -> str | None:
        """The ``/guideloom`` page's URL when the scheduler preloads it, else ``None``."""
        if self.dashboard_url is None or not self.page:
            return None
        return page_link(self.dashboard_url)

    @property
    def pids(self) -> list[int]:
        """PIDs of the scheduler and the worker processes we started."""
        return [self.scheduler.pid, *(w.pid for w in self.workers)]

    @property
    def scheduler_file(self) -> Path:
        """The scheduler file ``dask scheduler`` wrote (address; credentials beside it)."""
        return self.state_dir / sec.SCHEDULER_FILE_NAME

    @property
    def security(self) -> Any:
        """The client ``distributed.Security`` for this cluster, ``None`` without TLS."""
        return sec.load(self.state_dir) if self.tls else None

    def client(self, **kwargs: Any) -> Any:
        """A ``distributed.Client`` of this cluster (with its credentials)."""
        from distributed import Client

        return Client(self.address, security=self.security, **kwargs)

    @property
    def state_file(self) -> Path:
        """Path of the JSON state file."""
        return self.state_dir / STATE_FILE_NAME

    def to_json(self) -> dict[str, Any]:
        """Return the JSON-serialisable state."""
        return {
            "address": self.address,
            "dashboard_url": self.dashboard_url,
            "state_dir": str(self.state_dir),
            "scheduler": asdict(self.scheduler),
            "workers": [asdict(w) for w in self.workers],
            "tls": self.tls,
            "page": self.page,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LocalClusterProcesses:
        """Rebuild from :meth:`to_json` output."""
        return cls(
            address=data["address"],
            dashboard_url=data.get("dashboard_url"),
            state_dir=Path(data["state_dir"]),
            scheduler=ProcessRecord(**data["scheduler"]),
            workers=[ProcessRecord(**w) for w in data["workers"]],
            tls=bool(data.get("tls", False)),
            page=bool(data.get("page", False)),
        )

    def write_state(self) -> Path:
        """Write the state file atomically and return its path."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.state_dir, prefix=".state-", suffix=".json")
        with os.fdopen(fd, "w") as fh:
            json.dump(self.to_json(), fh, indent=2)
        os.replace(tmp, self.state_file)
        return self.state_file

    def running_pids(self) -> list[int]:
        """PIDs among :attr:`pids` that are still alive."""
        return [r.pid for r in (self.scheduler, *self.workers) if r.is_running()]

    def stop(self, timeout: float = 15.0) -> StopReport:
        """Stop the workers, then the scheduler: SIGTERM, wait, then SIGKILL.

        Each process was started in its own session, so the signal goes to its process group,
        which also reaches a nanny's worker child. The state file is removed afterwards.

        Args:
            timeout: Seconds to wait after SIGTERM for each group before SIGKILL.

        Returns:
            Which PIDs were terminated, killed or already gone.
        """
        report = StopReport()
        # workers first, so they do not log reconnect attempts to a vanished scheduler
        for group in (self.workers, [self.scheduler]):
            _stop_records(group, timeout, report)
        self.state_file.unlink(missing_ok=True)
        self.scheduler_file.unlink(missing_ok=True)
        if self.tls and self.address:
            sec.forget_address(self.address)
        sec.remove_credentials(self.state_dir)  # they open nothing any more
        return report

    def __enter__(self) -> LocalClusterProcesses:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _group_members(proc: psutil.Process) -> list[psutil.Process]:
    """The process and all its descendants that are still alive."""
    try:
        return [proc, *proc.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def _signal_group(proc: psutil.Process, members: list[psutil.Process], sig: int) -> None:
    """Send ``sig`` to the process group led by ``proc`` (or to each member as a fallback)."""
    try:
        if os.getpgid(proc.pid) == proc.pid:
            os.killpg(proc.pid, sig)
            return
    except (ProcessLookupError, PermissionError):
        pass
    for member in members:
        with contextlib.suppress(psutil.NoSuchProcess):
            member.send_signal(sig)


def _stop_records(records: Sequence[ProcessRecord], timeout: float, report: StopReport) -> None:
    """Terminate the recorded processes (and their children), killing the stragglers."""
    live: dict[int, list[psutil.Process]] = {}
    for record in records:
        proc = record.process()
        if proc is None:
            report.already_gone.append(record.pid)
            continue
        members = _group_members(proc)
        live[record.pid] = members
        _signal_group(proc, members, signal.SIGTERM)
    for pid, members in live.items():
        _gone, alive = psutil.wait_procs(members, timeout=timeout)
        if alive:
            _signal_group(members[0], alive, signal.SIGKILL)
            psutil.wait_procs(alive, timeout=5)
            report.killed.append(pid)
        else:
            report.terminated.append(pid)
    for record in records:
        popen = _CHILDREN.pop(record.pid, None)
        if popen is not None:
            popen.poll()  # reap it if it is our child


def _package_pythonpath() -> list[str]:
    """The folder holding the ``guideloom`` package, if it is a source checkout."""
    root = Path(__file__).resolve().parents[2]  # .../<root>/guideloom/cluster/local_procs.py
    if root.name in {"site-packages", "dist-packages"}:
        return []
    return [str(root)]


def _child_env(pythonpath: Sequence[str | os.PathLike[str]]) -> dict[str, str]:
    """Environment for scheduler and workers: our PYTHONPATH entries first."""
    env = dict(os.environ)
    entries = [*(_package_pythonpath()), *(os.fspath(p) for p in pythonpath)]
    if env.get("PYTHONPATH"):
        entries.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(entries)
    return env


def _spawn(role: str, argv: list[str], log: Path, env: dict[str, str], cwd: Path) -> ProcessRecord:
    """Start one process in its own session, with its output going to ``log``."""
    with open(log, "ab") as out:
        popen = subprocess.Popen(  # argv is built here; no shell
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,  # own process group: Ctrl-C in the shell does not reach it
        )
    _CHILDREN[popen.pid] = popen  # kept so that stopping it from this process reaps it
    return ProcessRecord(
        role=role, pid=popen.pid, create_time=psutil.Process(popen.pid).create_time(), log=str(log)
    )


def _tail(path: str | Path, n: int = 20) -> str:
    """Last ``n`` lines of a log file, for error messages."""
    try:
        return "\n".join(Path(path).read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "<no log>"


def load_state(state_dir: str | os.PathLike[str] | None = None) -> LocalClusterProcesses | None:
    """Read the state file in ``state_dir``, or return ``None`` if there is none.

    Args:
        state_dir: Folder holding the state file; defaults to
            :func:`~guideloom.cluster.security.default_state_dir`.
    """
    path = Path(state_dir or sec.default_state_dir()) / STATE_FILE_NAME
    if not path.exists():
        return None
    return LocalClusterProcesses.from_json(json.loads(path.read_text()))


def start_local_cluster(
    n_workers: int,
    *,
    port: int = 0,
    dashboard_port: int | None = 0,
    state_dir: str | os.PathLike[str] | None = None,
    nthreads: int = 1,
    memory_limit: str | None = None,
    pythonpath: Sequence[str | os.PathLike[str]] = (),
    timeout: float = 60.0,
    tls: bool = True,
    page: bool = False,
) -> LocalClusterProcesses:
    """Start ``dask scheduler`` and ``n_workers`` ``dask worker`` processes on 127.0.0.1.

    Returns once the scheduler reports ``n_workers`` workers. On any failure every process
    started so far is stopped before the error is raised.

    Args:
        n_workers: Number of worker processes (each ``--nworkers 1 --nthreads nthreads``).
        port: Scheduler port; 0 picks a free one.
        dashboard_port: Dashboard port; 0 picks a free one, ``None`` disables the dashboard.
        state_dir: Folder for the state file, scheduler file, credentials and logs (created
            with mode 0o700; an existing one must be ours and writable by nobody else);
            defaults to ``$GUIDELOOM_CLUSTER_STATE_DIR``, else
            ``~/.cache/guideloom/local-cluster``.
        nthreads: Threads per worker; keep 1 for HDF5 reads.
        memory_limit: Per-worker memory limit for ``dask worker`` (e.g. ``"4GiB"``); by
            default this machine's memory divided by ``n_workers``.
        pythonpath: Extra import paths for the workers (e.g. where transform modules live).
        timeout: Seconds to wait for the scheduler and for the workers to connect.
        tls: Scheduler, workers and clients talk TLS with fresh credentials written to
            ``state_dir/tls`` (the address is ``tls://...``; connect with
            :attr:`LocalClusterProcesses.security` or
            :func:`guideloom.cluster.security.load`). ``False``: plain TCP, which any local
            user can use to run code as you (less safe).
        page: The scheduler preloads ``guideloom.cluster.dashboard``: the dashboard gets the
            ``/guideloom`` page (:attr:`LocalClusterProcesses.page_url`), as
            ``cluster/local.py start`` does.

    Returns:
        The started processes; call :meth:`LocalClusterProcesses.stop` or use as a context
        manager.

    Raises:
        LocalClusterError: A live cluster is already recorded in ``state_dir`` or a process
            exited during start-up.
        UnsafeFileError: ``state_dir`` (or its ``tls`` folder) is a symlink, another user's,
            or writable by others.
        TimeoutError: The workers did not connect within ``timeout``.
    """
    if n_workers < 1:
        raise ValueError("n_workers must be at least 1")
    use_tls = tls
    sdir = Path(state_dir or sec.default_state_dir()).expanduser().resolve()
    sdir.parent.mkdir(parents=True, exist_ok=True)
    private_dir(sdir, "the local cluster's state folder")
    previous = load_state(sdir)
    if previous is not None and previous.running_pids():
        raise LocalClusterError(
            f"a local cluster is already running from {previous.state_file} "
            f"(scheduler {previous.address}, PIDs {previous.running_pids()}); stop it first"
        )
    scheduler_file = sdir / sec.SCHEDULER_FILE_NAME
    scheduler_file.unlink(missing_ok=True)
    tls_args: list[str] = []
    if use_tls:
        folder = sec.write_credentials(sdir)
        tls_args = ["--protocol", sec.PROTOCOL,
                    "--tls-ca-file", str(folder / sec.CA_FILE),
                    "--tls-cert", str(folder / sec.CERT_FILE),
                    "--tls-key", str(folder / sec.KEY_FILE)]
    else:
        sec.remove_credentials(sdir)  # a previous TLS cluster's
    if memory_limit is None:  # "auto" would give each single-worker process all the memory
        memory_limit = str(psutil.virtual_memory().total // n_workers)
    env = _child_env(pythonpath)

    sched_argv = [
        sys.executable, "-m", "distributed.cli.dask_scheduler",
        "--host", sec.HOST, "--port", str(port),
        "--scheduler-file", str(scheduler_file), *tls_args,
    ]  # fmt: skip
    # the HTTP server (health, metrics) runs even without the dashboard: keep it on loopback
    sched_argv += ["--dashboard-address", f"{sec.HOST}:{dashboard_port or 0}"]
    if dashboard_port is None:
        sched_argv.append("--no-dashboard")
    elif page:  # guideloom's /guideloom page beside the Dask dashboard (the scheduler imports it)
        sched_argv += ["--preload", PAGE_PRELOAD]
    scheduler = _spawn("scheduler", sched_argv, sdir / "scheduler.log", env, sdir)
    procs = LocalClusterProcesses(
        address="", dashboard_url=None, state_dir=sdir, scheduler=scheduler, workers=[],
        tls=use_tls, page=page and dashboard_port is not None,
    )
    try:
        info = _wait_for_scheduler_file(scheduler, scheduler_file, timeout)
        procs.address = info["address"]
        if use_tls:  # `--scheduler tls://...` finds the credentials whatever the state dir
            sec.record_address(procs.address, sdir)
        dash = info.get("services", {}).get("dashboard")
        if dash is not None and dashboard_port is not None:
            procs.dashboard_url = f"http://{sec.HOST}:{dash}/status"
        procs.write_state()  # record the scheduler before the workers, so `stop` can find it
        for i in range(n_workers):
            worker_argv = [
                sys.executable, "-m", "distributed.cli.dask_worker", procs.address,
                "--nworkers", "1", "--nthreads", str(nthreads),
                "--host", sec.HOST, "--dashboard-address", f"{sec.HOST}:0",
                "--name", f"local-{i}", "--memory-limit", memory_limit,
                "--local-directory", str(sdir / "worker-space"), *tls_args,
            ]  # fmt: skip
            log = sdir / f"worker-{i}.log"
            procs.workers.append(_spawn(f"worker-{i}", worker_argv, log, env, sdir))
            procs.write_state()
        with procs.client(timeout=timeout) as client:
            _wait_for_workers(client, procs, n_workers, timeout)
    except BaseException:
        procs.stop()
        raise
    return procs


def _wait_for_scheduler_file(
    scheduler: ProcessRecord, scheduler_file: Path, timeout: float
) -> dict[str, Any]:
    """Poll until the scheduler has written its address, failing fast if it died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if scheduler_file.exists():
            try:
                info: dict[str, Any] = json.loads(scheduler_file.read_text())
                if info.get("address"):
                    return info
            except json.JSONDecodeError:
                pass  # being written; poll again
        if not scheduler.is_running():
            raise LocalClusterError(f"scheduler exited during start-up:\n{_tail(scheduler.log)}")
        time.sleep(0.05)  # polling interval, not synchronisation: the loop checks a condition
    raise TimeoutError(f"scheduler did not write {scheduler_file} within {timeout} s")


def _wait_for_workers(
    client: Any, procs: LocalClusterProcesses, n_workers: int, timeout: float
) -> None:
    """Wait until the scheduler sees ``n_workers``; report a dead worker's log on failure."""
    try:
        client.wait_for_workers(n_workers, timeout=timeout)
    except TimeoutError as exc:
        dead = [w for w in procs.workers if not w.is_running()]
        detail = "".join(f"\n--- {w.role} log ---\n{_tail(w.log)}" for w in dead)
        raise TimeoutError(
            f"only {len(client.scheduler_info(n_workers=-1)['workers'])} of {n_workers} "
            f"workers connected within {timeout} s{detail}"
        ) from exc


def stop_local_cluster(
    state_dir: str | os.PathLike[str] | None = None, timeout: float = 15.0
) -> StopReport | None:
    """Stop the cluster recorded in ``state_dir``; ``None`` if nothing is recorded.

    Args:
        state_dir: Folder holding the state file; defaults to
            :func:`~guideloom.cluster.security.default_state_dir`.
        timeout: Seconds to wait after SIGTERM before SIGKILL.
    """
    procs = load_state(state_dir)
    if procs is None:
        return None
    return procs.stop(timeout=timeout)


def cluster_status(
    state_dir: str | os.PathLike[str] | None = None, timeout: float = 5.0
) -> dict[str, Any]:
    """Describe the recorded cluster: live PIDs and the workers the scheduler sees.

    Args:
        state_dir: Folder holding the state file; defaults to
            :func:`~guideloom.cluster.security.default_state_dir`.
        timeout: Seconds to wait when connecting to the scheduler.

    Returns:
        A dict with ``running`` (bool) and, when a state file exists, ``address``,
        ``dashboard_url``, ``pids``, ``running_pids`` and ``n_workers`` (``None`` when the
        scheduler cannot be reached).
    """
    procs = load_state(state_dir)
    if procs is None:
        return {"running": False, "state_file": None}
    status: dict[str, Any] = {
        "state_file": str(procs.state_file),
        "address": procs.address,
        "dashboard_url": procs.dashboard_url,
        "pids": procs.pids,
        "running_pids": procs.running_pids(),
        "n_workers": None,
        "tls": procs.tls,
        "page_url": procs.page_url,
    }
    status["running"] = procs.scheduler.is_running()
    if status["running"]:
        try:
            with procs.client(timeout=timeout) as client:
                status["n_workers"] = len(client.scheduler_info(n_workers=-1)["workers"])
        except OSError:
            pass
    return status
