"""Compatibility stub: the record read-ahead now lives in :mod:`guideloom.read.readahead`."""

from __future__ import annotations

from guideloom.read.readahead import (
    DEFAULT_DEPTH,
    DEPTH_ENV,
    Peeking,
    ReadAhead,
    readahead_depth,
)

__all__ = [
    "DEFAULT_DEPTH",
    "DEPTH_ENV",
    "Peeking",
    "ReadAhead",
    "readahead_depth",
]
