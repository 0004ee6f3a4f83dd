# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier read path: byte sources, defined in the bytes layer of
:mod:`guideloom.read`."""

from guideloom.read.byte_source import (
    ByteSource,
    LocalFileSource,
    clear_source_cache,
    is_remote,
    open_byte_source,
)
from guideloom.read.fsspec_source import FsspecSource
from guideloom.read.http import HttpRangeSource
from guideloom.read.ranges import coalesce_ranges, split_coalesced

__all__ = [
    "ByteSource",
    "FsspecSource",
    "HttpRangeSource",
    "LocalFileSource",
    "clear_source_cache",
    "coalesce_ranges",
    "is_remote",
    "open_byte_source",
    "split_coalesced",
]
