"""Partitions of a local export run in a few processes forked from the driver.

An export of small local records is too short for the embedded Dask cluster (its start costs
more than the whole job) and too long for one core. :class:`ForkedWorkers` forks ``n`` children
of the driver once the job is planned, so they start in milliseconds with every module and the
job's objects already in memory. They are forked first, before the job starts anything that
runs a thread (zarr's I/O threads, the decode pool), and wait while the driver probes the
schema and allocates the output files; the facts learnt meanwhile (the schema) reach them
once, pickled, before their first partition. Each child runs
the very partition task a Dask worker runs (``run_partition``: rows written at their places in
the staged files, then the partition's marker); the driver hands out partitions in their order,
one at a time to whichever child is free (its next partition before anything else), and
reads each finished partition's summary back from its marker, exactly as a resumed run does.

Safety rules:

* Linux only (:func:`fork_problem`): each child asks the kernel for SIGKILL when the driver
  dies (``prctl(PR_SET_PDEATHSIG)``) and checks ``getppid()`` right after, so none outlives
  it, even after a SIGKILL of the driver alone.
* No fork while another thread runs in the driver (a lock it holds would stay held in the
  child): guideloom's own idle decode pool is stopped first; any other thread makes
  :func:`fork_problem` answer why, and the job runs in-process.
* A child that dies (SIGKILL, out of memory) fails the export with
  :class:`ForkedWorkerError` naming the partition and the signal; its finished partitions
  keep their markers, so a rerun resumes. An error raised by a partition in a child is
  raised in the driver (the same exception, the child's traceback as a note). Ctrl-C in the
  driver (or any error) kills every child before it propagates.
* The driver's objects are frozen for the garbage collector while it forks (``gc.freeze``):
  a child never runs the finalizers of the driver's garbage.
* Children ignore SIGINT (the driver, which gets the terminal's Ctrl-C too, kills them) and
  end with ``os._exit``: none runs the driver's ``finally`` blocks or ``atexit`` handlers.

The pipes between the driver and its children are anonymous and made for this job, so only
the driver's own fork writes to them: a child's exception travels pickled (as Dask sends a
worker's), and so does the job's context sent to the children, everything else as small
fixed-size frames.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import pickle
import select
import signal
import struct
import sys
import threading
import traceback
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from guideloom.errors import ForkedWorkerError, GuideloomError
from guideloom.formats.manifest_types import PartitionSummary

FORKED = "forked"  # the placement mode in export.json
PR_SET_PDEATHSIG = 1
_HEAD = struct.Struct("<cI")  # frame kind, payload length (or partition position)
_DONE, _ERROR = b"D", b"E"
_RUN, _CONTEXT = b"C", b"X"  # driver -> child: a partition to run; the job's context
_STOP = 0xFFFFFFFF  # the position that tells a child to end


def _prctl() -> Any:
    """libc's ``prctl``, or ``None``."""
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def fork_problem() -> str | None:
    """Why partitions cannot run in forked processes here and now, or ``None`` when they can.

    Stops guideloom's own idle decode pool first; any other thread of this process is a
    reason (forking it could leave a lock held in the child).
    """
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return "forked workers need Linux (fork and PR_SET_PDEATHSIG)"
    if _prctl() is None:
        return "forked workers need libc's prctl"
    from guideloom.fastread import pool
    from guideloom.runtime import flush

    pool.shutdown()  # guideloom's own idle decode pool: a child starts its own when needed
    flush.shutdown()  # and its idle fsync threads
    others = [t.name for t in threading.enumerate()
              if t is not threading.current_thread() and t.is_alive()]
    if others:
        zarr = (" (zarr's I/O threads, started by an earlier zarr export or read in this "
                "process)" if any(n == "zarr_io" or n.startswith("zarr_pool") for n in others)
                else "")
        return (f"{len(others)} other thread{'s' * (len(others) != 1)} run in this process "
                f"({', '.join(sorted(others)[:3])}){zarr}: forking could deadlock")
    return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_exact(fd: int, n: int) -> bytes | None:
    """``n`` bytes from ``fd``, or ``None`` at end of file (the writer died or closed it)."""
    chunks, got = [], 0
    while got < n:
        block = os.read(fd, n - got)
        if not block:
            return None
        chunks.append(block)
        got += len(block)
    return b"".join(chunks)


