"""The oil-film stage: raw ``oil_thickness/data`` → one value per integer millimetre 0..199.

1. Rows without a position are dropped; positions are rounded to whole millimetres and those
   at or beyond ``max_sensor_position`` (edge artefacts) dropped.
2. Sensor dropouts (NaN values) are removed before the filter, so they cannot poison it.
3. A Hampel filter over position windows (``|p_j - p_i| <= hampel_window`` mm): a value further
   than ``hampel_k`` robust sigmas (1.4826 MAD) from its window's median is an outlier. Where
   the MAD is 0 (a flat, quantised stretch) the scale is the mean absolute deviation
   (times sqrt(pi/2)), at least one logging step ``value_quantization``.
4. Repeated positions are averaged; the integer grid is filled by linear interpolation and
   the ends by the nearest value.

Equal to rddac 2.0's values ``float32`` for ``float32``: the same order of rows (numpy's
quicksort of the positions), the same medians, and the group means summed with Kahan
compensation in row order, as its table library does.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

GROUP = "oil_thickness"
COLUMNS = ("sensor_position", "oil_value")
UNITS = ("mm", "g/m^2")
DEFAULTS: dict[str, Any] = {"max_sensor_position": 200, "output_length": 200,
                            "hampel_window": 5, "hampel_k": 3.0, "value_quantization": 0.01}
MAD_SIGMA = 1.4826
MEAN_ABS_SIGMA = 1.2533  # sqrt(pi/2): the mean absolute deviation as a sigma


def _row_medians(rows: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The median of each row's first ``lengths[i]`` values (the rest padded with +inf), as
    ``np.median`` computes it (the middle value, or the mean of the two middle ones)."""
    ordered = np.sort(rows, axis=1)
    index = np.arange(len(rows))
    half = lengths // 2
    upper = ordered[index, half]
    lower = ordered[index, np.maximum(half - 1, 0)]
    return np.where(lengths % 2 == 1, upper, (lower + upper) / 2)


def hampel_outliers(positions: np.ndarray, values: np.ndarray, window: int, k: float,
                    quantization: float) -> np.ndarray:
    """The outlier mask of a traverse sorted by position (see the module docstring).

    Args:
        positions: Integer positions, ascending.
        values: The values (no NaN), in the same order.
        window: Half-window in position units.
        k: Threshold in robust sigmas.
        quantization: The smallest scale of a flat window.

    Returns:
        ``True`` where a value is an outlier.
    """
    n = len(values)
    if n == 0:
        return np.zeros(0, dtype=bool)
    # rows at the same position share their window: each window's median and scale once, in
    # blocks of windows of at most ~n cells (the padded window matrix is never n x width)
    first = np.flatnonzero(np.r_[True, positions[1:] != positions[:-1]])
    lo = np.searchsorted(positions, positions[first] - window, side="left")
    hi = np.searchsorted(positions, positions[first] + window, side="right")
    lengths = hi - lo
    width = int(lengths.max())
    medians = np.empty(len(first))
    scale = np.empty(len(first))
    step = max(1, n // width)
    for start in range(0, len(first), step):
        part = slice(start, start + step)
        take = lo[part, None] + np.arange(width)[None, :]
        inside = take < hi[part, None]
        rows = np.where(inside, values[np.minimum(take, n - 1)], np.inf)
        del take
        medians[part] = _row_medians(rows, lengths[part])
        deviations = np.where(inside, np.abs(rows - medians[part, None]), np.inf)
        del rows, inside
        scale[part] = MAD_SIGMA * _row_medians(deviations, lengths[part])
    for i in np.flatnonzero(scale == 0):  # the mean in the window's own order, as np.mean sums
        mean = float(np.mean(np.abs(values[lo[i]:hi[i]] - medians[i])))
        scale[i] = max(MEAN_ABS_SIGMA * mean, quantization)
    which = np.repeat(np.arange(len(first)), np.diff(np.r_[first, n]))
    return np.abs(values - medians[which]) > k * scale[which]


def group_means(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The mean of the values of each key (keys ascending), each sum Kahan-compensated in row
    order."""
    order = np.argsort(keys, kind="stable")
    keys, values = keys[order], values[order]
    unique, first, counts = np.unique(keys, return_index=True, return_counts=True)
    total = np.zeros(len(unique))
    compensation = np.zeros(len(unique))
    rank = np.arange(len(keys)) - np.repeat(first, counts)
    group = np.repeat(np.arange(len(unique)), counts)
    for r in range(int(counts.max()) if len(counts) else 0):
        at = rank == r
        g = group[at]
        y = values[at] - compensation[g]
        t = total[g] + y
        c = t - total[g] - y
        compensation[g] = np.where(np.isnan(c), 0.0, c)
        total[g] = t
    return unique, total / counts


def process(data: np.ndarray, params: Mapping[str, Any]) -> tuple[np.ndarray, dict[str, Any]]:
    """One experiment's oil table, processed.

    Args:
        data: The raw ``(n, 2)`` table ``[sensor_position, oil_value]``.
        params: ``max_sensor_position``, ``output_length``, ``hampel_window``, ``hampel_k``,
            ``value_quantization``.

    Returns:
        ``(table, attrs)``: ``(min(output_length, max_sensor_position), 2)`` ``float32`` on the
        integer grid, and the cleaning statistics and parameters to record beside it.

    Raises:
        ValueError: The table is not ``(n, 2)``, or a position is infinite.
    """
    table = np.array(data, dtype=np.float64)
    if table.ndim != 2 or table.shape[1] != 2:
        raise ValueError(f"oil table of shape {table.shape}, expected (n, 2)")
    limit = params["max_sensor_position"]
    table = table[~np.isnan(table[:, 0])]
    if not np.isfinite(table[:, 0]).all():
        raise ValueError("oil table has an infinite sensor position")
    pos = np.round(table[:, 0]).astype(np.int64)
    keep = pos < limit
    pos, values = pos[keep], table[keep, 1]
    n_in_range = len(pos)
    dropout = np.isnan(values)
    pos, values = pos[~dropout], values[~dropout]
    order = np.argsort(pos, kind="quicksort")
    pos, values = pos[order], values[order]
    outlier = hampel_outliers(pos, values, params["hampel_window"], params["hampel_k"],
                              params["value_quantization"])
    keys, means = group_means(pos[~outlier], values[~outlier])
    grid = np.arange(limit)
    on_grid = np.full(len(grid), np.nan)
    inside = (keys >= 0) & (keys < limit)
    on_grid[keys[inside]] = means[inside]
    known = ~np.isnan(on_grid)
    n_interpolated = int(len(grid) - known.sum())
    if known.any() and not known.all():
        on_grid[~known] = np.interp(grid[~known], grid[known], on_grid[known])
    out = np.column_stack([grid, on_grid])[:params["output_length"]]
    attrs = {"n_raw_in_range": n_in_range, "n_nan_removed": int(dropout.sum()),
             "n_hampel_outliers": int(outlier.sum()), "n_positions_interpolated": n_interpolated,
             **{key: params[key] for key in DEFAULTS}}
    return out.astype(np.float32), attrs
