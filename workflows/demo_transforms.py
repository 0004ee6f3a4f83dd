"""Transforms referenced by the demo workflow files (module-level, so Dask workers import them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

N_SAMPLES = 1000
GEOMETRY_LABELS = {"concave": 0, "convex": 1}


def resample_and_emit(rec: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The seed's record transform: the force table on 1000 points plus derived targets.

    Returns ``force`` (1000, 8) float32, ``max_total_force`` (kN), ``blankholder_force`` and
    ``label_geometry`` (0 concave, 1 convex).
    """
    force = np.asarray(rec["force"])  # (n, 8), n varies per experiment
    t_old = np.linspace(0.0, 1.0, force.shape[0])
    t_new = np.linspace(0.0, 1.0, N_SAMPLES)
    resampled = np.stack(
        [np.interp(t_new, t_old, force[:, c]) for c in range(force.shape[1])], axis=1
    )
    return {
        "force": resampled.astype(np.float32),
        "max_total_force": np.float32(force[:, 7].max()),
        "blankholder_force": np.float32(rec["blankholder_force"]),
        "label_geometry": np.int8(0 if rec["geometry"] == "concave" else 1),
    }


def geometry_label(value: str) -> np.int8:
    """Field transform: the geometry column as a small-int label."""
    return np.int8(GEOMETRY_LABELS[value])


def zero_to_nan(z: np.ndarray) -> np.ndarray:
    """Field transform: unmeasured scan pixels (exact zeros) become NaN."""
    out = np.asarray(z, dtype=np.float32).copy()
    out[out == 0.0] = np.nan
    return out


def total_force_stream(rec: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Record transform for a StreamStorage: the total-force signal and its experiment id.

    Returns equal-length 1-D arrays ``force`` (float32) and ``doc`` (uint32, the id), the
    fields of the storage's record dtype.
    """
    force = np.asarray(rec["force_data"])[:, 7].astype(np.float32)
    return {"force": force, "doc": np.full(force.shape[0], rec["_sim_id"], dtype=np.uint32)}
