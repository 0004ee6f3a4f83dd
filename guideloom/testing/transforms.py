"""The record transforms :class:`~guideloom.testing.FormatTests` exports with (module-level, so
Dask workers import them and the job identity fingerprints them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

SKIPPED_ID = 7  # the experiment the "with skips" transforms fail on


def first_rows(rec: Mapping[str, Any]) -> dict[str, Any]:
    """Fixed shapes: the first 100 rows of the force table, and the id as a 0-d int64."""
    return {"force": np.asarray(rec["force_data"])[:100], "sim": np.int64(rec["_sim_id"])}


def first_rows_skipping(rec: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`first_rows`, raising for experiment :data:`SKIPPED_ID` (skipped with
    ``on_error="skip"``)."""
    _fail_on_skipped(rec)
    return first_rows(rec)


def chunk_sized_rows(rec: Mapping[str, Any]) -> dict[str, Any]:
    """Rows of 1 MiB (a 512x512 float32 image from the force table's first column) and the id:
    large enough that a chunked format stores one row per chunk, so closing the gaps skipped
    rows leave moves whole chunks (a zarr export's ``compacted-chunk`` point)."""
    column = np.asarray(rec["force_data"], dtype=np.float32)[:, 0]
    return {"scan": np.resize(column, (512, 512)), "sim": np.int64(rec["_sim_id"])}


def chunk_sized_rows_skipping(rec: Mapping[str, Any]) -> dict[str, Any]:
    """:func:`chunk_sized_rows`, raising for experiment :data:`SKIPPED_ID`."""
    _fail_on_skipped(rec)
    return chunk_sized_rows(rec)


def total_force_stream(rec: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """For a StreamStorage of dtype ``[("force", "<f4"), ("doc", "<u4")]``: equal-length
    1-D arrays, the total-force signal and the id."""
    force = np.asarray(rec["force_data"])[:, 7].astype(np.float32)
    return {"force": force, "doc": np.full(force.shape[0], rec["_sim_id"], dtype=np.uint32)}


def total_force_stream_skipping(rec: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """:func:`total_force_stream`, raising for experiment :data:`SKIPPED_ID`."""
    _fail_on_skipped(rec)
    return total_force_stream(rec)


def _fail_on_skipped(rec: Mapping[str, Any]) -> None:
    if rec["_sim_id"] == SKIPPED_ID:
        raise RuntimeError(f"experiment {SKIPPED_ID} is skipped by the conformance tests")
