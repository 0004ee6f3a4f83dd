"""The processes a test starts: interruptible whatever the caller ignores, and none left behind.

* :func:`start_interruptible` starts a command in a process group (session) of its own with
  SIGINT at its default disposition, so ``os.killpg(proc.pid, signal.SIGINT)`` acts as a
  terminal's Ctrl-C even when pytest itself runs with SIGINT ignored (a background job of a
  non-interactive shell: ``nohup sh -c '... &'``, CI runners, cron).
* :func:`no_leaked_process`, autouse through ``tests/conftest.py``: after each test,
  every process the test started and left running (its own children, and orphans reparented
  to PID 1 that carry the test's :data:`OWNER_ENV` token) is killed by process group and the
  test fails, naming them.
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest

logger = logging.getLogger(__name__)

SHIM = Path(__file__).with_name("default_sigint.py")
OWNER_ENV = "PYTEST_CHILD_OWNER"  # not GUIDELOOM_*: tests strip those from their children's env
# Helper processes Python starts once per process and keeps (not a test's doing).
LONG_LIVED_HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")
_tokens = itertools.count()
EXEC_TIMEOUT_S = 60.0
EXIT_GRACE_S = 2.0  # for a process found while it ends


def interruptible(command: Sequence[str]) -> list[str]:
    """``command`` run through :mod:`tests.default_sigint` (SIGINT reset to its default)."""
    return [sys.executable, "-S", str(SHIM), *map(str, command)]


def start_interruptible(command: Sequence[str], **popen: Any) -> subprocess.Popen:
    """Start ``command`` in a new session with SIGINT at its default disposition.

    Args:
        command: The program and its arguments.
        **popen: Further :class:`subprocess.Popen` arguments (``cwd``, ``env``, pipes).

    Returns:
        The started process, once the command runs (the SIGINT reset done: a signal sent
        earlier would still be ignored); its PID is its process group's id.
    """
    proc = subprocess.Popen(interruptible(command), start_new_session=True, **popen)
    deadline = time.monotonic() + EXEC_TIMEOUT_S
    while proc.poll() is None and _command_not_yet_running(proc.pid):  # wait for the exec
        assert time.monotonic() < deadline, f"{command[0]} not started in {EXEC_TIMEOUT_S} s"
        time.sleep(0.005)
    return proc


def _command_not_yet_running(pid: int) -> bool:
    """Whether ``pid`` still runs the shim, or is still inside an ``execve``.

    ``Popen`` returns once the child's close-on-exec pipe closes, which the kernel does before
    it sets up the new program's arguments: for that moment ``/proc/PID/cmdline`` reads empty
    and SIGINT is still ignored. Under load the window is wide enough for a signal sent then to
    be lost (seen at load 13), so an empty command line counts as "not yet running".
    """
    try:
        cmdline = psutil.Process(pid).cmdline()
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False
    return not cmdline or str(SHIM) in cmdline


def _is_helper(proc: psutil.Process) -> bool:
    try:
        cmdline = " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return True  # gone meanwhile
    return any(name in cmdline for name in LONG_LIVED_HELPERS)


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return False


def _descendant_pids(pids: Sequence[int]) -> set[int]:
    found: set[int] = set()
    for pid in pids:
        try:
            found |= {p.pid for p in psutil.Process(pid).children(recursive=True)} | {pid}
        except psutil.NoSuchProcess:
            continue
    return found


def embedded_cluster_pids() -> set[int]:
    """The processes of this process's embedded Dask cluster (started once and kept); none
    when the module was never imported (so the check imports nothing heavy)."""
    embedded = sys.modules.get("guideloom.cluster.embedded")
    cluster = embedded.running_cluster() if embedded is not None else None
    return _descendant_pids(cluster.pids) if cluster is not None else set()


def descendant_pids(pid: int) -> set[int]:
    """Every descendant of ``pid``, read from Linux's ``/proc/PID/task/TID/children`` (a tenth
    of psutil's scan of every process, which this falls back to elsewhere)."""
    tasks = Path(f"/proc/{pid}/task")
    if not tasks.is_dir():
        return _descendant_pids([pid]) - {pid}
    found: set[int] = set()
    todo = [pid]
    while todo:
        parent = todo.pop()
        try:
            kids = {int(k) for f in Path(f"/proc/{parent}/task").glob("*/children")
                    for k in f.read_text().split()}
        except (FileNotFoundError, ProcessLookupError):
            continue  # ended meanwhile
        todo += sorted(kids - found)
        found |= kids
    return found


