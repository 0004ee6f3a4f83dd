"""Compatibility stub: reading records of a remote release is no longer a path of its own.

:class:`guideloom.read.records.RecordReader` reads remote locations as it reads local ones;
the round-trip savings (the first read bringing the local header, metadata and data, the
metadata cache, the metadata blocks h5py reads) are in :mod:`guideloom.read.hdf5` and
:mod:`guideloom.read.wrappers`, the member checks in :mod:`guideloom.read.zipmember`.
"""

from __future__ import annotations

from typing import Any

import h5py

from guideloom.read.hdf5 import (
    FIRST_READ,
    META_KIND,
    NATIVE_FIRST_READ,
    NATIVE_KIND,
    REACH_MARGIN,
    SPECULATE_MAX,
    open_h5_file,
)
from guideloom.read.wrappers import BLOCK, RECORD_MAX, MemberMeta
from guideloom.read.zipmember import CRC_BLOCK, NAME_SLACK


def open_remote(loc: Any, verify_crc: bool = False) -> h5py.File:
    """The member as an ``h5py.File`` (closing it closes what this opened)."""
    return open_h5_file(loc, verify_crc=verify_crc)


__all__ = [
    "BLOCK",
    "CRC_BLOCK",
    "FIRST_READ",
    "META_KIND",
    "NATIVE_FIRST_READ",
    "NATIVE_KIND",
    "NAME_SLACK",
    "REACH_MARGIN",
    "RECORD_MAX",
    "SPECULATE_MAX",
    "MemberMeta",
    "open_remote",
]
