# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier read path: the on-disk metadata cache, defined in
:mod:`guideloom.read.metacache`."""

from guideloom.read.metacache import (
    CACHE_ENV,
    DEFAULT_MAX_BYTES,
    FORMAT,
    SIZE_ENV,
    SUBDIR,
    MetaCache,
    cache_root,
    max_bytes,
    payload_digest,
    process_cache,
)

_digest = payload_digest

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
