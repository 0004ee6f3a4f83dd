"""Counts of the records the native HDF5 reader read and of those it left to h5py.

One process-wide :data:`NATIVE_STATS`, counted by the one record reader
(:mod:`guideloom.read.records`) for local and remote records alike; each fallback is also
logged at DEBUG and counted in :mod:`guideloom.runtime.fallbacks` (``export.json``'s ``fallbacks``).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Any

from guideloom.runtime import fallbacks

__all__ = ["NATIVE_STATS", "NativeStats", "native_stats"]

logger = logging.getLogger(__name__)


class NativeStats:
    """Process-wide counts of records read by :mod:`guideloom.h5native` and of those that
    fell back to h5py, with the first few reasons (see :func:`native_stats`)."""

    REASONS = 20

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.native = 0
            self.fallbacks = 0
            self.reasons: Counter[str] = Counter()

    def read_natively(self) -> None:
        with self._lock:
            self.native += 1

    def fell_back(self, exc: BaseException) -> None:
        why = f"{type(exc).__name__}: {exc}"[:160]
        logger.debug("native HDF5 reader fell back to h5py: %s", why)
        fallbacks.count(f"h5native:{type(exc).__name__}")
        with self._lock:
            self.fallbacks += 1
            if why in self.reasons or len(self.reasons) < self.REASONS:
                self.reasons[why] += 1

    def as_dict(self) -> dict[str, Any]:
        with self._lock:
            return {"native": self.native, "fallbacks": self.fallbacks,
                    "reasons": dict(self.reasons)}


NATIVE_STATS = NativeStats()


def native_stats() -> dict[str, Any]:
    """``{"native": n, "fallbacks": n, "reasons": {reason: n}}`` for this process: records
    read without h5py, records read by h5py after the native reader gave up, and why."""
    return NATIVE_STATS.as_dict()
