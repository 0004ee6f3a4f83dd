"""Worker-side watchdog: a Dask worker (or nanny) exits when the process that started it dies.

The embedded cluster starts its workers with ``GUIDELOOM_DRIVER=<pid>:<create_time>`` in their
environment and this module as a Dask ``preload``: Dask calls :func:`dask_setup`, which starts
one daemon thread (:func:`start_watchdog`; importing the module starts nothing) that checks four
times a second whether that process still exists; when it does not (the driver was
killed, even with SIGKILL), the worker process ends itself at once. A PID reused by another
process is told apart by its creation time.
"""

from __future__ import annotations

import os
import threading
import time

import psutil

DRIVER_ENV = "GUIDELOOM_DRIVER"
POLL_SECONDS = 0.25


def driver_token(pid: int | None = None) -> str:
    """The ``pid:create_time`` token that names a process for :data:`DRIVER_ENV`."""
    process = psutil.Process(pid or os.getpid())
    return f"{process.pid}:{process.create_time():.3f}"


def driver_alive(token: str) -> bool:
    """Whether the process named by ``token`` is still running."""
    pid_text, _, created = token.partition(":")
    try:
        process = psutil.Process(int(pid_text))
        return f"{process.create_time():.3f}" == created and process.status() != "zombie"
    except (psutil.Error, ValueError):
        return False


def _watch(token: str) -> None:
    while driver_alive(token):
        time.sleep(POLL_SECONDS)
    os._exit(0)  # the driver is gone: nothing of this process is worth keeping


_started: list[threading.Thread] = []  # the one watchdog thread of this process, once started
_start_lock = threading.Lock()


def start_watchdog() -> bool:
    """Start the watchdog thread if :data:`DRIVER_ENV` is set; return whether one runs.

    Calling it again (a nanny's and a worker's preload in one process) starts no second thread.
    """
    token = os.environ.get(DRIVER_ENV)
    if not token:
        return False
    with _start_lock:
        if not _started:
            thread = threading.Thread(target=_watch, args=(token,),
                                      name="guideloom-driver-watchdog", daemon=True)
            thread.start()
            _started.append(thread)
    return True


def dask_setup(server: object) -> None:
    """Dask preload hook (``--preload``/``--preload-nanny``): start the watchdog."""
    start_watchdog()
