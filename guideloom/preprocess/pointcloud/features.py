"""The fin classifier's per-pixel features: local statistics of the aligned height grid, the
distance to the simulation, luminescence, position, and four columns in the registered frame
(position prior, deviation from the consensus surface, registered x and y).

The column order (the base features sorted by name, then :data:`REGISTERED`) is part of a
trained model: a model is valid only for this layout.

:func:`base_features` and :func:`registered_matrix` make the whole scan's grids at once (training
uses them). A worker classifying a scan uses :func:`strips` instead: the base features of
:data:`STRIP_PIXELS` pixels at a time (whole rows), so neither the full-size float64 work grids
nor the whole feature matrix ever exist. The strips' values are the whole grid's, bit for bit:
the local filters (range, steps, gradient, Laplacian) see :data:`HALO` rows of the neighbouring
strips, and the box means of the standard deviations and the valid share carry scipy's running
column sums from strip to strip (:class:`_ColumnMeans`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from functools import partial

import numpy as np
from scipy import ndimage

from guideloom.preprocess.pointcloud.registration import from_reference_of

logger = logging.getLogger(__name__)

REGISTERED = ("prior", "dd_dev", "reg_x", "reg_y")
BASE = tuple(sorted(("z_std_5", "z_std_11", "z_std_21", "z_range_5", "z_range_11",
                     "z_max_diff_5", "z_max_diff_11", "grad_mag", "surface_angle", "laplacian",
                     "sim_distance", "lumi_value", "lumi_std_5", "radial_distance",
                     "valid_neighbor_frac_5")))


#: Pixels (whole rows) whose base features are made at once by :func:`strips`.
STRIP_PIXELS = 1 << 16
#: Rows of the neighbouring strips the local filters see (half the largest range/step window).
HALO = 11 // 2


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


def _fill(column: np.ndarray, grid: np.ndarray, valid: np.ndarray) -> None:
    """``column[:] = grid[valid]``, :data:`STRIP_PIXELS` pixels (whole rows) at a time: no
    temporary of all the valid pixels."""
    step = max(1, STRIP_PIXELS // max(valid.shape[1], 1))
    done = 0
    for top in range(0, valid.shape[0], step):
        values = grid[top:top + step][valid[top:top + step]]
        column[done:done + len(values)] = values
        done += len(values)


def _deviation(column: np.ndarray, z_mm: np.ndarray, expected: np.ndarray, valid: np.ndarray,
               dx_mm: float, dy_mm: float) -> None:
    """``dd_dev`` of the valid pixels into ``column``: ``|z - expected|`` over the consensus
    surface's slope norm ``sqrt(1 + gx**2 + gy**2)``, strip by strip (whole rows).

    The gradient along the rows is local to a row; the one along the columns (central
    differences inside, one-sided at the grid's first and last rows) sees one row of the
    neighbouring strips, so the values are the whole grid's, bit for bit.
    """
    height, width = valid.shape
    step = max(1, STRIP_PIXELS // max(width, 1))
    done = 0
    for top in range(0, height, step):
        bottom = min(top + step, height)
        low, high = max(0, top - 1), min(height, bottom + 1)
        norm = np.gradient(expected[top:bottom], dx_mm, axis=1)
        np.add(1.0, np.square(norm, out=norm), out=norm)
        gy = np.gradient(expected[low:high], dy_mm, axis=0)[top - low:bottom - low]
        norm += np.square(gy, out=gy)
        del gy
        np.sqrt(norm, out=norm)
        deviation = np.subtract(np.nan_to_num(z_mm[top:bottom], nan=0.0), expected[top:bottom])
        np.abs(deviation, out=deviation)
        deviation /= norm
        del norm
        values = deviation[valid[top:bottom]]
        column[done:done + len(values)] = values
        done += len(values)


def _ramp(shape: tuple[int, int], axis: int) -> np.ndarray:
    """A float64 grid of each pixel's column (``axis=1``) or row (``axis=0``) number."""
    position = np.empty(shape)
    if axis == 1:
        position[:] = np.arange(shape[1], dtype=float)
    else:
        position[:] = np.arange(shape[0], dtype=float)[:, None]
    return position


def registered_matrix(z_mm: np.ndarray, valid: np.ndarray, prior: np.ndarray, expected: np.ndarray,
                      xf: tuple[int, float, float], dx_mm: float, dy_mm: float) -> np.ndarray:
    """The four registered columns of the valid pixels (float32); ``prior``, ``expected`` and
    the position grids are made float64 and moved into the scan's frame one at a time, each
    freed once moved (:func:`..registration.from_reference_of`).

    ``dd_dev`` is the distance from the consensus surface along its normal (the surface's
    gradient uses the pitches ``dy_mm`` along rows and ``dx_mm`` along columns).
    """
    theta, dy, dx = xf
    out = np.empty((int(valid.sum()), len(REGISTERED)), dtype=np.float32)
    _fill(out[:, 0], from_reference_of(lambda: np.asarray(prior, dtype=np.float64),
                                       theta, dy, dx), valid)
    expected_here = from_reference_of(lambda: np.asarray(expected, dtype=np.float64),
                                      theta, dy, dx)
    _deviation(out[:, 1], z_mm, expected_here, valid, dx_mm, dy_mm)
    del expected_here
    for column, axis in ((2, 1), (3, 0)):
        _fill(out[:, column], from_reference_of(partial(_ramp, valid.shape, axis), theta, dy, dx),
              valid)
    return out


def _reflect(index: np.ndarray, length: int) -> np.ndarray:
    """Rows ``index`` of a line extended as scipy's ``mode='reflect'`` does (d c b a | a b c d |
    d c b a), for any distance past the ends."""
    index = np.mod(index, 2 * length)
    return np.where(index < length, index, 2 * length - 1 - index)


class _ColumnMeans:
    """The first pass of ``scipy.ndimage.uniform_filter`` (along the columns, ``reflect``),
    made strip after strip with its running sums carried over.

    scipy keeps one undivided sum per column (the first window added row by row, then
    ``sum += entering - leaving``) and writes each row as ``sum / size`` in the input's dtype;
    the same operations in the same order here give the same values bit for bit
    (tests/test_preprocess_pointcloud.py compares them).

    Args:
        rows: ``rows(index)`` → the filter's input at those rows, as float64.
        height: Rows of the whole grid.
        size: The window.
        dtype: The input's dtype (the pass's output dtype).
    """

    def __init__(self, rows: Callable[[np.ndarray], np.ndarray], height: int, size: int,
                 dtype: type[np.floating]) -> None:
        self._rows, self._height, self._size, self._dtype = rows, height, size, dtype
        self._sum: np.ndarray | None = None
        self._next = 0

    def upto(self, stop: int) -> np.ndarray:
        """The pass's rows from where the last call stopped up to ``stop``."""
        size, half = self._size, self._size // 2
        start = self._next
        self._next = stop
        head: np.ndarray | None = None
        if self._sum is None:
            total = np.zeros(self._rows(np.zeros(0, dtype=np.intp)).shape[1])
            for row in self._rows(_reflect(np.arange(-half, size - half), self._height)):
                total += row
            self._sum = total
            head = (total / size)[None, :]
            start += 1
        index = np.arange(start, stop)
        if len(index):
            steps = self._rows(_reflect(index + (size - 1 - half), self._height))
            steps -= self._rows(_reflect(index - (1 + half), self._height))
            steps[0] += self._sum
            np.cumsum(steps, axis=0, out=steps)
            self._sum = steps[-1].copy()
            steps /= size
            body = steps if head is None else np.concatenate([head, steps])
        else:
            assert head is not None
            body = head
        return body.astype(self._dtype, copy=False)


def _std_of(means: _ColumnMeans, squares: _ColumnMeans, stop: int, size: int,
            invalid: np.ndarray) -> np.ndarray:
    """:func:`_std` of one strip from the column passes of its values and their squares."""
    mean = ndimage.uniform_filter1d(means.upto(stop), size, axis=1)
    mean_sq = ndimage.uniform_filter1d(squares.upto(stop), size, axis=1)
    np.square(mean, out=mean)
    np.subtract(mean_sq, mean, out=mean_sq)
    del mean
    np.sqrt(np.clip(mean_sq, 0, None, out=mean_sq), out=mean_sq)
    return _masked(mean_sq, invalid)


def _strip_grids(z_mm: np.ndarray, sim_distance: np.ndarray, lumi: np.ndarray,
                 valid: np.ndarray, top: int, bottom: int, sums: dict[str, _ColumnMeans],
                 centre: tuple[float, float] | None) -> Iterator[tuple[str, np.ndarray]]:
    """The base feature grids of rows ``top:bottom`` (:func:`_grids`' values)."""
    height = valid.shape[0]
    low, high = max(0, top - HALO), min(height, bottom + HALO)
    inner = slice(top - low, bottom - low)
    around = z_mm[low:high].astype(np.float64)
    invalid = np.isnan(around[inner])
    for size in (5, 11, 21):
        yield f"z_std_{size}", _std_of(sums[f"z_{size}"], sums[f"z2_{size}"], bottom, size,
                                       invalid)
    for size in (5, 11):
        yield f"z_range_{size}", _range(around, size)[inner]
        yield f"z_max_diff_{size}", _max_step(around, size)[inner]
    filled = np.nan_to_num(around, nan=0.0)
    del around
    gy, gx = (np.asarray(g)[inner] for g in np.gradient(filled))
    magnitude = np.hypot(gx, gy).astype(np.float32)
    del gx, gy
    yield "grad_mag", _masked(magnitude, invalid)
    yield "surface_angle", _masked(np.degrees(np.arctan(magnitude)).astype(np.float32), invalid)
    del magnitude
    yield "laplacian", _masked(ndimage.laplace(filled)[inner], invalid)
    del filled
    yield "sim_distance", sim_distance[top:bottom].astype(np.float32)
    yield "lumi_value", lumi[top:bottom].astype(np.float32)
    yield "lumi_std_5", _std_of(sums["lumi"], sums["lumi2"], bottom, 5,
                                np.isnan(lumi[top:bottom]))
    here = valid[top:bottom]
    if centre is not None:
        yy, xx = np.ogrid[top:bottom, : valid.shape[1]]
        radial = np.hypot(yy - centre[0], xx - centre[1]).astype(np.float32)
        radial[~here] = np.nan
    else:
        radial = np.full(here.shape, np.nan, dtype=np.float32)
    yield "radial_distance", radial
    yield "valid_neighbor_frac_5", _masked(
        ndimage.uniform_filter1d(sums["valid"].upto(bottom), 5, axis=1).astype(np.float32),
        ~here)


def _centre(valid: np.ndarray) -> tuple[float, float] | None:
    """The mean row and column of the valid pixels (``np.nonzero(valid)``'s means: the integer
    sums are exact in float64), None without any."""
    count = int(valid.sum())
    if count == 0:
        return None
    per_row, per_col = valid.sum(axis=1), valid.sum(axis=0)
    rows = int(per_row @ np.arange(len(per_row), dtype=np.int64))
    cols = int(per_col @ np.arange(len(per_col), dtype=np.int64))
    return float(np.float64(rows) / count), float(np.float64(cols) / count)


def strips(z_mm: np.ndarray, sim_distance: np.ndarray, lumi: np.ndarray, valid: np.ndarray,
           registered: np.ndarray, strip_pixels: int | None = None) -> Iterator[np.ndarray]:
    """The classifier's ``(valid pixels, 26)`` float32 matrix (:data:`BASE` then
    :data:`REGISTERED`) in strips of whole rows, about ``strip_pixels`` pixels each (default
    :data:`STRIP_PIXELS`), top to bottom: stacked, the strips are the whole scan's matrix.

    Args:
        z_mm: Aligned heights in mm (float32, NaN off the surface).
        sim_distance: Distance of each aligned point to the simulation (grid).
        lumi: Scaled luminescence (:func:`..grid.luminescence_grid`).
        valid: The surface mask.
        registered: :func:`registered_matrix` of the scan.
        strip_pixels: Pixels per strip (at least one row).
    """
    height, width = valid.shape
    step = max(1, (strip_pixels or STRIP_PIXELS) // max(width, 1))

    def heights(index: np.ndarray) -> np.ndarray:
        return np.nan_to_num(z_mm[index].astype(np.float64), nan=0.0)

    def squared(index: np.ndarray) -> np.ndarray:
        return np.square(heights(index))

    def lumis(index: np.ndarray) -> np.ndarray:
        return np.nan_to_num(lumi[index], nan=0.0).astype(np.float64)

    def lumis_squared(index: np.ndarray) -> np.ndarray:
        return np.square(np.nan_to_num(lumi[index], nan=0.0)).astype(np.float64)

    def valids(index: np.ndarray) -> np.ndarray:
        return valid[index].astype(np.float64)

    sums = {"lumi": _ColumnMeans(lumis, height, 5, lumi.dtype.type),
            "lumi2": _ColumnMeans(lumis_squared, height, 5, lumi.dtype.type),
            "valid": _ColumnMeans(valids, height, 5, np.float64)}
    for size in (5, 11, 21):
        sums[f"z_{size}"] = _ColumnMeans(heights, height, size, np.float64)
        sums[f"z2_{size}"] = _ColumnMeans(squared, height, size, np.float64)
    centre = _centre(valid)
    done = 0
    for top in range(0, height, step):
        bottom = min(top + step, height)
        here = valid[top:bottom]
        count = int(here.sum())
        out = np.empty((count, len(BASE) + len(REGISTERED)), dtype=np.float32)
        for name, values in _strip_grids(z_mm, sim_distance, lumi, valid, top, bottom, sums,
                                         centre):
            out[:, BASE.index(name)] = values[here]
            del values
        out[:, len(BASE):] = registered[done:done + count]
        done += count
        yield out
