"""Dask's own log lines kept quiet in this process while guideloom uses a cluster, and the
host's levels given back afterwards.

Errors reach the user as exceptions, so the lines Dask (and tornado, asyncio and bokeh, which it
logs through) writes while a cluster runs or closes are noise: :func:`hold` raises those loggers
to CRITICAL, and the last :func:`release` puts every level back as it was before the first
:func:`hold`. The embedded cluster holds from its start to its close; a placement on another
cluster holds while the job runs; the command line holds for its whole run.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["QUIET_LOGGERS", "hold", "holders", "quieted", "release"]

QUIET_LOGGERS = ("distributed", "tornado", "tornado.application", "asyncio", "bokeh")

_lock = threading.Lock()
_holders = 0
_saved: dict[str, int] = {}


def hold(*, import_distributed: bool = True) -> None:
    """Quiet Dask's loggers until the matching :func:`release`.

    Distributed sets these levels when it is imported, so by default it is imported first; the
    levels are set again on every call, in case an import in between changed them.
    """
    global _holders
    if import_distributed:
        import distributed  # noqa: F401 - its logging set-up must come before ours
    with _lock:
        if _holders == 0:
            _saved.clear()
            _saved.update({name: logging.getLogger(name).level for name in QUIET_LOGGERS})
        _holders += 1
        for name in QUIET_LOGGERS:
            logging.getLogger(name).setLevel(logging.CRITICAL)


def release() -> None:
    """End one :func:`hold`; the last one gives the loggers their earlier levels back."""
    global _holders
    with _lock:
        if _holders == 0:
            return
        _holders -= 1
        if _holders == 0:
            for name, level in _saved.items():
                logging.getLogger(name).setLevel(level)
            _saved.clear()


def holders() -> int:
    """How many holds are active (0: the host's own levels are in place)."""
    with _lock:
        return _holders


@contextmanager
def quieted(*, import_distributed: bool = True) -> Iterator[None]:
    """Dask's loggers quiet inside the block (see :func:`hold`)."""
    hold(import_distributed=import_distributed)
    try:
        yield
    finally:
        release()
