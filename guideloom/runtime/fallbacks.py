"""Counts of the silent fallbacks this process took (fast read path → h5py, ``O_DIRECT``
refused, a slower inflate back end), for ``export.json``'s ``fallbacks`` mapping.

Where a fallback happens, the code logs it at DEBUG and calls :func:`count`; an export adds the
counts its tasks saw (:func:`snapshot` before and after, :func:`since`)::

    from guideloom.runtime import fallbacks
    fallbacks.count("fastread:h5py")
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Mapping

__all__ = ["count", "since", "snapshot", "total"]

_lock = threading.Lock()
_counts: Counter[str] = Counter()


def count(name: str, n: int = 1) -> None:
    """Record ``n`` more fallbacks of kind ``name`` (``"area:what"``, e.g. ``"fastread:h5py"``)."""
    with _lock:
        _counts[name] += n


def snapshot() -> dict[str, int]:
    """Fallbacks of this process so far, by kind."""
    with _lock:
        return dict(_counts)


def since(before: Mapping[str, int]) -> dict[str, int]:
    """Fallbacks taken after ``before`` (a :func:`snapshot`), by kind; kinds with none left out."""
    now = snapshot()
    return {k: v - before.get(k, 0) for k, v in sorted(now.items()) if v > before.get(k, 0)}


def total(parts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """The sum of several counts (one per partition summary), by kind."""
    summed: Counter[str] = Counter()
    for part in parts:
        summed.update({str(k): int(v) for k, v in part.items()})
    return dict(sorted(summed.items()))
