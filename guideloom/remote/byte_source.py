# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier read path: the ByteSource protocol and the local and fsspec sources, defined
in :mod:`guideloom.read.byte_source` and :mod:`guideloom.read.fsspec_source`."""

from guideloom.read.byte_source import (
    REMOTE_SCHEMES,
    ByteSource,
    LocalFileSource,
    clear_source_cache,
    high_latency,
    is_remote,
    open_byte_source,
    source_for,
    url_source,
)
from guideloom.read.fsspec_source import FsspecSource, fsspec_filesystem
from guideloom.read.ranges import COALESCE_GAP, coalesce_ranges, split_coalesced

__all__ = [
    "ByteSource",
    "COALESCE_GAP",
    "FsspecSource",
    "LocalFileSource",
    "REMOTE_SCHEMES",
    "clear_source_cache",
    "coalesce_ranges",
    "fsspec_filesystem",
    "high_latency",
    "is_remote",
    "open_byte_source",
    "source_for",
    "split_coalesced",
    "url_source",
]
