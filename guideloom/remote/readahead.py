# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier read path: the record read-ahead, defined in
:mod:`guideloom.read.readahead`."""

from guideloom.read.readahead import DEFAULT_DEPTH, DEPTH_ENV, Peeking, ReadAhead, readahead_depth

__all__ = ["DEFAULT_DEPTH", "DEPTH_ENV", "Peeking", "ReadAhead", "readahead_depth"]
