"""Start and stop a dask-jobqueue cluster (SLURM or PBS) for the length of one run.

:func:`jobqueue_client` starts the Dask scheduler in this process, submits worker jobs with
``sbatch``/``qsub`` through dask-jobqueue, waits for the first worker (one line naming the
pending reason when none comes), and cancels every job it submitted when the block ends:
normally, on an exception, on Ctrl-C, or on SIGTERM.

Site settings (partition, account, memory, walltime, network interface, environment
activation) come from a jobqueue YAML file (``cluster/jobqueue.yaml`` in a source checkout,
``$GUIDELOOM_JOBQUEUE_CONFIG``, or ``config_file=``) or from the user's Dask configuration
(``~/.config/dask/jobqueue.yaml``).
"""

from __future__ import annotations

import contextlib
import getpass
import logging
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from guideloom import config
from guideloom.errors import (
    JobqueueConfigError,
    JobqueueError,
    JobqueueTerminated,
    JobqueueUnavailableError,
    WorkerTimeoutError,
)

Kind = Literal["slurm", "pbs"]
KINDS: tuple[str, ...] = ("slurm", "pbs")
CONFIG_ENV = "GUIDELOOM_JOBQUEUE_CONFIG"
logger = logging.getLogger(__name__)
REPO_CONFIG = Path(__file__).resolve().parents[2] / "cluster" / "jobqueue.yaml"
SIGTERM_EXIT_CODE = 128 + signal.SIGTERM
LOOPBACK = "127.0.0.1"
LOOPBACK_HINT = (
    "; the scheduler listens on 127.0.0.1 only because the jobqueue config names no "
    "'interface': set interface (e.g. ib0) for workers on other nodes"
)
# What sbatch prints when this machine has no SLURM configuration or cannot reach the
# controller (a wrong partition or account reads otherwise).
SLURM_NOT_REACHABLE = (
    "Could not establish a configuration source",  # no slurm.conf and no configless DNS record
    "Unable to process configuration file",  # SLURM_CONF or slurm.conf missing or unusable
    "Unable to contact slurm controller",  # slurm.conf names a controller that does not answer
)


@dataclass(frozen=True)
class BatchCommands:
    """The command line tools of one batch system."""

    submit: str
    cancel: str
    status: str


COMMANDS: dict[str, BatchCommands] = {
    "slurm": BatchCommands(submit="sbatch", cancel="scancel", status="squeue"),
    "pbs": BatchCommands(submit="qsub", cancel="qdel", status="qstat"),
}


def check_commands(kind: str) -> BatchCommands:
    """Return the batch system's commands, or raise one line when ``sbatch``/``qsub`` is absent.

    Args:
        kind: ``"slurm"`` or ``"pbs"``.
    """
    if kind not in KINDS:
        raise ValueError(f"cluster kind must be one of {KINDS}, not {kind!r}")
    commands = COMMANDS[kind]
    tools = (commands.submit, commands.cancel, commands.status)
    missing = [tool for tool in tools if not shutil.which(tool)]
    if missing:
        raise JobqueueUnavailableError(
            f"{', '.join(missing)} not found on PATH: run on a {kind.upper()} login node "
            f"(or use a local cluster, client='local:N')"
        )
    return commands


def _import_jobqueue() -> Any:
    """Import dask_jobqueue, keeping this process's SIGINT handler.

    dask-jobqueue 0.9.0 replaces the SIGINT handler with ``sys.exit()`` when imported
    (dask/dask-jobqueue#696), which turns Ctrl-C into a silent exit with status 0, and fails
    to import outside the main thread (#667); the handler is put back here.
    """
    if "dask_jobqueue" in sys.modules:
        return sys.modules["dask_jobqueue"]
    in_main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGINT) if in_main else None
    try:
        import dask_jobqueue
    except ImportError as exc:
        raise JobqueueUnavailableError(
            "dask-jobqueue is not installed: pip install 'guideloom[cluster]'"
        ) from exc
    except ValueError as exc:  # signal.signal() outside the main thread
        raise JobqueueUnavailableError(
            f"dask-jobqueue cannot be imported outside the main thread ({exc}): "
            "import dask_jobqueue in the main thread first"
        ) from exc
    finally:
        if in_main and previous is not None:
            signal.signal(signal.SIGINT, previous)
    return dask_jobqueue


