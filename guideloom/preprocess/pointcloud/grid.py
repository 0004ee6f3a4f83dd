"""A raw scan grid to calibrated points: the luminescence mask, the calibration, the packed
luminescence of the processed file."""

from __future__ import annotations

import logging

import numpy as np
from scipy import ndimage

logger = logging.getLogger(__name__)

#: The scanner's calibration in rddac 2.0 (its ``calibration.json``): mm per pixel along x
#: (9 mm block = 117 px), mm per line along y (the fixed line spacing), mm per raw z unit.
X_MM_PER_PIXEL = 9.0 / 117.0
Y_MM_PER_PIXEL = 0.1581
Z_MM_PER_UNIT = 0.007754506005746317


def surface_mask(lumi: np.ndarray, z: np.ndarray, min_patch_size: int) -> np.ndarray:
    """Pixels on a lit patch of at least ``min_patch_size`` pixels (4-connected) with ``z > 0``."""
    lit = lumi > 0
    labels, n = ndimage.label(lit)
    if n == 0:
        return np.zeros(lumi.shape, dtype=bool)
    sizes = np.bincount(labels.ravel(), minlength=n + 1)
    keep = sizes >= min_patch_size
    keep[0] = False
    return keep[labels] & (z > 0)


def scan_points(z: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """``(N, 3)`` float64 points in mm of the valid pixels (row-major order), x and y centred on
    the valid pixels' centroid, z on its mean."""
    points = np.empty((int(valid.sum()), 3))
    _calibrate(z, valid, points[:, 0], points[:, 1], points[:, 2])
    return points


def scan_columns(z: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`scan_points`' values as ``(xy, heights)``: a contiguous ``(N, 2)`` array of x
    and y (what a k-d tree in the plane reads without a copy) and the ``(N,)`` heights."""
    count = int(valid.sum())
    xy, heights = np.empty((count, 2)), np.empty(count)
    _calibrate(z, valid, xy[:, 0], xy[:, 1], heights)
    return xy, heights


def _calibrate(z: np.ndarray, valid: np.ndarray, x: np.ndarray, y: np.ndarray,
               heights: np.ndarray) -> None:
    """Write the valid pixels' calibrated x, y and z (centred) into the three columns."""
    rows, cols = np.nonzero(valid)
    x[:] = (cols - cols.astype(float).mean()) * X_MM_PER_PIXEL
    y[:] = (rows - rows.astype(float).mean()) * Y_MM_PER_PIXEL
    del rows, cols
    raw = z[valid].astype(np.float64) * Z_MM_PER_UNIT
    heights[:] = raw - raw.mean()


def packed_luminescence(lumi: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """The processed ``uint8`` luminescence: 0 off the surface, the valid values scaled to
    1..255."""
    out = np.zeros(lumi.shape, dtype=np.uint8)
    values = lumi[valid].astype(np.float64)
    if values.size == 0:
        return out
    low, high = float(values.min()), float(values.max())
    span = high - low if high > low else 1.0
    out[valid] = np.clip(np.round((values - low) / span * 254.0) + 1, 1, 255).astype(np.uint8)
    return out


def luminescence_grid(lumi: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """The classifier's luminescence feature: valid values min-max scaled to 0..255, NaN
    elsewhere."""
    out = np.full(lumi.shape, np.nan, dtype=np.float32)
    values = lumi[valid].astype(np.float64)
    if values.size == 0:
        return out
    low, high = float(values.min()), float(values.max())
    scaled = (values - low) / (high - low) * 255.0 if high > low else values
    out[valid] = scaled.astype(np.float32)
    return out


def on_grid(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    """A float32 grid holding ``values`` at the valid pixels and NaN elsewhere."""
    out = np.full(valid.shape, np.nan, dtype=np.float32)
    out[valid] = values.astype(np.float32)
    return out
