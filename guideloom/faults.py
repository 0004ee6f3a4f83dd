"""Fault injection for tests: ``GUIDELOOM_FAULT_POINT=<name>`` kills this process with SIGKILL
when the run reaches the named point (export steps call :func:`fault_point`).

Nothing happens unless the variable is set; tests use it to prove that a run killed at any step
boundary is completed, or discarded and redone, by the next run, never published half-made.
"""

from __future__ import annotations

import os
import signal

FAULT_ENV = "GUIDELOOM_FAULT_POINT"


def fault_point(name: str) -> None:
    """SIGKILL this process if :data:`FAULT_ENV` names this point."""
    if os.environ.get(FAULT_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
