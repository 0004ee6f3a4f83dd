"""The ``[pointcloud]`` parameters: rddac 2.0's defaults under rddac's key names, and their
checks."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

logger = logging.getLogger(__name__)

#: rddac 2.0's ``[pointcloud]`` table, key for key (``rddac preprocess --dump-config``).
DEFAULTS: dict[str, Any] = {
    "lumi_min_patch_size": 20040,
    "max_wall_angle_concave_deg": 70.0,
    "max_wall_angle_convex_deg": 80.0,
    "z_tolerance_mm": 1.0,
    "min_component_size": 50,
    "k_angle": 15,
    "k_mono": 20,
    "k_closing": 8,
    "max_closing_iter": 15,
    "icp_max_iterations": 50,
    "icp_sample_size": 50000,
    "icp_anchor_height_mm": 3.0,
    "rf_threshold": 0.5,
    "rf_n_estimators": 150,
    "rf_max_depth": 18,
    "keep_prepared": False,
}

#: The fixed parts of the reference recipe (rddac does not let them be configured either).
SEED = 42
BALANCE_RATIO = 10.0
MAX_TRAIN_ROWS = 1_200_000
#: Nominal pixel pitches (mm) of the consensus-surface gradient; the labels were made with them.
DX_MM = 0.0769
DY_MM = 0.1589

# (low, high, integer?) per key; None = unbounded on that side.
_RANGES: dict[str, tuple[float | None, float | None, bool]] = {
    "lumi_min_patch_size": (1, None, True),
    "max_wall_angle_concave_deg": (0.0, 90.0, False),
    "max_wall_angle_convex_deg": (0.0, 90.0, False),
    "z_tolerance_mm": (0.0, None, False),
    "min_component_size": (1, None, True),
    "k_angle": (3, 1000, True),
    "k_mono": (3, 1000, True),
    "k_closing": (1, 1000, True),
    "max_closing_iter": (1, 10_000, True),
    "icp_max_iterations": (1, 10_000, True),
    "icp_sample_size": (100, None, True),
    "icp_anchor_height_mm": (0.0, None, False),
    "rf_threshold": (0.0, 1.0, False),
    "rf_n_estimators": (1, 10_000, True),
    "rf_max_depth": (1, 1000, True),
}


def resolved(params: Mapping[str, Any]) -> dict[str, Any]:
    """The complete table: ``params`` over :data:`DEFAULTS` (checked)."""
    check_params(params)
    return {**DEFAULTS, **params}


def check_params(params: Mapping[str, Any]) -> None:
    """Refuse an unknown key or an out-of-range value with one line.

    Raises:
        ValueError: ``[pointcloud] KEY ...: why`` for the first bad entry.
    """
    for key, value in params.items():
        if key not in DEFAULTS:
            raise ValueError(f"[pointcloud] unknown key {key!r} (valid: {', '.join(DEFAULTS)})")
        if key == "keep_prepared":
            if not isinstance(value, bool):
                raise ValueError(f"[pointcloud] keep_prepared = {value!r}: must be true or false")
            continue
        low, high, integer = _RANGES[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"[pointcloud] {key} = {value!r}: must be a number")
        if integer and not float(value).is_integer():
            raise ValueError(f"[pointcloud] {key} = {value!r}: must be a whole number")
        too_low = low is not None and value < low
        if value != value or too_low or (high is not None and value > high):
            bounds = f"{'-inf' if low is None else low} .. {'inf' if high is None else high}"
            raise ValueError(f"[pointcloud] {key} = {value!r}: out of range {bounds}")
