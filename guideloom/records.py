# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier read path: reading one view record, defined in :mod:`guideloom.read.records`
(its checks in :mod:`guideloom.read.hdf5`)."""

from guideloom.h5native.stats import NATIVE_STATS, NativeStats, native_stats
from guideloom.read.hdf5 import LARGE_FIELD_BYTES, check_declared_size, check_self_contained
from guideloom.read.records import (
    NATIVE_ENV,
    REFERENCE_RECORDS,
    SIM_ID_KEY,
    RecordReader,
    described_first,
    native_default,
    reference_dtypes,
)

__all__ = [
    "LARGE_FIELD_BYTES",
    "NATIVE_ENV",
    "NATIVE_STATS",
    "NativeStats",
    "REFERENCE_RECORDS",
    "RecordReader",
    "SIM_ID_KEY",
    "check_declared_size",
    "check_self_contained",
    "described_first",
    "native_default",
    "native_stats",
    "reference_dtypes",
]
