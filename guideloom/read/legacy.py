"""The opening functions under the signatures guideloom's earlier ``sources`` and
``remote.records`` modules gave them, each a thin call into the read layers.

New code opens a location with :func:`guideloom.read.hdf5.open_h5_file` (or
:func:`~guideloom.read.hdf5.open_h5py`) and a member's bytes with
:func:`guideloom.read.zipmember.open_span`; these keep the old signatures working for the stubs
``guideloom.sources`` and ``guideloom.remote.records`` (``guideloom/compat/aliases.py``).
"""

from __future__ import annotations

from typing import Any

import h5py

from guideloom.fastread.chunks import RawSource
from guideloom.read.byte_source import LocalFileSource
from guideloom.read.fileobj import MemoryFile
from guideloom.read.handles import ArchiveHandles, ArchiveLease
from guideloom.read.hdf5 import open_h5_file, open_h5py
from guideloom.read.locations import Location
from guideloom.read.zipmember import corrupt, open_span

__all__ = ["DescriptorSource", "inflate_member", "open_location", "open_location_bytes",
           "open_location_raw", "open_remote"]


def open_location(loc: Location, handles: ArchiveHandles | None = None, *,
                  verify_crc: bool = False) -> h5py.File:
    """Open the HDF5 file at ``loc`` read-only (:func:`guideloom.read.hdf5.open_h5_file`).

    Closing the returned File closes everything this call opened (a zip member is a
    :class:`~guideloom.read.hdf5.MemberFile`); the archive descriptors stay in ``handles``.

    Raises:
        CorruptDataError: The member or file is damaged or not HDF5 (or its CRC-32 differs);
            names the id and file.
        ExperimentReadError: The file vanished or cannot be read.
    """
    return open_h5_file(loc, handles, verify_crc=verify_crc)


def open_location_raw(
    loc: Location, handles: ArchiveHandles | None = None, *, verify_crc: bool = False
) -> tuple[h5py.h5f.FileID, RawSource | None]:
    """Open the HDF5 file at ``loc`` at the library level and say where its bytes are (close
    it with ``fid.close()``; a member's file object closes with the last reference)."""
    opened = open_h5py(loc, handles, verify=verify_crc)
    return opened.fid, opened.raw


class DescriptorSource(LocalFileSource):
    """A :class:`~guideloom.read.byte_source.LocalFileSource` over an open descriptor
    (the old signature); closes it only when it owns it."""

    def __init__(self, fd: int, name: str, owned: bool, size: int | None = None,
                 lease: ArchiveLease | None = None):
        super().__init__(fd=fd, owned=owned, size=size, lease=lease, name=name)


def open_location_bytes(
    loc: Location, handles: ArchiveHandles | None = None, *, verify_crc: bool = False
) -> tuple[LocalFileSource, int, int] | None:
    """The bytes of the HDF5 file at ``loc``: ``(source, base, size)`` (close the source when
    done); ``None`` for a deflated member. The zip member is checked as for reading."""
    if not loc.stored:
        if loc.defect is not None:
            corrupt(loc, loc.defect)
        return None
    span = open_span(loc, handles=handles, verify=verify_crc)
    return span.source, span.base, span.size  # type: ignore[return-value]


def inflate_member(loc: Location) -> MemoryFile:
    """The compressed member ``loc`` inflated into memory, as a file object
    (:func:`guideloom.read.zipmember.inflate`, bounded and CRC-checked)."""
    assert loc.member is not None, "inflate_member reads a zip member"
    span = open_span(loc, handles=None)
    view = memoryview(span.source.read(0, span.size)) if span.inflated else None
    span.close()
    if view is None:
        corrupt(loc, "the member is stored, not compressed")
    return MemoryFile(view, loc.describe())


def open_remote(loc: Any, verify_crc: bool = False) -> h5py.File:
    """The member as an ``h5py.File`` (closing it closes what this opened)."""
    return open_h5_file(loc, verify_crc=verify_crc)
