"""Fault injection for tests: ``GUIDELOOM_FAULT_POINT=<name>`` kills this process with SIGKILL
when the run reaches the named point (export steps call :func:`fault_point`), and
``GUIDELOOM_PAUSE_POINT=<name>`` holds it there while a test looks at it.

Nothing happens unless the variable is set; tests use it to prove that a run killed at any step
boundary is completed, or discarded and redone, by the next run, never published half-made.
"""

from __future__ import annotations

import os
import signal

FAULT_ENV = "GUIDELOOM_FAULT_POINT"


PAUSE_ENV = "GUIDELOOM_PAUSE_POINT"
PAUSE_FIFO_ENV = "GUIDELOOM_PAUSE_FIFO"


def fault_point(name: str) -> None:
    """SIGKILL this process if :data:`FAULT_ENV` names this point; pause here if
    :data:`PAUSE_ENV` names it.

    A pause opens the FIFO named by :data:`PAUSE_FIFO_ENV` for reading, which blocks until a
    test opens it for writing (so the test knows the run is here), and reads until the test
    closes it (the run then goes on).
    """
    if os.environ.get(FAULT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get(PAUSE_ENV) == name and os.environ.get(PAUSE_FIFO_ENV):
        with open(os.environ[PAUSE_FIFO_ENV], "rb") as fifo:
            fifo.read()
