"""Reading experiment bytes where they are: local files, HTTP servers, object stores.

Everything above this package reads through a :class:`ByteSource`: a file of known size whose
bytes are fetched by offset, one range at a time or many at once (coalesced and concurrent where
the transport allows). :func:`open_byte_source` picks the implementation from the URL.
"""

from __future__ import annotations

from guideloom.remote.byte_source import (
    ByteSource,
    FsspecSource,
    LocalFileSource,
    clear_source_cache,
    coalesce_ranges,
    is_remote,
    open_byte_source,
    split_coalesced,
)
from guideloom.remote.http import HttpRangeSource

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
