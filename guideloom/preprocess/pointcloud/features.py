"""The fin classifier's per-pixel features: local statistics of the aligned height grid, the
distance to the simulation, luminescence, position, and four columns in the registered frame
(position prior, deviation from the consensus surface, registered x and y).

The column order (the base features sorted by name, then :data:`REGISTERED`) is part of a
trained model: a model is valid only for this layout.
"""

from __future__ import annotations

import logging

import numpy as np
from scipy import ndimage

from guideloom.preprocess.pointcloud.registration import from_reference

logger = logging.getLogger(__name__)

REGISTERED = ("prior", "dd_dev", "reg_x", "reg_y")


def _masked(values: np.ndarray, invalid: np.ndarray) -> np.ndarray:
    out = values.astype(np.float32)
    out[invalid] = np.nan
    return out


def _std(grid: np.ndarray, size: int) -> np.ndarray:
    mean = ndimage.uniform_filter(np.nan_to_num(grid, nan=0.0), size=size)
    mean_sq = ndimage.uniform_filter(np.nan_to_num(grid**2, nan=0.0), size=size)
    return _masked(np.sqrt(np.clip(mean_sq - mean**2, 0, None)), np.isnan(grid))


def _range(grid: np.ndarray, size: int) -> np.ndarray:
    invalid = np.isnan(grid)
    spread = (ndimage.maximum_filter(np.where(invalid, -np.inf, grid), size=size)
              - ndimage.minimum_filter(np.where(invalid, np.inf, grid), size=size))
    spread[invalid] = np.nan
    spread[~np.isfinite(spread)] = np.nan
    return spread.astype(np.float32)


def _max_step(grid: np.ndarray, size: int) -> np.ndarray:
    filled = np.nan_to_num(grid, nan=0.0)
    up = np.abs(filled - ndimage.maximum_filter(filled, size=size))
    down = np.abs(filled - ndimage.minimum_filter(filled, size=size))
    return _masked(np.maximum(up, down), np.isnan(grid))


def base_features(z_mm: np.ndarray, sim_distance: np.ndarray, lumi: np.ndarray,
                  valid: np.ndarray) -> dict[str, np.ndarray]:
    """The base feature grids (float32, NaN off the surface) of one scan.

    Args:
        z_mm: Aligned heights in mm (float64, NaN off the surface).
        sim_distance: Distance of each aligned point to the simulation.
        lumi: Scaled luminescence (:func:`..grid.luminescence_grid`).
        valid: The surface mask.
    """
    invalid = np.isnan(z_mm)
    out: dict[str, np.ndarray] = {}
    for size in (5, 11, 21):
        out[f"z_std_{size}"] = _std(z_mm, size)
    for size in (5, 11):
        out[f"z_range_{size}"] = _range(z_mm, size)
        out[f"z_max_diff_{size}"] = _max_step(z_mm, size)
    gy, gx = np.gradient(np.nan_to_num(z_mm, nan=0.0))
    magnitude = np.hypot(gx, gy).astype(np.float32)
    out["grad_mag"] = _masked(magnitude, invalid)
    out["surface_angle"] = _masked(np.degrees(np.arctan(magnitude)).astype(np.float32), invalid)
    out["laplacian"] = _masked(ndimage.laplace(np.nan_to_num(z_mm, nan=0.0)), invalid)
    out["sim_distance"] = sim_distance.astype(np.float32)
    out["lumi_value"] = lumi.astype(np.float32)
    out["lumi_std_5"] = _std(lumi, 5)
    rows, cols = np.nonzero(valid)
    if rows.size:
        yy, xx = np.mgrid[: valid.shape[0], : valid.shape[1]]
        radial = np.hypot(yy - rows.mean(), xx - cols.mean()).astype(np.float32)
        radial[~valid] = np.nan
    else:
        radial = np.full(valid.shape, np.nan, dtype=np.float32)
    out["radial_distance"] = radial
    out["valid_neighbor_frac_5"] = _masked(
        ndimage.uniform_filter(valid.astype(np.float64), size=5).astype(np.float32), ~valid)
    return out


def base_matrix(grids: dict[str, np.ndarray], valid: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """``(rows of the valid pixels, names)``: the grids' values as float32 columns, sorted by
    name."""
    names = sorted(grids)
    matrix = np.empty((int(valid.sum()), len(names)), dtype=np.float32)
    for column, name in enumerate(names):
        matrix[:, column] = grids[name][valid]
    return matrix, names


def registered_matrix(z_mm: np.ndarray, valid: np.ndarray, prior: np.ndarray, expected: np.ndarray,
                      xf: tuple[int, float, float], dx_mm: float, dy_mm: float) -> np.ndarray:
    """The four registered columns of the valid pixels (float32).

    ``dd_dev`` is the distance from the consensus surface along its normal (the surface's
    gradient uses the pitches ``dy_mm`` along rows and ``dx_mm`` along columns).
    """
    theta, dy, dx = xf
    expected_here = from_reference(expected, theta, dy, dx)
    gy, gx = np.gradient(expected_here, dy_mm, dx_mm)
    deviation = (np.abs(np.nan_to_num(z_mm, nan=0.0) - expected_here)
                 / np.sqrt(1.0 + gx**2 + gy**2))
    height, width = valid.shape
    yy, xx = np.mgrid[0:height, 0:width].astype(float)
    columns = (from_reference(prior, theta, dy, dx), deviation,
               from_reference(xx, theta, dy, dx), from_reference(yy, theta, dy, dx))
    return np.column_stack([c[valid] for c in columns]).astype(np.float32)
