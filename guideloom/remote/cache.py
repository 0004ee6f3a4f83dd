"""Compatibility stub: the on-disk metadata cache now lives in :mod:`guideloom.read.metacache`."""

from __future__ import annotations

from guideloom.read import metacache as _impl
from guideloom.read.metacache import (
    CACHE_ENV,
    DEFAULT_MAX_BYTES,
    FORMAT,
    SIZE_ENV,
    SUBDIR,
    MetaCache,
    cache_root,
    max_bytes,
    process_cache,
)

_digest = _impl._digest

__all__ = [
    "CACHE_ENV",
    "DEFAULT_MAX_BYTES",
    "FORMAT",
    "MetaCache",
    "SIZE_ENV",
    "SUBDIR",
    "cache_root",
    "max_bytes",
    "process_cache",
]
