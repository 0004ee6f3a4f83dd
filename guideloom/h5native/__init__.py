"""Reading HDF5 datasets without h5py, from any :class:`~guideloom.read.byte_source.ByteSource`.

Handles what experiment files hold: superblocks v0 to v3, object headers v1 and v2, old-style
and compact groups, fixed-point and IEEE float datatypes in either byte order, compact,
contiguous and chunked layouts (v1 B-tree, single-chunk, implicit, fixed-array and small
extensible-array indexes) with deflate, shuffle and fletcher32. Chunks are decoded by
:mod:`guideloom.fastread`. Anything else raises :class:`NativeUnsupported` and damaged input
:class:`NativeFormatError`; callers then read with h5py, the reference.

Example:
    >>> from guideloom.read.byte_source import LocalFileSource
    >>> with LocalFileSource("0042.h5") as src:                          # doctest: +SKIP
    ...     f = open_file(src)
    ...     force = f.read("force/data")
    ...     cached = f.meta.to_json()        # a later open_file(src, meta=...) reads no metadata
"""

from __future__ import annotations

from guideloom.h5native.errors import (
    NativeDamageError,
    NativeError,
    NativeFormatError,
    NativeUnsupported,
)
from guideloom.h5native.file import H5File, open_file
from guideloom.h5native.meta import DatasetInfo, FileMeta

__all__ = ["DatasetInfo", "FileMeta", "H5File", "NativeDamageError", "NativeError",
           "NativeFormatError", "NativeUnsupported", "open_file"]
