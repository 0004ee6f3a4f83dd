"""The one line a job prints on stderr about the cluster guideloom runs it on, also when
nothing configured logging (a notebook, a script).

guideloom's messages are log records (the command line prints them; Python code configures
logging itself). A user of the Python API who configured nothing would never learn where
the embedded local cluster's dashboard is, so for that one fact the line is also printed,
unless a logging handler already writes guideloom's records to stderr (the command line's,
``logging.basicConfig``'s): the line is never shown twice.
"""

from __future__ import annotations

import logging
import sys

__all__ = ["shown_on_stderr", "tell"]


def shown_on_stderr(log: logging.Logger, level: int = logging.INFO) -> bool:
    """Whether a record of ``log`` at ``level`` reaches a handler that writes to stderr: a
    ``StreamHandler`` of ``sys.stderr``, or a handler marked ``terminal = True`` (the
    command line's, which writes to whatever ``sys.stderr`` is when it emits)."""
    if not log.isEnabledFor(level):
        return False
    current: logging.Logger | None = log
    while current is not None:
        for handler in current.handlers:
            if level < handler.level:
                continue
            stream = getattr(handler, "stream", None)
            if getattr(handler, "terminal", False) or (
                    stream is not None and stream in (sys.stderr, sys.__stderr__)):
                return True
        if not current.propagate:
            break
        current = current.parent
    return False


def tell(log: logging.Logger, line: str, quiet: bool) -> None:
    """Print ``line`` on stderr unless ``quiet`` or ``log``'s records are shown there
    already; the caller logs the same facts as records (whatever ``quiet`` says)."""
    if quiet or shown_on_stderr(log):
        return
    print(line, file=sys.stderr, flush=True)