class _Child:
    """The driver's view of one forked worker."""

    def __init__(self, pid: int, commands: int, results: int):
        self.pid, self.commands, self.results = pid, commands, results
        self.running: int | None = None  # position in the job's partitions
        self.stopped = False  # told to end
        self.status: int | None = None

    def send(self, position: int) -> None:
        self.running = None if position == _STOP else position
        self.stopped = position == _STOP
        _write_all(self.commands, _HEAD.pack(_RUN, position))

    def send_context(self, payload: bytes) -> None:
        _write_all(self.commands, _HEAD.pack(_CONTEXT, len(payload)) + payload)

    def reap(self, block: bool = True) -> None:
        if self.status is None:
            with contextlib.suppress(ChildProcessError):
                pid, status = os.waitpid(self.pid, 0 if block else os.WNOHANG)
                if pid:
                    self.status = status

    def kill(self) -> None:
        if self.status is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)

    def close(self) -> None:
        for fd in (self.commands, self.results):
            with contextlib.suppress(OSError):
                os.close(fd)

    def how_it_ended(self) -> str:
        self.reap()
        if self.status is None:
            return "ended"
        if os.WIFSIGNALED(self.status):
            number = os.WTERMSIG(self.status)
            return f"was killed by signal {number} ({signal.Signals(number).name})"
        return f"exited with status {os.WEXITSTATUS(self.status)}"


