"""The force stage: raw ``force/data`` trimmed to the forming window, the rest offset removed.

Each raw column is kept in its order (the published ``force-curve`` field map stays valid).
The rows with ``start < time <= end`` are kept (``(600, 8)`` at 300 Hz with the defaults); time
is re-zeroed to the first kept sample and rounded to 4 decimals; the load cells and the total
force lose their rest offset (the absolute value of their minimum in the window, the
blankholder preload) and are rounded to 0.01 kN; the punch temperature is rounded to 0.1 degC
and the punch position quantised to ``position_precision_mm``. The values equal rddac 2.0's
``float32`` for ``float32`` (its reference recipe, reimplemented on numpy).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

GROUP = "force"
COLUMNS = ("time", "load_cell_1", "load_cell_2", "load_cell_3", "load_cell_4", "punch_temp",
           "punch_pos", "total_force")
UNITS_BY_COLUMN = {"time": "s", "load_cell_1": "kN", "load_cell_2": "kN", "load_cell_3": "kN",
                   "load_cell_4": "kN", "punch_temp": "degC", "punch_pos": "mm",
                   "total_force": "kN"}
#: The columns whose rest offset is removed (in this order).
SIGNALS = ("load_cell_1", "load_cell_2", "load_cell_3", "load_cell_4", "total_force")
TIME_DECIMALS = 4
KN_DECIMALS = 2
TEMP_DECIMALS = 1
DEFAULTS: dict[str, Any] = {"time_window_start": 0.25, "time_window_end": 2.25,
                            "position_precision_mm": 0.5}


def units_for(columns: Sequence[str]) -> list[str]:
    """The unit of each column (``""`` for a column of unknown meaning)."""
    return [UNITS_BY_COLUMN.get(name, "") for name in columns]


def column_names(attrs: Mapping[str, Any]) -> list[str]:
    """The raw table's column names from its ``columns`` attribute (a comma-separated text, or
    an array of texts or bytes), else the published raw layout."""
    columns = attrs.get("columns")
    if columns is None:
        return list(COLUMNS)
    if isinstance(columns, bytes):
        columns = columns.decode()
    if isinstance(columns, str):
        return [c.strip() for c in columns.split(",")]
    return [c.decode() if isinstance(c, bytes) else str(c) for c in np.asarray(columns).tolist()]


def _nanmin(x: np.ndarray) -> float:
    """The smallest value that is not NaN; NaN when there is none (as a table's ``min``)."""
    finite = x[~np.isnan(x)]
    return float(finite.min()) if finite.size else float("nan")


def process(data: np.ndarray, columns: Sequence[str], params: Mapping[str, Any]
            ) -> tuple[np.ndarray, dict[str, Any]]:
    """One experiment's force table, processed.

    Args:
        data: The raw ``(n, len(columns))`` table.
        columns: Its column names (``time`` among them).
        params: ``time_window_start`` (exclusive, s), ``time_window_end`` (inclusive, s),
            ``position_precision_mm``.

    Returns:
        ``(table, attrs)``: the ``float32`` table of the rows in the window, and the counts and
        parameters to record beside it.

    Raises:
        ValueError: The table has no ``time`` column, repeats a column name, or its width
            differs from the column names.
    """
    names = list(columns)
    table = np.array(data, dtype=np.float64)
    if table.ndim != 2 or table.shape[1] != len(names):
        raise ValueError(f"force table of shape {table.shape} does not match its "
                         f"{len(names)} column names {names}")
    if "time" not in names:
        raise ValueError(f"force table has no 'time' column: {names}")
    if len(set(names)) != len(names):
        raise ValueError(f"force table repeats a column name: {names}")
    start, end = params["time_window_start"], params["time_window_end"]
    precision = params["position_precision_mm"]
    n_raw = table.shape[0]
    t = table[:, names.index("time")]
    table = table[(t > start) & (t <= end)]
    if table.shape[0]:
        col = names.index("time")
        table[:, col] = np.round(table[:, col] - _nanmin(table[:, col]), TIME_DECIMALS)
        for name in SIGNALS:
            if name in names:
                col = names.index(name)
                table[:, col] = np.round(table[:, col] - abs(_nanmin(table[:, col])), KN_DECIMALS)
        if "punch_temp" in names:
            col = names.index("punch_temp")
            table[:, col] = np.round(table[:, col], TEMP_DECIMALS)
        if "punch_pos" in names:
            col = names.index("punch_pos")
            table[:, col] = np.round(table[:, col] / precision) * precision
    attrs = {"n_raw_rows": n_raw, "n_rows": int(table.shape[0]),
             "time_window_start": start, "time_window_end": end,
             "position_precision_mm": precision}
    return table.astype(np.float32), attrs
