"""Fault injection for tests: stop a run at a named point (export steps call :func:`fault_point`).

Two ways, one set of points:

* ``GUIDELOOM_FAULT_POINT=<name>`` (read at each point, never at import) kills this process
  with SIGKILL when the run reaches the named point; ``GUIDELOOM_PAUSE_POINT=<name>`` holds it
  there while a test looks at it.
* ``with crash_at(name):`` raises :class:`InjectedFault` (a private ``BaseException``, so no
  ``except Exception`` of the run swallows it) at the named point, in this process: the test
  suite's fault matrix and :class:`guideloom.testing.FormatTests` use it to crash a run
  without starting an interpreter per case. A point reached in another process (a Dask
  worker) does not see it; in-process runs (``client="sync"``) reach every point.

Nothing happens unless one of them is set; tests use them to prove that a run stopped at any
step boundary is completed, or discarded and redone, by the next run, never published
half-made.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator

from guideloom.errors import InjectedFault

__all__ = ["EXECUTOR_POINTS", "FAULT_ENV", "InjectedFault", "crash_at", "fault_point",
           "reached_points"]

FAULT_ENV = "GUIDELOOM_FAULT_POINT"


PAUSE_ENV = "GUIDELOOM_PAUSE_POINT"
PAUSE_FIFO_ENV = "GUIDELOOM_PAUSE_FIFO"

# the driver's step boundaries every export passes (formats declare their own on top:
# ExportFormat.fault_points); "allocated" is reached by formats with a schema only, and
# "target-moved-aside" only when an existing export is replaced
EXECUTOR_POINTS = ("partition-marked", "partitions-done", "finalize-started", "rows-finalized",
                   "sim-ids-written", "provenance-written", "checksums-written",
                   "description-written", "manifest-written", "publishing",
                   "target-moved-aside", "data-moved")
SCHEMA_POINTS = ("allocated",)


_lock = threading.Lock()
_armed: list[str] = []  # the points crash_at armed, innermost last (threads of the run see it)
_reached: list[str] = []  # every point passed while recording (see reached_points)
_recording = [0]
_pause_hooks: list[Callable[[], object]] = []  # called before a pause point holds the run


def before_pause(hook: Callable[[], object]) -> Callable[[], None]:
    """Call ``hook()`` each time a pause point is about to hold the run, so that what the run
    reported before it has arrived where a test looks (the run's events at the scheduler,
    which are otherwise sent without waiting). Returns the function that stops calling it."""
    _pause_hooks.append(hook)
    return lambda: _pause_hooks.remove(hook) if hook in _pause_hooks else None


@contextlib.contextmanager
def crash_at(point: str) -> Iterator[None]:
    """Raise :class:`InjectedFault` when this process reaches ``point`` inside the block.

    Every thread of the process sees it (compaction threads reach some points), and it is
    armed until the block ends, so each time the point is reached it raises.
    """
    with _lock:
        _armed.append(point)
    try:
        yield
    finally:
        with _lock:
            _armed.remove(point)


@contextlib.contextmanager
def reached_points() -> Iterator[list[str]]:
    """Record, in order, every fault point this process passes inside the block."""
    with _lock:
        _recording[0] += 1
        start = len(_reached)
    found: list[str] = []
    try:
        yield found
    finally:
        with _lock:
            found.extend(_reached[start:])
            _recording[0] -= 1
            if not _recording[0]:
                _reached.clear()


def fault_point(name: str) -> None:
    """Stop the run here if a test asked for it: raise :class:`InjectedFault` if
    :func:`crash_at` armed ``name``, SIGKILL this process if :data:`FAULT_ENV` names it, pause
    here if :data:`PAUSE_ENV` names it.

    A pause opens the FIFO named by :data:`PAUSE_FIFO_ENV` for reading, which blocks until a
    test opens it for writing (so the test knows the run is here), and reads until the test
    closes it (the run then goes on).
    """
    if _recording[0] or _armed:
        with _lock:
            if _recording[0]:
                _reached.append(name)
            armed = name in _armed
        if armed:
            raise InjectedFault(name)
    if os.environ.get(FAULT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get(PAUSE_ENV) == name and os.environ.get(PAUSE_FIFO_ENV):
        for hook in list(_pause_hooks):
            hook()
        with open(os.environ[PAUSE_FIFO_ENV], "rb") as fifo:
            fifo.read()
