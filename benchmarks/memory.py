"""What a piece of work adds to a process's memory over its idle state.

Two measures, taken separately (tracemalloc's bookkeeping would inflate the resident size):
the kernel's resident high-water mark (``VmHWM``), reset just before the work through
``/proc/self/clear_refs`` (Linux 4.0 and later), minus the resident size before it; and
tracemalloc's peak over the work (numpy reports its buffers to it; memory that C++ code such as
scipy's k-d trees allocates itself is not seen, so the resident figure is the one to judge).
"""

from __future__ import annotations

import logging
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)


def status() -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` of this process in bytes."""
    found = {}
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith(("VmRSS:", "VmHWM:")):
                key, value = line.split(":")
                found[key] = int(value.split()[0]) * 1024
    return found


@dataclass(frozen=True)
class Increment:
    """The resident size before a piece of work and the peak it added (bytes)."""

    baseline: int
    peak: int


def resident(work: Callable[[], Any]) -> tuple[Any, Increment]:
    """Run ``work``; its result and the resident peak it added over the size before it."""
    with open("/proc/self/clear_refs", "w", encoding="ascii") as fh:
        fh.write("5")  # VmHWM := VmRSS
    before = status()["VmRSS"]
    result = work()
    return result, Increment(before, status()["VmHWM"] - before)


def traced(work: Callable[[], Any]) -> tuple[Any, Increment]:
    """Run ``work`` under tracemalloc; its result and the traced peak over the traced size
    before it (the baseline is the resident size)."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        baseline = status()["VmRSS"]
        result = work()
        return result, Increment(baseline, tracemalloc.get_traced_memory()[1] - before)
    finally:
        if started:
            tracemalloc.stop()