class ForkedWorkers:
    """``n`` processes forked from this one, each running ``task(context, part)`` for the
    partitions it is handed (see the module docstring). Use as a context manager; :meth:`run`
    runs them.

    Args:
        n: Children to fork.
        task: Runs one partition in a child (rows and marker written); its return is ignored.
            ``context`` is what :meth:`run` was given (facts learnt after the fork).
        parts: The job's partitions; children get positions in this sequence.
        summary_of: Reads a finished partition's summary in the driver (its marker).
        describe: Names a partition for error messages.
    """

    def __init__(self, n: int, task: Callable[[Any, Any], Any], parts: Sequence[Any],
                 summary_of: Callable[[Any], PartitionSummary],
                 describe: Callable[[Any], str] = str):
        self.parts = list(parts)
        self._summary_of = summary_of
        self._describe = describe
        self.children: list[_Child] = []
        driver = os.getpid()
        for stream in (sys.stdout, sys.stderr):  # or the children would print it again
            with contextlib.suppress(Exception):
                stream.flush()
        # the children never collect what the driver made (its garbage's finalizers run
        # once, in the driver) and leave those pages shared
        gc.freeze()
        try:
            for _ in range(max(1, n)):
                self.children.append(self._fork(task, driver))
        except BaseException:
            self.close(kill=True)
            raise
        finally:
            gc.unfreeze()

    def _fork(self, task: Callable[[Any, Any], Any], driver: int) -> _Child:
        down_r, down_w = os.pipe()  # partitions to run: driver -> child
        up_r, up_w = os.pipe()  # finished partitions and errors: child -> driver
        pid = os.fork()
        if pid == 0:  # the child: never returns
            code = 70
            try:
                os.close(down_w)
                os.close(up_r)
                for other in self.children:  # its siblings' pipes: their deaths must show
                    other.close()
                code = _child_main(task, self.parts, driver, down_r, up_w)
            finally:
                for stream in (sys.stdout, sys.stderr):  # what the child printed itself
                    with contextlib.suppress(Exception):
                        stream.flush()
                os._exit(code)
        os.close(down_r)
        os.close(up_w)
        return _Child(pid, down_w, up_r)

    @property
    def pids(self) -> list[int]:
        """The children's process ids."""
        return [c.pid for c in self.children]

    def run(self, on_result: Callable[[PartitionSummary], None] | None = None,
            context: Any = None) -> list[PartitionSummary]:
        """Run every partition; return the summaries as they complete.

        ``context`` (picklable) is sent to every child first and handed to each task.

        Raises:
            ForkedWorkerError: A child died while running a partition.
            BaseException: What a partition raised in a child.
        """
        pending = deque(range(len(self.parts)))
        by_fd = {c.results: c for c in self.children}
        payload = pickle.dumps(context)
        for child in self.children:
            child.send_context(payload)
            if pending:
                child.send(pending.popleft())
        results: list[PartitionSummary] = []
        while any(c.running is not None for c in self.children):
            ready, _, _ = select.select([c.results for c in self.children
                                         if c.running is not None], [], [])
            for fd in ready:
                child = by_fd[fd]
                part = self._receive(child)
                # the child's next partition first: it runs while the driver reads the
                # finished one's marker and reports it
                child.send(pending.popleft() if pending else _STOP)
                summary = dict(self._summary_of(part))
                summary.setdefault("worker", f"forked:{child.pid}")
                results.append(summary)  # type: ignore[arg-type]
                if on_result is not None:
                    on_result(summary)  # type: ignore[arg-type]
        return results

    def _receive(self, child: _Child) -> Any:
        """The partition ``child`` reports finished (its frame read); raises what it raised,
        or why it ended or broke the frame."""
        assert child.running is not None
        part = self.parts[child.running]
        head = _read_exact(child.results, _HEAD.size)
        if head is None:
            raise ForkedWorkerError(
                f"forked export worker {child.pid} {child.how_it_ended()} while running "
                f"{self._describe(part)}; the partitions finished before are kept: rerun the "
                "same export to resume")
        kind, length = _HEAD.unpack(head)
        payload = _read_exact(child.results, length) if length else b""
        if kind == _ERROR and payload is not None:
            error, text = pickle.loads(payload)
            error.add_note(f"(raised in forked export worker {child.pid} running "
                           f"{self._describe(part)})\n{text}")
            raise error
        if kind != _DONE or payload is None:
            raise ForkedWorkerError(f"forked export worker {child.pid} sent a broken frame "
                                    f"while running {self._describe(part)}")
        child.running = None
        return part

    def close(self, kill: bool = False) -> None:
        """End the children (killed with ``kill``, else told to stop) and reap them."""
        for child in self.children:
            if kill or child.running is not None:
                child.kill()
            elif not child.stopped:
                with contextlib.suppress(OSError):
                    child.send(_STOP)
        for child in self.children:
            child.close()
            child.reap()

    def __enter__(self) -> ForkedWorkers:
        return self

    def __exit__(self, kind: Any, *_: Any) -> None:
        self.close(kill=kind is not None)


def _child_main(task: Callable[[Any, Any], Any], parts: Sequence[Any], driver: int,
                commands: int, results: int) -> int:
    """A child's life: die with the driver, then run the partitions it is handed."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the driver's Ctrl-C ends it (SIGKILL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    prctl = _prctl()
    if prctl is None or prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        return 71
    if os.getppid() != driver:  # the driver died before the request took effect
        return 72
    context = None
    while True:
        head = _read_exact(commands, _HEAD.size)
        if head is None:
            return 0  # the driver closed the pipe: nothing more to run
        kind, position = _HEAD.unpack(head)
        if kind == _CONTEXT:
            payload = _read_exact(commands, position) if position else b""
            if payload is None:
                return 0
            context = pickle.loads(payload)
            continue
        if position == _STOP or os.getppid() != driver:
            return 0
        try:
            task(context, parts[position])
        except BaseException as exc:
            _write_all(results, _error_frame(exc))
            return 1
        _write_all(results, _HEAD.pack(_DONE, 0))


def _error_frame(exc: BaseException) -> bytes:
    """``exc`` and its traceback text, pickled (a plain error with its text if it cannot be)."""
    text = "".join(traceback.format_exception(exc))
    try:
        payload = pickle.dumps((exc, text))
        pickle.loads(payload)
    except Exception:
        payload = pickle.dumps((GuideloomError(f"{type(exc).__name__}: {exc}"), text))
    return _HEAD.pack(_ERROR, len(payload)) + payload
