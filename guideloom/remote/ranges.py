"""Compatibility stub: coalescing byte ranges now lives in :mod:`guideloom.read.ranges`."""

from __future__ import annotations

from guideloom.read.ranges import (
    COALESCE_GAP,
    coalesce_ranges,
    split_coalesced,
)

__all__ = [
    "COALESCE_GAP",
    "coalesce_ranges",
    "split_coalesced",
]
