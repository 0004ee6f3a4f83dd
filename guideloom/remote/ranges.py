# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier read path: coalescing byte ranges, defined in
:mod:`guideloom.read.ranges`."""

from guideloom.read.ranges import COALESCE_GAP, coalesce_ranges, split_coalesced

__all__ = ["COALESCE_GAP", "coalesce_ranges", "split_coalesced"]
