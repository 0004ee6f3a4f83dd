"""The measured sheet thickness and oil film of an experiment, for choosing its simulation:
from the processed groups already written into the output, else computed from the raw ones with
the sheet and oil stages (NaN for a modality the raw file lacks, as rddac does)."""

from __future__ import annotations

import importlib
import logging
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)


def _mean_of(table: np.ndarray) -> float:
    """The NaN-skipping mean of the value column, in the table's own dtype (as rddac takes it)."""
    column = np.asarray(table)[:, 1]
    if column.size == 0 or np.isnan(column).all():
        return float("nan")
    return float(np.nanmean(column))


def from_raw(raw: Any) -> tuple[float, float]:
    """Sheet (um) and oil (g/m^2) means of the raw tables, processed with the default recipe."""
    sheet_mean = oil_mean = float("nan")
    if "sheet_thickness" in raw:
        sheet = importlib.import_module("guideloom.preprocess.sheet")  # the core stage

        table = sheet.process(raw["sheet_thickness/data"][:], dict(sheet.DEFAULTS))[0]
        sheet_mean = _mean_of(table)
    if "oil_thickness" in raw:
        oil = importlib.import_module("guideloom.preprocess.oil")

        table = oil.process(raw["oil_thickness/data"][:], dict(oil.DEFAULTS))[0]
        oil_mean = _mean_of(table)
    return sheet_mean, oil_mean


def for_matching(raw: Any, out: Any) -> tuple[float, float, str]:
    """``(sheet, oil, source)``: ``processed`` when ``out`` holds both processed groups,
    else ``recomputed`` from ``raw``."""
    if "sheet_thickness" in out and "oil_thickness" in out:
        return (_mean_of(out["sheet_thickness/data"][:]), _mean_of(out["oil_thickness/data"][:]),
                "processed")
    sheet_mean, oil_mean = from_raw(raw)
    return sheet_mean, oil_mean, "recomputed"