def load_jobqueue_config(kind: str, path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read one batch system's section of a jobqueue YAML file as cluster keyword arguments.

    Args:
        kind: ``"slurm"`` or ``"pbs"``.
        path: YAML file with a top-level ``jobqueue`` mapping (dask-jobqueue's format).

    Returns:
        Keyword arguments for ``SLURMCluster``/``PBSCluster`` (``cores``, ``memory``, ...).
    """
    import yaml

    if kind not in KINDS:
        raise ValueError(f"cluster kind must be one of {KINDS}, not {kind!r}")
    try:
        with open(path) as fh:
            data = yaml.safe_load(fh) or {}
    except OSError as exc:
        raise JobqueueConfigError(f"cannot read jobqueue config {path}: {exc.strerror}") from exc
    section = (data.get("jobqueue") or {}).get(kind) if isinstance(data, dict) else None
    if not section:
        raise JobqueueConfigError(f"{path}: no 'jobqueue.{kind}' section")
    return _as_kwargs(section)


def _as_kwargs(section: Mapping[str, Any]) -> dict[str, Any]:
    # the config key "name" is the job name; as a keyword it is called job_name
    renamed = {"name": "job_name"}
    return {renamed.get(key, key.replace("-", "_")): value for key, value in section.items()}


def find_jobqueue_config(
    kind: str, config_file: str | os.PathLike[str] | None = None
) -> tuple[dict[str, Any], str]:
    """Pick the site settings for ``kind`` and say where they came from.

    Order: ``config_file``; ``$GUIDELOOM_JOBQUEUE_CONFIG``; the user's Dask config when it
    sets ``jobqueue.<kind>.cores`` and ``memory``; ``cluster/jobqueue.yaml`` of a source
    checkout.

    Args:
        kind: ``"slurm"`` or ``"pbs"``.
        config_file: An explicit jobqueue YAML file.

    Returns:
        ``(cluster keyword arguments, description of the source)``.
    """
    explicit = config_file or config.get("jobqueue_config")  # CONFIG_ENV, read now
    if explicit:
        return load_jobqueue_config(kind, explicit), str(explicit)
    import dask.config

    _import_jobqueue()  # loads dask-jobqueue's defaults into dask.config

    user = dask.config.get(f"jobqueue.{kind}", default=None) or {}
    if user.get("cores") and user.get("memory"):
        return {}, "Dask config (jobqueue." + kind + ")"
    if REPO_CONFIG.is_file():
        return load_jobqueue_config(kind, REPO_CONFIG), str(REPO_CONFIG)
    raise JobqueueConfigError(
        f"no jobqueue settings for {kind}: pass config_file=, set ${CONFIG_ENV}, or set "
        f"jobqueue.{kind}.cores and memory in ~/.config/dask/jobqueue.yaml"
    )


def cluster_class(kind: str) -> Any:
    """dask-jobqueue's ``SLURMCluster`` or ``PBSCluster``."""
    if kind not in KINDS:
        raise ValueError(f"cluster kind must be one of {KINDS}, not {kind!r}")
    jobqueue = _import_jobqueue()
    return jobqueue.SLURMCluster if kind == "slurm" else jobqueue.PBSCluster


def _dask_config(kind: str, key: str) -> Any:
    import dask.config

    _import_jobqueue()
    return dask.config.get(f"jobqueue.{kind}.{key}", None)


def cluster_kwargs(
    kind: str,
    *,
    config_file: str | os.PathLike[str] | None = None,
    job_options: Mapping[str, Any] | None = None,
    dashboard_address: str | None = None,
    scheduler_host: str | None = None,
    pythonpath: Sequence[str | os.PathLike[str]] = (),
) -> tuple[dict[str, Any], str]:
    """Keyword arguments for :func:`cluster_class` as :func:`jobqueue_client` builds them.

    The site settings (:func:`find_jobqueue_config`), then ``job_options``; the worker runs
    ``sys.executable`` unless the settings name a ``python``, and the job script ends with
    :func:`worker_environment_lines`. When neither the settings nor ``scheduler_host`` name
    an interface or host, the scheduler binds to 127.0.0.1 and the workers get ``--host
    127.0.0.1 --dashboard-address 127.0.0.1:0``: nothing listens on 0.0.0.0 or ``[::]``.
    Building a cluster from these submits nothing until it
    is scaled, so ``cluster_class(kind)(**kwargs).job_script()`` shows the job script.

    Returns:
        ``(keyword arguments, where the settings came from)``.
    """
    kwargs, source = find_jobqueue_config(kind, config_file)
    kwargs.update(job_options or {})
    if kwargs.get("python") is None:
        kwargs["python"] = _dask_config(kind, "python") or sys.executable
    prologue = kwargs.get("job_script_prologue")
    if prologue is None:
        prologue = _dask_config(kind, "job-script-prologue") or []
    kwargs["job_script_prologue"] = [*prologue, *worker_environment_lines(pythonpath)]
    options = dict(
        kwargs.get("scheduler_options") or _dask_config(kind, "scheduler-options") or {}
    )
    options["dashboard_address"] = (
        dashboard_address or options.get("dashboard_address") or "127.0.0.1:0"
    )
    if scheduler_host:
        options["host"] = scheduler_host
    interface = kwargs.get("interface") or _dask_config(kind, "interface")
    if not interface and not options.get("host") and not options.get("interface"):
        # nothing names a network: listen on this machine's loopback only, never 0.0.0.0/[::]
        options["host"] = LOOPBACK
        extra = list(kwargs.get("worker_extra_args") or _dask_config(kind, "worker-extra-args")
                     or [])
        if "--host" not in extra and "--interface" not in extra:
            extra += ["--host", LOOPBACK]
        if not any(arg.startswith("--dashboard-address") for arg in extra):
            extra += ["--dashboard-address", f"{LOOPBACK}:0"]  # a worker's own dashboard
        kwargs["worker_extra_args"] = extra
    kwargs["scheduler_options"] = options
    return kwargs, source


def loopback_only(kwargs: Mapping[str, Any]) -> bool:
    """Whether :func:`cluster_kwargs` bound the scheduler to loopback for want of an interface."""
    options = kwargs.get("scheduler_options") or {}
    return options.get("host") == LOOPBACK and not kwargs.get("interface")


def worker_environment_lines(pythonpath: Sequence[str | os.PathLike[str]] = ()) -> list[str]:
    """Job-script lines that give the worker this process's working directory and imports.

    The worker runs ``sys.executable`` (the same interpreter as this process); these lines
    change to the current directory (where relative data paths and workflow modules are) and
    put it, guideloom's source root and ``pythonpath`` in front of ``PYTHONPATH``.
    """
    cwd = os.getcwd()
    entries: list[str] = []
    for entry in (cwd, str(Path(__file__).resolve().parents[2]), *map(str, pythonpath)):
        absolute = os.path.abspath(entry)
        if absolute not in entries:
            entries.append(absolute)
    joined = shlex.quote(os.pathsep.join(entries))
    return [
        f"cd {shlex.quote(cwd)} || exit 1",
        f'export PYTHONPATH={joined}"${{PYTHONPATH:+:$PYTHONPATH}}"',
    ]


def _job_class(base: type, submitted: list[str], failures: list[str]) -> type:
    """A subclass of dask-jobqueue's job class that records every job id it submits."""

    from distributed.deploy.spec import ProcessInterface

    class TrackedJob(base):  # type: ignore[misc,unused-ignore]  # a class known as Any (strict)
        async def start(self) -> None:
            try:
                await super().start()
            except Exception as exc:  # reported by jobqueue_client as one line, not a traceback
                failures.append(_last_line(str(exc)))
                self.job_id = None  # nothing to cancel; the cluster sees a worker that never came
                await ProcessInterface.start(self)
            finally:
                if getattr(self, "job_id", None):
                    submitted.append(str(self.job_id))

    TrackedJob.__name__ = TrackedJob.__qualname__ = f"Tracked{base.__name__}"
    return TrackedJob


def _job_order(job_id: str) -> tuple[int, str]:
    """Job ids in submission-number order (``"9"`` before ``"10"``), whatever order the
    concurrent submissions finished in."""
    return (len(job_id), job_id)


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else text.strip()


def _run(cmd: list[str], timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)


def job_states(kind: str, job_ids: Sequence[str]) -> dict[str, str]:
    """Ask the batch system about ``job_ids``: id -> ``"PENDING (Resources)"`` and the like.

    Jobs the batch system no longer lists (finished, cancelled and purged) are left out.

    Args:
        kind: ``"slurm"`` or ``"pbs"``.
        job_ids: Job ids as the submit command printed them.
    """
    if not job_ids:
        return {}
    wanted = set(job_ids)
    if kind == "slurm":
        proc = _run(["squeue", "-h", "-u", getpass.getuser(), "-o", "%i|%T|%r"])
        if proc.returncode != 0:
            raise JobqueueError(f"squeue failed: {_last_line(proc.stderr or proc.stdout)}")
        states: dict[str, str] = {}
        for line in proc.stdout.splitlines():
            job_id, _, rest = line.strip().partition("|")
            if job_id in wanted:
                state, _, reason = rest.partition("|")
                states[job_id] = f"{state} ({reason})" if reason and reason != "None" else state
        return states
    proc = _run(["qstat", "-f", *job_ids])  # unknown (finished) ids only add lines to stderr
    return {k: v for k, v in parse_qstat_full(proc.stdout).items() if k in wanted}


_PBS_STATES = {"Q": "QUEUED", "R": "RUNNING", "H": "HELD", "W": "WAITING", "E": "EXITING",
               "B": "BEGUN", "S": "SUSPENDED", "T": "TRANSITING"}


def parse_qstat_full(text: str) -> dict[str, str]:
    """Parse ``qstat -f`` output into id -> ``"QUEUED (comment)"``; finished jobs are left out.

    Args:
        text: The standard output of ``qstat -f ID ...`` (PBS Pro or Torque).
    """
    states: dict[str, str] = {}
    job_id = state = comment = None

    def flush() -> None:
        if job_id and state and state not in ("C", "F", "X"):
            name = _PBS_STATES.get(state, state)
            states[job_id] = f"{name} ({comment})" if comment else name

    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("Job Id:"):
            flush()
            job_id, state, comment = line.split(":", 1)[1].strip(), None, None
        elif line.startswith("job_state ="):
            state = line.split("=", 1)[1].strip()
        elif line.startswith("comment ="):
            comment = line.split("=", 1)[1].strip()
    flush()
    return states


def cancel_jobs(kind: str, job_ids: Sequence[str], timeout: float = 60.0) -> list[str]:
    """Cancel ``job_ids`` and wait until the batch system no longer lists them.

    Args:
        kind: ``"slurm"`` or ``"pbs"``.
        job_ids: Jobs to cancel (ones already gone are fine).
        timeout: Seconds to wait for the jobs to leave the queue.

    Returns:
        The ids still listed when ``timeout`` ran out (empty when all are gone).
    """
    commands = COMMANDS[kind]
    left = job_states(kind, job_ids)
    if left:
        _run([commands.cancel, *left])
    deadline = time.monotonic() + timeout
    while left and time.monotonic() < deadline:
        time.sleep(0.25)  # polling interval while cancelled jobs finish their epilogue
        left = job_states(kind, list(left))
    return sorted(left)


def _describe(kind: str, job_ids: Sequence[str], states: Mapping[str, str]) -> str:
    if not job_ids:
        return f"no {kind.upper()} job was submitted yet"
    parts = [f"job {j} {states.get(j, 'no longer queued')}" for j in job_ids]
    return ", ".join(parts)


def _ssh_hint(dashboard_link: str, dashboard_address: str = "") -> str:
    """The dashboard line with the SSH tunnel that reaches it from the user's machine."""
    match = re.match(r"https?://([^/:]+|\[[^\]]+\]):(\d+)", dashboard_link)
    if not match:
        return f"Dask dashboard: {dashboard_link}"
    host, port = match.groups()
    bound = dashboard_address.rpartition(":")[0].strip("[]")
    if bound and bound not in ("0.0.0.0", "::"):
        host = bound  # the dashboard listens there, whatever the scheduler's address is
    path = dashboard_link[match.end():] or "/status"
    login = f"{getpass.getuser()}@{socket.gethostname()}"
    return (
        f"Dask dashboard: {dashboard_link} -- from your machine: "
        f"ssh -L 8787:{host}:{port} {login}, then open http://127.0.0.1:8787{path}"
    )


@contextlib.contextmanager
def _signals_as_exit(active: bool) -> Iterator[list[int]]:
    """While active (main thread only): SIGTERM raises :class:`JobqueueTerminated`."""
    received: list[int] = []
    if not active:
        yield received
        return

    def on_term(signum: int, frame: Any) -> None:
        received.append(signum)
        raise JobqueueTerminated()

    previous = signal.signal(signal.SIGTERM, on_term)
    try:
        yield received
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def _deferred_signals(active: bool) -> Iterator[list[int]]:
    """Hold SIGINT and SIGTERM while jobs are cancelled; yield the signals that came."""
    came: list[int] = []
    if not active:
        yield came
        return

    def hold(signum: int, frame: Any) -> None:
        came.append(signum)

    previous = {s: signal.signal(s, hold) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield came
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _slurm_conf() -> str:
    conf = os.environ.get("SLURM_CONF")
    return f"SLURM_CONF={conf}" if conf else "SLURM_CONF unset: the default slurm.conf"


def check_slurm_conf() -> None:
    """Raise one line when ``SLURM_CONF`` names no file (``sbatch`` would retry for 60 s)."""
    conf = os.environ.get("SLURM_CONF")
    if conf and not os.path.isfile(conf):
        raise JobqueueConfigError(
            f"SLURM is not configured here: SLURM_CONF={conf} names no file; point SLURM_CONF "
            "at the cluster's slurm.conf (or unset it), or run on a SLURM login node")


def _submit_hint(kind: str, failure: str) -> str:
    """What to check after the first submission failed with ``failure`` (appended to it)."""
    if kind == "slurm" and any(text in failure for text in SLURM_NOT_REACHABLE):
        return (f"; SLURM is not configured or its controller is not reachable from here "
                f"({_slurm_conf()}): run on a SLURM login node, or point SLURM_CONF at the "
                "cluster's slurm.conf")
    return " (check the partition/queue and account in the jobqueue config)"


def _wait_for_workers(
    client: Any,
    kind: str,
    n: int,
    timeout: float,
    submitted: list[str],
    failures: list[str],
    log_hint: str,
    poll: float = 1.0,
    network_hint: str = "",
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.wait_for_workers(n, timeout=max(0.1, min(poll, deadline - time.monotonic())))
            return
        except TimeoutError:
            pass
        if failures and not submitted:
            raise JobqueueError(f"{COMMANDS[kind].submit} failed: {failures[0]}"
                                f"{_submit_hint(kind, failures[0])}")
        states = job_states(kind, submitted)
        if submitted and not states and len(submitted) >= n:
            raise JobqueueError(
                f"all {len(submitted)} {kind.upper()} jobs ended before {n} worker(s) connected"
                f" ({', '.join(submitted)}): see the job logs{log_hint}{network_hint}"
            )
        if time.monotonic() >= deadline:
            raise WorkerTimeoutError(
                f"no {kind.upper()} worker connected within {timeout:g} s: "
                f"{_describe(kind, submitted, states)}{network_hint}"
            )


@contextlib.contextmanager
def jobqueue_client(
    kind: Kind,
    jobs: int,
    *,
    config_file: str | os.PathLike[str] | None = None,
    job_options: Mapping[str, Any] | None = None,
    wait_timeout: float = 300.0,
    min_workers: int = 1,
    dashboard_address: str | None = None,
    scheduler_host: str | None = None,
    pythonpath: Sequence[str | os.PathLike[str]] = (),
    cancel_timeout: float = 60.0,
    quiet: bool = False,
    log: Callable[[str], None] | None = None,
    tls: bool = True,
) -> Iterator[Any]:
    """Run a Dask cluster of ``jobs`` SLURM or PBS worker jobs for the length of the block.

    The scheduler runs in this process; each job runs one ``dask worker`` (the site settings
    decide its cores, memory and threads) with this process's Python (``sys.executable``), its
    working directory and ``PYTHONPATH`` extended by :func:`worker_environment_lines`. Every
    job submitted is cancelled when the block ends: normally, on an exception, on Ctrl-C, or on
    SIGTERM, which (in the main thread) becomes :class:`JobqueueTerminated` (``SystemExit``
    with code 143) while the block runs; the previous handler is restored afterwards.

    Args:
        kind: ``"slurm"`` or ``"pbs"``.
        jobs: Number of worker jobs to submit (>= 1).
        config_file: jobqueue YAML file; default: see :func:`find_jobqueue_config`.
        job_options: Cluster keyword arguments taking precedence over the file (``queue``,
            ``account``, ``memory``, ``walltime``, ``log_directory``, ...).
        wait_timeout: Seconds to wait for ``min_workers`` workers before raising
            :class:`WorkerTimeoutError` with each job's state and pending reason.
        min_workers: Workers to wait for before the block starts (0: do not wait).
        dashboard_address: Where the dashboard listens; default: the config's
            ``scheduler-options.dashboard_address``, else ``127.0.0.1:0`` (any free port).
        scheduler_host: Address the scheduler binds to (e.g. ``127.0.0.1`` when the jobs run
            on this machine); default: the config's ``interface`` / scheduler options, and
            127.0.0.1 (workers too) when neither names a network.
        pythonpath: Extra directories for the workers' ``PYTHONPATH``.
        cancel_timeout: Seconds to wait, on exit, for cancelled jobs to leave the queue.
        quiet: Print nothing (the dashboard line and job ids go to stderr otherwise).
        log: Where status lines go (default: stderr).
        tls: Scheduler, workers and the client talk TLS with throwaway credentials made for
            this run (:func:`tls_settings`), so nobody else who reaches the scheduler's port
            can connect (``cluster/slurm.py`` writes the client's copy to its state folder for
            other commands). ``False``: plain TCP, which anyone who reaches the port can use
            to run code as you (less safe).

    Yields:
        A ``distributed.Client`` connected to the scheduler; ``client.cluster`` is the
        dask-jobqueue cluster.

    Raises:
        JobqueueUnavailableError: ``sbatch``/``qsub`` (or the cancel/status tool) is missing.
        JobqueueConfigError: No settings for ``kind``, or ``SLURM_CONF`` names no file.
        WorkerTimeoutError: No worker connected within ``wait_timeout``.
        JobqueueError: Submission failed or all jobs ended before a worker connected.
    """
    if jobs < 1 or isinstance(jobs, bool):
        raise ValueError(f"jobs must be >= 1, not {jobs!r}")
    check_commands(kind)
    if kind == "slurm":
        check_slurm_conf()
    kwargs, source = cluster_kwargs(
        kind, config_file=config_file, job_options=job_options,
        dashboard_address=dashboard_address, scheduler_host=scheduler_host,
        pythonpath=pythonpath,
    )
    say = log or logger.info
    if quiet:
        say = _silent

    from distributed import Client

    cluster_cls = cluster_class(kind)
    submitted: list[str] = []
    failures: list[str] = []
    kwargs["job_cls"] = _job_class(cluster_cls.job_cls, submitted, failures)
    log_dir = kwargs.get("log_directory") or _dask_config(kind, "log-directory")
    log_hint = f" in {log_dir}" if log_dir else " (the submit directory by default)"
    tls_dir = tls_settings(kind, kwargs) if tls else None

    in_main = threading.current_thread() is threading.main_thread()
    cluster = client = None
    with _signals_as_exit(in_main):
        try:
            cluster = cluster_cls(**kwargs)
            client = Client(cluster, set_as_default=False)
            if not quiet:
                dashboard = kwargs["scheduler_options"]["dashboard_address"]
                say(_ssh_hint(cluster.dashboard_link, dashboard))
            cluster.scale(jobs=jobs)
            if min_workers:
                _wait_for_workers(
                    client, kind, min(min_workers, jobs), wait_timeout, submitted, failures,
                    log_hint, network_hint=LOOPBACK_HINT if loopback_only(kwargs) else "",
                )
                connected = len(client.scheduler_info(n_workers=-1)["workers"])
                say(
                    f"{kind.upper()}: {connected} of {jobs} workers connected; jobs "
                    f"{', '.join(sorted(submitted, key=_job_order))} (settings: {source}; "
                    "cancelled on exit)"
                )
            yield client
        except BaseException:
            with _deferred_signals(in_main):
                _shutdown(kind, cluster, client, submitted, cancel_timeout, say, tls_dir)
            raise
        with _deferred_signals(in_main) as came:
            _shutdown(kind, cluster, client, submitted, cancel_timeout, say, tls_dir)
    if signal.SIGTERM in came:
        raise JobqueueTerminated()
    if came:
        raise KeyboardInterrupt


def tls_settings(kind: str, kwargs: dict[str, Any]) -> str | None:
    """Give the cluster keyword arguments fresh TLS credentials; return a directory to remove.

    distributed's :meth:`~distributed.security.Security.temporary` makes a self-signed key and
    certificate; dask-jobqueue writes the worker's copy to ``shared_temp_directory`` (private
    ``0600`` files the job script names) and starts each worker with ``--tls-*`` options. When
    the settings name no such directory, a private ``.guideloom-tls-*`` folder is made in the
    working directory (which the jobs share: they ``cd`` there) and returned for removal.
    """
    from distributed.security import Security

    kwargs["security"] = Security.temporary()
    if kwargs.get("shared_temp_directory") or _dask_config(kind, "shared-temp-directory"):
        return None
    try:
        folder = tempfile.mkdtemp(prefix=".guideloom-tls-", dir=os.getcwd())
    except OSError as exc:
        raise JobqueueConfigError(
            f"cannot make a private folder for the workers' TLS credentials in {os.getcwd()} "
            f"({exc.strerror}): set shared-temp-directory (a folder the jobs can read) in the "
            "jobqueue config"
        ) from exc
    kwargs["shared_temp_directory"] = folder
    return folder


def _silent(line: str) -> None:
    """Discard a status line."""


def _shutdown(
    kind: str,
    cluster: Any,
    client: Any,
    submitted: list[str],
    cancel_timeout: float,
    say: Callable[[str], None],
    tls_dir: str | None = None,
) -> None:
    """Close the client and cluster, then make sure no submitted job is left in the queue."""
    if client is not None:
        with contextlib.suppress(Exception):
            client.close(timeout=30)
    if cluster is not None:
        with contextlib.suppress(Exception):
            cluster.close()  # dask-jobqueue cancels the jobs it still knows about
    if tls_dir is not None:
        # dask-jobqueue keeps the credential files open as cluster._job_<key> temporary files
        for name, value in vars(cluster or object()).items():
            if name.startswith("_job_") and hasattr(value, "close"):
                with contextlib.suppress(OSError):
                    value.close()  # deletes the file
        shutil.rmtree(tls_dir, ignore_errors=True)
    try:
        left = cancel_jobs(kind, list(submitted), timeout=cancel_timeout)
    except (JobqueueError, OSError, subprocess.SubprocessError) as exc:
        say(f"warning: could not check that jobs {', '.join(submitted)} were cancelled: {exc}")
        return
    if left:
        say(f"warning: {kind.upper()} jobs still queued after cancelling: {', '.join(left)}")
