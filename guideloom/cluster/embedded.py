"""The embedded local cluster: a Dask scheduler in this process, workers as separate interpreters.

Distributed's ``LocalCluster`` starts workers with :mod:`multiprocessing`, whose spawned children
re-import the user's main module: a plain script without an ``if __name__ == "__main__":`` guard
then runs its top-level code once per worker and fails. Here every worker is a ``dask spec``
process (a fresh interpreter, like ``dask worker``) started through Dask's own
:class:`~distributed.deploy.spec.SpecCluster` machinery, so the user's script is never imported
by a worker; functions defined in ``__main__`` or in local modules travel by value (see
:mod:`guideloom.cluster.shipping`).

Each worker:

* runs in its own session, so Ctrl-C in the terminal reaches only the driver, which then stops the
  workers itself;
* watches the driver (:mod:`guideloom.cluster.watchdog`) and exits within a second of its death,
  even after SIGKILL;
* writes its log and Dask's spill and scratch files to a private directory of this cluster
  (removed when it closes), never to a shared ``/tmp/dask-scratch-space``;
* starts in the driver's working directory with the driver's script directory on ``PYTHONPATH``;
* talks to the scheduler, the client and the other workers over TLS with this cluster's
  throwaway credentials (:mod:`guideloom.cluster.security`): another local user who finds the
  ports on 127.0.0.1 cannot connect, so cannot run code in any of these processes. The
  dashboard stays plain HTTP on 127.0.0.1.

Dask's own log lines (a worker's "Compute Failed", connection errors while the cluster closes) go
to the workers' log files; in the driver, Dask's loggers are raised to CRITICAL from the cluster's
start until it has closed, unless ``verbose`` is asked for, and then get their earlier levels back
(:mod:`guideloom.cluster.dask_logs`). Errors reach the user as exceptions.

One cluster is kept per Python process and reused by later exports (a notebook's second export
pays no start-up); it is closed at interpreter exit, or earlier by :func:`close_cluster`.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from guideloom.cluster import dask_logs
from guideloom.cluster.security import DEFAULT_DASHBOARD, HOST, PROTOCOL, cluster_credentials
from guideloom.cluster.watchdog import DRIVER_ENV, driver_token
from guideloom.errors import ClusterStartError, UnsafeFileError, warn
from guideloom.fastread import pool as decode_pool
from guideloom.runtime.private_files import private_dir

logger = logging.getLogger(__name__)

WORKER_START_TIMEOUT_S = 60.0
CLOSE_TIMEOUT_S = 5.0
WATCHDOG_MODULE = "guideloom.cluster.watchdog"
LOG_TAIL_LINES = 8

_lock = threading.RLock()
_current: EmbeddedCluster | None = None
_atexit_registered = False


def _worker_process_class() -> type:
    from distributed.deploy.subprocess import SubprocessWorker

    class WorkerProcess(SubprocessWorker):
        """One ``dask spec`` worker process in its own session, logging to a file."""

        def __init__(self, scheduler: str, *, name: str | None = None,
                     worker_kwargs: dict[str, Any] | None = None, log_path: str = os.devnull,
                     env: dict[str, str] | None = None, cwd: str | None = None) -> None:
            super().__init__(scheduler, worker_class="distributed.Nanny", name=name,
                             worker_kwargs=worker_kwargs)
            self.log_path, self.env, self.cwd = log_path, env, cwd

        async def _start(self) -> None:
            spec = json.dumps({"cls": self.worker_class, "opts": self.worker_kwargs})
            cmd = [sys.executable, "-m", "dask", "spec", self.scheduler, "--spec", spec]
            with open(self.log_path, "ab") as log:
                self.process = await asyncio.create_subprocess_exec(
                    *cmd, stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log,
                    start_new_session=True, env=self.env, cwd=self.cwd,
                )

    return WorkerProcess


def free_dashboard_address(wanted: str | None) -> str | None:
    """``wanted`` if its port is free, else the same host with port 0 (the OS picks one)."""
    if wanted is None:
        return None
    host, _, port = wanted.rpartition(":")
    host = host or HOST
    if int(port) == 0:
        return f"{host}:0"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, int(port)))
        except OSError:
            return f"{host}:0"
    return f"{host}:{port}"


def scratch_root() -> Path:
    """The per-user folder holding each embedded cluster's private scratch directory.

    ``$TMPDIR/guideloom-<uid>``, created with mode 0o700. If something else is there (another
    user's folder, a symlink, a folder others can write to), a fresh private folder is made
    instead (``mkdtemp``) and a warning says so: nobody else's folder is ever used.
    """
    user = str(os.getuid()) if hasattr(os, "getuid") else os.environ.get("USERNAME", "user")
    root = Path(tempfile.gettempdir()) / f"guideloom-{user}"
    try:
        return private_dir(root, "the cluster scratch folder")
    except UnsafeFileError as exc:
        fresh = Path(tempfile.mkdtemp(prefix=f"guideloom-{user}-"))
        warn(f"guideloom: not using {root}: {exc}. This run uses the new private folder "
             f"{fresh} instead.")  # a warning: another user's folder, whatever logging says
        atexit.register(_remove_if_empty, fresh)
        return fresh


def _remove_if_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):
        folder.rmdir()


def quiet_dask_logs() -> None:
    """Raise Dask's loggers (:data:`~guideloom.cluster.dask_logs.QUIET_LOGGERS`) to CRITICAL
    until a matching :func:`guideloom.cluster.dask_logs.release` (the embedded cluster
    releases its own hold when it closes)."""
    dask_logs.hold()


def _worker_env() -> dict[str, str]:
    from guideloom import config

    env = {**os.environ, **config.environ()}  # values set with guideloom.config.set too
    env[DRIVER_ENV] = driver_token()
    script_dir = sys.path[0] if sys.path and sys.path[0] else os.getcwd()
    paths = [os.path.abspath(script_dir)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


@dataclass
class EmbeddedCluster:
    """A running embedded cluster: its Dask cluster object, client and scratch directory."""

    cluster: Any
    client: Any
    n_workers: int
    scratch: Path
    dashboard_link: str | None
    pids: list[int] = field(default_factory=list)
    quiet_logs: bool = False  # holds dask_logs until it closes

    def alive(self) -> bool:
        """Whether the scheduler still answers (the client is connected)."""
        return getattr(self.client, "status", None) == "running"

    def kill_workers(self) -> None:
        """SIGKILL every worker process group at once (interrupts: no graceful retire)."""
        for pid in self.pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)

    def close(self, *, fast: bool = False) -> None:
        """Stop the workers, the scheduler and the client; remove the scratch directory."""
        if fast:
            self.kill_workers()
        with contextlib.suppress(Exception):
            self.client.close(timeout=CLOSE_TIMEOUT_S)
        with contextlib.suppress(Exception):
            self.cluster.close(timeout=CLOSE_TIMEOUT_S)
        self.kill_workers()
        shutil.rmtree(self.scratch, ignore_errors=True)
        if self.quiet_logs:  # after the close: its connection errors stay quiet too
            self.quiet_logs = False
            dask_logs.release()

    def log_tail(self) -> str:
        """The last lines of every worker's log, for error messages."""
        lines: list[str] = []
        for log in sorted(self.scratch.glob("worker-*.log")):
            text = log.read_text(errors="replace").splitlines()
            lines += [f"{log.name}: {line}" for line in text[-LOG_TAIL_LINES:]]
        return "\n".join(lines)


def default_worker_count() -> int:
    """One single-threaded worker per core (h5py serialises reads inside one process)."""
    return max(1, os.cpu_count() or 1)


def start_cluster(
    n_workers: int | None = None,
    *,
    dashboard_address: str | None = DEFAULT_DASHBOARD,
    verbose: bool = False,
) -> EmbeddedCluster:
    """Start a new embedded cluster (not cached; see :func:`embedded_cluster`)."""
    from distributed import Client, Scheduler
    from distributed.deploy.spec import SpecCluster

    workers = n_workers or default_worker_count()
    scratch = Path(tempfile.mkdtemp(prefix=f"cluster-{os.getpid()}-", dir=scratch_root()))
    security, credentials = cluster_credentials()
    env = {**_worker_env(), **credentials}
    # each single-threaded worker decodes with its share of the CPUs (known before any worker
    # connects, unlike the share run_partitions computes from the connected workers)
    env.setdefault(decode_pool.ENV_THREADS, str(max(1, decode_pool.usable_cpus() // workers)))
    memory_limit = int(psutil.virtual_memory().total / workers)
    worker_kwargs = {
        "host": HOST, "protocol": PROTOCOL, "nthreads": 1, "memory_limit": memory_limit,
        "local_directory": str(scratch), "dashboard": False,
        "preload": [WATCHDOG_MODULE], "preload_nanny": [WATCHDOG_MODULE],
    }
    worker_class = _worker_process_class()
    specs = {
        i: {"cls": worker_class, "options": {
            "name": str(i), "worker_kwargs": {**worker_kwargs, "name": str(i)},
            "log_path": str(scratch / f"worker-{i}.log"), "env": env, "cwd": os.getcwd()}}
        for i in range(workers)
    }
    dashboard = free_dashboard_address(dashboard_address)
    from guideloom.cluster.dashboard import install as install_dashboard

    scheduler = {"cls": Scheduler, "options": {
        "plugins": install_dashboard(),  # the /guideloom page and the state it shows
        "host": HOST, "port": 0, "protocol": PROTOCOL, "security": security,
        "dashboard": dashboard is not None,
        "dashboard_address": dashboard or ":0", "local_directory": str(scratch)}}
    if not verbose:  # until this cluster closes; the host's levels come back then
        dask_logs.hold()
    try:
        cluster = SpecCluster(workers=specs, scheduler=scheduler, name="guideloom-embedded",
                              silence_logs=False, security=security)
        client = Client(cluster, set_as_default=False)
    except BaseException:
        if not verbose:
            dask_logs.release()
        raise
    pids = [w.process.pid for w in cluster.workers.values() if getattr(w, "process", None)]
    link = client.dashboard_link if dashboard is not None else None
    running = EmbeddedCluster(cluster, client, workers, scratch, link, pids,
                              quiet_logs=not verbose)
    try:
        client.wait_for_workers(1, timeout=WORKER_START_TIMEOUT_S)
    except Exception as exc:
        tail = running.log_tail()
        running.close(fast=True)
        raise ClusterStartError(
            f"no Dask worker of the embedded cluster started within {WORKER_START_TIMEOUT_S:.0f} s"
            f" ({type(exc).__name__}); worker log:\n{tail}"
        ) from exc
    return running


def embedded_cluster(
    n_workers: int | None = None,
    *,
    dashboard_address: str | None = DEFAULT_DASHBOARD,
    verbose: bool = False,
) -> tuple[EmbeddedCluster, bool]:
    """The process's embedded cluster, started if needed; returns ``(cluster, started_now)``.

    A running cluster with another worker count is replaced.
    """
    global _current, _atexit_registered
    wanted = n_workers or default_worker_count()
    with _lock:
        if _current is not None and _current.alive() and _current.n_workers == wanted:
            return _current, False
        if _current is not None:
            _current.close()
            _current = None
        _current = start_cluster(wanted, dashboard_address=dashboard_address, verbose=verbose)
        if not _atexit_registered:
            atexit.register(close_cluster)
            _atexit_registered = True
        return _current, True


def running_cluster() -> EmbeddedCluster | None:
    """The process's embedded cluster if one is running (never starts one)."""
    with _lock:
        return _current if _current is not None and _current.alive() else None


def abandon_cluster() -> None:
    """Kill the embedded cluster's workers and remove its scratch directory, closing nothing
    gracefully: for a process that is about to exit at once (Ctrl-C in the command line)."""
    with _lock:
        current = _current
    if current is not None:
        current.kill_workers()
        shutil.rmtree(current.scratch, ignore_errors=True)


def close_cluster(*, fast: bool = False) -> bool:
    """Close the embedded cluster of this process, if any; return whether one was running.

    ``fast`` kills the worker processes first (used on Ctrl-C); a later export starts a new
    cluster when it needs one.
    """
    global _current
    with _lock:
        if _current is None:
            return False
        current, _current = _current, None
    current.close(fast=fast)
    return True
