"""A real one-node SLURM on this machine for tests: munged, slurmctld and slurmd as children.

Nothing is installed here. Where ``slurmctld``, ``slurmd``, ``munged`` and the client commands
are present and the tests run as root, :func:`start_single_node_slurm` writes its own
``slurm.conf`` (free ports, ``127.0.0.1``), state, spool and log directories and a munge key in
a fresh temporary directory, starts the three daemons in the foreground as child processes, and
stops exactly those PIDs. ``SLURM_CONF`` points the client commands (``sbatch``, ``squeue``,
``scancel``, as dask-jobqueue runs them) at that file.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psutil

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scancel", "sinfo")
SBIN = ("/usr/sbin", "/sbin", "/usr/local/sbin")


def _which(name: str) -> str | None:
    """Find a command on PATH or in the sbin directories (daemons live there)."""
    return shutil.which(name) or shutil.which(name, path=os.pathsep.join(SBIN))


def slurm_unavailable_reason() -> str | None:
    """Why a single-node SLURM cannot be started here, or ``None`` when it can."""
    if os.name != "posix" or os.geteuid() != 0:
        return "single-node SLURM tests need root (the daemons run as root)"
    missing = [name for name in (*DAEMONS, *CLIENTS) if _which(name) is None]
    if missing:
        return (
            f"SLURM not installed ({', '.join(missing)} missing): "
            "apt-get install -y slurmctld slurmd slurm-client munge"
        )
    try:
        import dask_jobqueue  # noqa: F401
    except ImportError:
        return "dask-jobqueue is not installed (pip install -e '.[test]')"
    return None


def _free_port() -> int:
    with closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class SingleNodeSlurm:
    """A running one-node SLURM: its files and the daemons this process started."""

    root: Path
    conf: Path
    jobqueue_config: Path
    log_dir: Path
    node: str
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def env(self) -> dict[str, str]:
        """Environment for subprocesses that use this SLURM (client commands, jobqueue)."""
        return {
            **os.environ,
            "SLURM_CONF": str(self.conf),
            "GUIDELOOM_JOBQUEUE_CONFIG": str(self.jobqueue_config),
        }

    def command(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """Run a SLURM client command against this cluster."""
        return subprocess.run(
            list(args), env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )

    def queue(self) -> list[str]:
        """``JOBID STATE NAME`` of every job ``squeue`` lists (all are this test's)."""
        proc = self.command("squeue", "-h", "-o", "%i %T %j")
        assert proc.returncode == 0, proc.stderr
        return [line.strip() for line in proc.stdout.splitlines() if line.strip()]

    def logs(self) -> str:
        """The daemons' log tails, for failure messages."""
        parts = []
        for path in sorted(self.root.glob("log/*.log")):
            parts.append(f"--- {path.name}\n" + "\n".join(path.read_text().splitlines()[-15:]))
        return "\n".join(parts)


def _write_conf(root: Path, node: str) -> Path:
    ctld_port, slurmd_port = _free_port(), _free_port()
    cpus = max(2, os.cpu_count() or 1)  # two one-CPU worker jobs at once even on one core
    memory_mb = psutil.virtual_memory().total // 2**20
    lines = [
        "ClusterName=guideloom-test",
        f"SlurmctldHost={socket.gethostname()}(127.0.0.1)",
        f"SlurmctldPort={ctld_port}",
        f"SlurmdPort={slurmd_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={root / 'run' / 'munge.socket'}",
        f"StateSaveLocation={root / 'state'}",
        f"SlurmdSpoolDir={root / 'spool'}",
        f"SlurmctldPidFile={root / 'run' / 'slurmctld.pid'}",
        f"SlurmdPidFile={root / 'run' / 'slurmd.pid'}",
        f"SlurmctldLogFile={root / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={root / 'log' / 'slurmd.log'}",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "MpiDefault=none",
        "SchedulerType=sched/builtin",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "SlurmdParameters=config_overrides",  # trust the CPUs declared below
        "ReturnToService=2",
        "KillWait=5",  # a cancelled worker job gets SIGKILL 5 s after SIGTERM
        "MinJobAge=2",  # finished jobs leave squeue soon
        f"NodeName={node} NodeAddr=127.0.0.1 NodeHostname={socket.gethostname()} "
        f"CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN",
        f"PartitionName=test Nodes={node} Default=YES MaxTime=INFINITE State=UP",
    ]
    conf = root / "slurm.conf"
    conf.write_text("\n".join(lines) + "\n")
    return conf


def _write_jobqueue_config(root: Path, log_dir: Path) -> Path:
    """A site config as a user would write one: this machine's loopback, small jobs."""
    text = f"""\
jobqueue:
  slurm:
    name: guideloom-test-worker
    cores: 1
    processes: 1
    memory: 2GiB
    walltime: "00:30:00"
    queue: test
    interface: lo
    death-timeout: 60
    local-directory: {root / "scratch"}
    log-directory: {log_dir}
    job-script-prologue: []
    job-extra-directives: []
    worker-extra-args: []
    scheduler-options:
      host: 127.0.0.1
      dashboard_address: "127.0.0.1:0"
"""
    path = root / "jobqueue.yaml"
    path.write_text(text)
    return path


def _start(name: str, args: list[str], root: Path, env: dict[str, str]) -> subprocess.Popen:
    out = open(root / "log" / f"{name}.out", "wb")  # noqa: SIM115 - closed with the process
    try:
        return subprocess.Popen(
            [_which(name) or name, *args], stdout=out, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, env=env, cwd=root,
        )
    finally:
        out.close()


def _stop(proc: subprocess.Popen, timeout: float = 20) -> None:
    """SIGTERM, wait, SIGKILL: exactly this child process."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)


def _wait(condition, timeout: float, what: str, slurm: SingleNodeSlurm) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        for name, proc in slurm.procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}\n{slurm.logs()}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout} s waiting for {what}\n{slurm.logs()}")
        time.sleep(0.1)  # polling interval between checks of the condition


@contextmanager
def start_single_node_slurm(timeout: float = 60) -> Iterator[SingleNodeSlurm]:
    """Start munged, slurmctld and slurmd for one node on 127.0.0.1; stop them on exit.

    The caller checks :func:`slurm_unavailable_reason` first. Files live in a fresh directory
    under the system temporary directory (munged insists that every parent of its socket is
    world-executable, which pytest's private ``tmp_path`` is not); it is removed on exit.
    """
    root = Path(tempfile.mkdtemp(prefix="guideloom-slurm-"))
    root.chmod(0o755)
    for sub in ("run", "state", "spool", "log", "jobs", "scratch"):
        (root / sub).mkdir(mode=0o755)
    key_dir = root / "munge-key"
    key_dir.mkdir(mode=0o700)
    key = key_dir / "munge.key"
    if not key.exists():  # a fresh key for this cluster only
        key.write_bytes(os.urandom(128))
        key.chmod(0o400)
    node = f"gl{os.getpid()}"
    slurm = SingleNodeSlurm(
        root=root,
        conf=_write_conf(root, node),
        jobqueue_config=_write_jobqueue_config(root, root / "jobs"),
        log_dir=root / "jobs",
        node=node,
    )
    env = slurm.env
    socket_path = root / "run" / "munge.socket"
    try:
        slurm.procs["munged"] = _start("munged", [
            "--foreground", f"--socket={socket_path}", f"--key-file={key}",
            f"--pid-file={root / 'run' / 'munged.pid'}",
            f"--log-file={root / 'log' / 'munged.log'}",
            f"--seed-file={key_dir / 'munged.seed'}",
        ], root, env)
        _wait(socket_path.exists, timeout, "munged's socket", slurm)
        slurm.procs["slurmctld"] = _start("slurmctld", ["-D", "-i"], root, env)
        _wait(lambda: slurm.command("scontrol", "ping").stdout.count("UP") > 0, timeout,
              "slurmctld to answer", slurm)
        slurm.procs["slurmd"] = _start("slurmd", ["-D", "-N", node], root, env)
        _wait(lambda: slurm.command("sinfo", "-h", "-n", node, "-o", "%t").stdout.strip() == "idle",
              timeout, f"node {node} to be idle", slurm)
        yield slurm
    finally:
        if "slurmctld" in slurm.procs and slurm.procs["slurmctld"].poll() is None:
            leftover = slurm.command("squeue", "-h", "-o", "%i").stdout.split()
            if leftover:  # a failed test's jobs: cancel them before their slurmd goes
                slurm.command("scancel", *leftover)
                with contextlib.suppress(TimeoutError, RuntimeError):
                    _wait(lambda: not slurm.queue(), timeout, "cancelled jobs to end", slurm)
        for name in ("slurmd", "slurmctld", "munged"):
            if name in slurm.procs:
                _stop(slurm.procs[name])
        shutil.rmtree(root, ignore_errors=True)
