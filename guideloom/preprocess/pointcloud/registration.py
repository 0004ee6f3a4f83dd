"""Silhouette registration of a scan into the common frame of its group's labelled scans (the
frame of the position prior and the consensus surface): a rotation sweep of -8..8 degrees in
2-degree steps plus a centroid shift, scored by intersection over union at a quarter resolution."""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np
from scipy import ndimage

logger = logging.getLogger(__name__)

FACTOR = 4
ANGLES = range(-8, 9, 2)


def _centroid(mask: np.ndarray) -> tuple[float, float]:
    rows, cols = np.nonzero(mask)
    return float(rows.mean()), float(cols.mean())


def register(valid: np.ndarray, reference: np.ndarray) -> tuple[int, float, float]:
    """``(theta in degrees, dy, dx)`` (full-resolution pixels) that best map the silhouette
    ``valid`` onto ``reference`` (a silhouette already taken every :data:`FACTOR` pixels).

    Raises:
        ValueError: ``valid`` is empty at the search resolution.
    """
    small = valid[::FACTOR, ::FACTOR].astype(np.float32)
    ref_y, ref_x = _centroid(reference)
    best: tuple[float, int, float, float] | None = None
    for theta in ANGLES:
        turned = ndimage.rotate(small, theta, reshape=False, order=0) > 0.5
        if not turned.any():
            continue
        cy, cx = _centroid(turned)
        dy, dx = ref_y - cy, ref_x - cx
        moved = ndimage.shift(turned.astype(np.float32), (dy, dx), order=0) > 0.5
        union = int((moved | reference).sum())
        score = float((moved & reference).sum() / union) if union else 0.0
        if best is None or score > best[0]:
            best = (score, theta, dy * FACTOR, dx * FACTOR)
    if best is None:
        raise ValueError("the scan's silhouette is empty")
    return best[1], best[2], best[3]


def to_reference(grid: np.ndarray, theta: int, dy: float, dx: float, order: int = 0) -> np.ndarray:
    """A full-resolution grid moved into the reference frame (rotated, then shifted)."""
    turned = ndimage.rotate(grid.astype(np.float64), theta, reshape=False, order=order)
    return np.asarray(ndimage.shift(turned, (dy, dx), order=order))


def from_reference(grid: np.ndarray, theta: int, dy: float, dx: float) -> np.ndarray:
    """A reference-frame grid moved back into a scan's frame (the inverse of
    :func:`to_reference`)."""
    return from_reference_of(lambda: grid, theta, dy, dx)


def from_reference_of(make: Callable[[], np.ndarray], theta: int, dy: float, dx: float
                      ) -> np.ndarray:
    """:func:`from_reference` of the grid ``make()`` returns, which is freed once shifted
    (before the rotation) when nothing else holds it: two full-size grids at once, not three."""
    shifted = ndimage.shift(make(), (-dy, -dx), order=1)
    return np.asarray(ndimage.rotate(shifted, -theta, reshape=False, order=1))
