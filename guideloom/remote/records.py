# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier read path: remote records are read by
:class:`guideloom.read.records.RecordReader` as local ones are; the round-trip savings are in
:mod:`guideloom.read.hdf5` and :mod:`guideloom.read.wrappers`, the member checks in
:mod:`guideloom.read.zipmember`."""

from guideloom.read.hdf5 import (
    FIRST_READ,
    META_KIND,
    NATIVE_FIRST_READ,
    NATIVE_KIND,
    REACH_MARGIN,
    SPECULATE_MAX,
)
from guideloom.read.legacy import open_remote
from guideloom.read.wrappers import BLOCK, RECORD_MAX, MemberMeta
from guideloom.read.zipmember import CRC_BLOCK, NAME_SLACK

__all__ = [
    "BLOCK",
    "CRC_BLOCK",
    "FIRST_READ",
    "META_KIND",
    "MemberMeta",
    "NAME_SLACK",
    "NATIVE_FIRST_READ",
    "NATIVE_KIND",
    "REACH_MARGIN",
    "RECORD_MAX",
    "SPECULATE_MAX",
    "open_remote",
]
