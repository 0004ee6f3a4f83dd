"""The fin classifier's per-pixel features: local statistics of the aligned height grid, the
distance to the simulation, luminescence, position, and four columns in the registered frame
(position prior, deviation from the consensus surface, registered x and y).

The column order (the base features sorted by name, then :data:`REGISTERED`) is part of a
trained model: a model is valid only for this layout.

Each grid is made on its own and its temporaries are reused in place, and :func:`matrix` writes
the columns straight into the feature matrix: at most one full-size grid and its work arrays
live beside the matrix (the values are those of the straightforward expressions, bit for bit).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import numpy as np
from scipy import ndimage

from guideloom.preprocess.pointcloud.registration import from_reference

logger = logging.getLogger(__name__)

REGISTERED = ("prior", "dd_dev", "reg_x", "reg_y")
BASE = tuple(sorted(("z_std_5", "z_std_11", "z_std_21", "z_range_5", "z_range_11",
                     "z_max_diff_5", "z_max_diff_11", "grad_mag", "surface_angle", "laplacian",
                     "sim_distance", "lumi_value", "lumi_std_5", "radial_distance",
                     "valid_neighbor_frac_5")))


def _masked(values: np.ndarray, invalid: np.ndarray) -> np.ndarray:
    out = values.astype(np.float32)
    out[invalid] = np.nan
    return out


def _std(grid: np.ndarray, size: int) -> np.ndarray:
    filled = np.nan_to_num(grid, nan=0.0)
    mean = ndimage.uniform_filter(filled, size=size)
    np.square(filled, out=filled)
    mean_sq = ndimage.uniform_filter(filled, size=size)
    del filled
    np.square(mean, out=mean)
    np.subtract(mean_sq, mean, out=mean_sq)
    del mean
    np.sqrt(np.clip(mean_sq, 0, None, out=mean_sq), out=mean_sq)
    return _masked(mean_sq, np.isnan(grid))


def _range(grid: np.ndarray, size: int) -> np.ndarray:
    invalid = np.isnan(grid)
    work = np.where(invalid, -np.inf, grid)
    spread = ndimage.maximum_filter(work, size=size)
    work[invalid] = np.inf
    spread -= ndimage.minimum_filter(work, size=size)
    del work
    spread[invalid] = np.nan
    spread[~np.isfinite(spread)] = np.nan
    return spread.astype(np.float32)


def _max_step(grid: np.ndarray, size: int) -> np.ndarray:
    filled = np.nan_to_num(grid, nan=0.0)
    up = ndimage.maximum_filter(filled, size=size)
    np.abs(np.subtract(filled, up, out=up), out=up)
    down = ndimage.minimum_filter(filled, size=size)
    np.abs(np.subtract(filled, down, out=down), out=down)
    del filled
    np.maximum(up, down, out=up)
    return _masked(up, np.isnan(grid))


def _grids(z_mm: np.ndarray, sim_distance: np.ndarray, lumi: np.ndarray, valid: np.ndarray
           ) -> Iterator[tuple[str, np.ndarray]]:
    """The base feature grids one after the other (see :func:`base_features`)."""
    invalid = np.isnan(z_mm)
    for size in (5, 11, 21):
        yield f"z_std_{size}", _std(z_mm, size)
    for size in (5, 11):
        yield f"z_range_{size}", _range(z_mm, size)
        yield f"z_max_diff_{size}", _max_step(z_mm, size)
    filled = np.nan_to_num(z_mm, nan=0.0)
    gy, gx = np.gradient(filled)
    del filled
    magnitude = np.hypot(gx, gy, out=gx).astype(np.float32)
    del gx, gy
    yield "grad_mag", _masked(magnitude, invalid)
    yield "surface_angle", _masked(np.degrees(np.arctan(magnitude)).astype(np.float32), invalid)
    del magnitude
    yield "laplacian", _masked(ndimage.laplace(np.nan_to_num(z_mm, nan=0.0)), invalid)
    yield "sim_distance", sim_distance.astype(np.float32)
    yield "lumi_value", lumi.astype(np.float32)
    yield "lumi_std_5", _std(lumi, 5)
    rows, cols = np.nonzero(valid)
    if rows.size:
        yy, xx = np.ogrid[: valid.shape[0], : valid.shape[1]]
        radial = np.hypot(yy - rows.mean(), xx - cols.mean()).astype(np.float32)
        radial[~valid] = np.nan
    else:
        radial = np.full(valid.shape, np.nan, dtype=np.float32)
    del rows, cols
    yield "radial_distance", radial
    yield "valid_neighbor_frac_5", _masked(
        ndimage.uniform_filter(valid.astype(np.float64), size=5).astype(np.float32), ~valid)


def base_features(z_mm: np.ndarray, sim_distance: np.ndarray, lumi: np.ndarray,
                  valid: np.ndarray) -> dict[str, np.ndarray]:
    """The base feature grids (float32, NaN off the surface) of one scan.

    Args:
        z_mm: Aligned heights in mm (float64, NaN off the surface).
        sim_distance: Distance of each aligned point to the simulation.
        lumi: Scaled luminescence (:func:`..grid.luminescence_grid`).
        valid: The surface mask.
    """
    return dict(_grids(z_mm, sim_distance, lumi, valid))


def base_matrix(grids: dict[str, np.ndarray], valid: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """``(rows of the valid pixels, names)``: the grids' values as float32 columns, sorted by
    name."""
    names = sorted(grids)
    matrix = np.empty((int(valid.sum()), len(names)), dtype=np.float32)
    for column, name in enumerate(names):
        matrix[:, column] = grids[name][valid]
    return matrix, names


def _registered(z_mm: np.ndarray, valid: np.ndarray, prior: np.ndarray, expected: np.ndarray,
                xf: tuple[int, float, float], dx_mm: float, dy_mm: float
                ) -> Iterator[np.ndarray]:
    """The registered columns (float64, the valid pixels) one after the other."""
    theta, dy, dx = xf
    yield from_reference(prior, theta, dy, dx)[valid]
    expected_here = from_reference(expected, theta, dy, dx)
    gy, gx = np.gradient(expected_here, dy_mm, dx_mm)
    np.add(1.0, np.square(gx, out=gx), out=gx)
    gx += np.square(gy, out=gy)
    del gy
    np.sqrt(gx, out=gx)
    deviation = np.subtract(np.nan_to_num(z_mm, nan=0.0), expected_here)
    del expected_here
    np.abs(deviation, out=deviation)
    deviation /= gx
    del gx
    yield deviation[valid]
    del deviation
    height, width = valid.shape
    position = np.empty((height, width))
    position[:] = np.arange(width, dtype=float)
    yield from_reference(position, theta, dy, dx)[valid]
    position[:] = np.arange(height, dtype=float)[:, None]
    yield from_reference(position, theta, dy, dx)[valid]


def registered_matrix(z_mm: np.ndarray, valid: np.ndarray, prior: np.ndarray, expected: np.ndarray,
                      xf: tuple[int, float, float], dx_mm: float, dy_mm: float) -> np.ndarray:
    """The four registered columns of the valid pixels (float32).

    ``dd_dev`` is the distance from the consensus surface along its normal (the surface's
    gradient uses the pitches ``dy_mm`` along rows and ``dx_mm`` along columns).
    """
    out = np.empty((int(valid.sum()), len(REGISTERED)), dtype=np.float32)
    for k, column in enumerate(_registered(z_mm, valid, prior, expected, xf, dx_mm, dy_mm)):
        out[:, k] = column
    return out


def matrix(z_mm: np.ndarray, sim_distance: np.ndarray, lumi: np.ndarray, valid: np.ndarray,
           prior: np.ndarray, expected: np.ndarray, xf: tuple[int, float, float],
           dx_mm: float, dy_mm: float) -> np.ndarray:
    """The classifier's ``(valid pixels, 26)`` float32 matrix (:data:`BASE` then
    :data:`REGISTERED`), each column written as soon as its grid is made.

    Args:
        z_mm: Aligned heights in mm (float32, NaN off the surface).
        sim_distance: Distance of each aligned point to the simulation (grid).
        lumi: Scaled luminescence (:func:`..grid.luminescence_grid`).
        valid: The surface mask.
        prior: The position prior in the reference frame (float64).
        expected: The consensus surface in the reference frame (float64).
        xf: The registration ``(theta, dy, dx)`` into the reference frame.
        dx_mm: Pitch along columns of the consensus surface's gradient.
        dy_mm: Pitch along rows.
    """
    out = np.empty((int(valid.sum()), len(BASE) + len(REGISTERED)), dtype=np.float32)
    for name, grid in _grids(z_mm.astype(np.float64), sim_distance, lumi, valid):
        out[:, BASE.index(name)] = grid[valid]
        del grid
    for k, column in enumerate(_registered(z_mm, valid, prior, expected, xf, dx_mm, dy_mm)):
        out[:, len(BASE) + k] = column
    return out