@dataclass
class LeakWatch:
    """The processes alive when a test started, and the token its children inherit."""

    before: set[int]
    token: str
    existing: set[int]  # every PID of the machine when the test started
    me: psutil.Process = field(default_factory=psutil.Process)

    @classmethod
    def start(cls) -> LeakWatch:
        """Snapshot this process's descendants and mark the test's children with a token."""
        me = psutil.Process()
        token = f"{os.getpid()}-{next(_tokens)}"
        os.environ[OWNER_ENV] = token
        before = descendant_pids(me.pid)
        return cls(before=before, token=token, existing=set(psutil.pids()), me=me)

    def _from_before(self, proc: psutil.Process) -> bool:
        """Whether ``proc`` descends from a process that was alive before the test (a longer-
        lived fixture's server or cluster, which owns its own children)."""
        try:
            parents = proc.parents()
        except psutil.NoSuchProcess:
            return True
        for parent in parents:
            if parent.pid == self.me.pid:
                return False
            if parent.pid in self.before:
                return True
        return False

    def _orphans(self, seen: set[int]) -> list[psutil.Process]:
        """Processes started during the test, no longer below this process, carrying its token."""
        found = []
        uid = os.getuid()
        for pid in set(psutil.pids()) - self.existing - seen:  # only PIDs new since the start
            try:
                proc = psutil.Process(pid)
                if proc.uids().real == uid and proc.environ().get(OWNER_ENV) == self.token:
                    found.append(proc)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        return found

    def leaked(self) -> list[psutil.Process]:
        """The live processes the test started and left running."""
        allowed = self.before | embedded_cluster_pids()
        children = []
        for pid in descendant_pids(self.me.pid) - allowed:
            try:
                children.append(psutil.Process(pid))
            except psutil.NoSuchProcess:
                continue
        children = [p for p in children if not self._from_before(p)]
        orphans = self._orphans({p.pid for p in children} | allowed)
        found = [p for p in children + orphans if _alive(p) and not _is_helper(p)]
        if found:  # one already ending (killed, not yet gone) is not a leak: wait for that event
            _, found = psutil.wait_procs(found, timeout=EXIT_GRACE_S)
        return [p for p in found if _alive(p)]

    def finish(self) -> None:
        """Drop the token from the environment (the next test sets its own)."""
        if os.environ.get(OWNER_ENV) == self.token:
            del os.environ[OWNER_ENV]


def describe(procs: Sequence[psutil.Process]) -> str:
    """One line per process: PID, parent and command line."""
    lines = []
    for proc in procs:
        try:
            lines.append(f"pid {proc.pid} (parent {proc.ppid()}): {' '.join(proc.cmdline())[:200]}")
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            lines.append(f"pid {proc.pid}: ended meanwhile")
    return "\n".join(lines)


def kill_by_group(procs: Sequence[psutil.Process], timeout: float = 10.0) -> list[psutil.Process]:
    """SIGKILL each process's group when it leads one of its own (else the process and its
    descendants); return those still alive after ``timeout`` seconds."""
    own_group = os.getpgrp()
    targets: dict[int, psutil.Process] = {}
    for proc in procs:
        try:
            targets.update({p.pid: p for p in proc.children(recursive=True)})
            targets[proc.pid] = proc
            group = os.getpgid(proc.pid)
            if group == proc.pid and group != own_group:
                os.killpg(group, signal.SIGKILL)
            else:
                proc.kill()
        except (psutil.NoSuchProcess, ProcessLookupError):
            continue
    for proc in targets.values():
        try:
            proc.kill()
        except psutil.NoSuchProcess:
            continue
    _, alive = psutil.wait_procs(list(targets.values()), timeout=timeout)
    if alive:
        logger.warning("still alive after SIGKILL: %s", describe(alive))
    return alive


@pytest.fixture(autouse=True)
def no_leaked_process():
    """No process outlives the test that started it.

    After the test and its function-scoped fixtures are torn down (also after a timeout:
    pytest-timeout's ``signal`` method fails the test and teardown runs), every process the
    test started that is still running (a child, grandchild, or an orphan reparented to PID 1
    that carries the test's token) is killed by process group and the test fails, naming
    them. Processes of longer-lived fixtures (started before the test) and the process's
    embedded Dask cluster are not the test's.
    """
    watch = LeakWatch.start()
    yield
    watch.finish()
    leaked = watch.leaked()
    if leaked:
        listing = describe(leaked)
        kill_by_group(leaked)
        pytest.fail(f"the test left {len(leaked)} process(es) running (now killed):\n{listing}",
                    pytrace=False)
