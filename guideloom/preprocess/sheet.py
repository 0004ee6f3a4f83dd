"""The sheet-thickness stage: raw ``sheet_thickness/data`` → its last traverse positions.

The last ``last_n`` rows are kept (the stable sensor region), positions start at 0, negative
thickness values (the sensor's error codes where it lost contact) become NaN (masked, never
interpolated), thickness is quantised to 0.01 um and position to 0.01 mm. Equal to rddac 2.0's
values, ``float32`` for ``float32``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

GROUP = "sheet_thickness"
COLUMNS = ("sensor_position", "sheet_thickness")
UNITS = ("mm", "um")
THICKNESS_PRECISION_UM = 0.01
POSITION_PRECISION_MM = 0.01
DEFAULTS: dict[str, Any] = {"last_n": 200}


def _quantise(x: np.ndarray, step: float) -> np.ndarray:
    return np.round(np.round(x / step) * step, 2)


def process(data: np.ndarray, params: Mapping[str, Any]) -> tuple[np.ndarray, dict[str, Any]]:
    """One experiment's sheet-thickness table, processed.

    Args:
        data: The raw ``(n, 2)`` table ``[sensor_position, sheet_thickness]``.
        params: ``last_n``, the trailing rows kept.

    Returns:
        ``(table, attrs)``: at most ``last_n`` rows of ``float32``, and the counts and
        parameters to record beside it.

    Raises:
        ValueError: The table is not ``(n, 2)``.
    """
    table = np.array(data, dtype=np.float64)
    if table.ndim != 2 or table.shape[1] != 2:
        raise ValueError(f"sheet-thickness table of shape {table.shape}, expected (n, 2)")
    last_n = params["last_n"]
    n_raw = table.shape[0]
    table = table[max(0, n_raw - int(last_n)):]
    pos, thick = table[:, 0], table[:, 1]
    finite = pos[~np.isnan(pos)]
    pos = pos - (finite.min() if finite.size else np.nan)
    negative = thick < 0
    thick = np.where(negative, np.nan, thick)
    out = np.column_stack([_quantise(pos, POSITION_PRECISION_MM),
                           _quantise(thick, THICKNESS_PRECISION_UM)])
    attrs = {"n_raw_rows": n_raw, "n_rows": int(table.shape[0]),
             "n_negative_masked": int(negative.sum()), "last_n": last_n}
    return out.astype(np.float32), attrs
