"""Compatibility stub: where each experiment's HDF5 file lives, and opening it; both now live in
:mod:`guideloom.read` (scanning in :mod:`guideloom.read.scan`, opening in the bytes, zip-member
and HDF5 layers), re-exported here under the names this module gave them.

Two layouts are found: loose files (``data_dir/h5/0042.h5`` or ``data_dir/0042.h5``) and members
of zip archives (``concave.zip::0042.h5``, ``h5/sample.zip::0042.h5``, ``h5/258864.zip``; see
:func:`archive_paths`). Loose files win over members for the same id.

Zip archives are read through their central directory only. A member stored uncompressed (as the
published archives store them: HDF5 compresses inside) is one contiguous byte range of the archive,
so it is read in place (:mod:`guideloom.read`: the bytes, zip-member and HDF5 layers, which
also hold the opening functions this module used to define and still re-exports).

Zip member names are never used as paths: only their base name is matched against the member
pattern to learn the experiment id. Two members naming one id (``3.h5`` and ``0003.h5``) are
refused, as two loose files are. A member whose local header names another member (a central
directory entry pointing at someone else's bytes) or whose byte range overlaps another member's
is refused with :class:`~guideloom.errors.CorruptDataError` naming ``archive::member`` when it
is opened (``on_error="skip"`` skips it).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import h5py

from guideloom.errors import ExperimentNotFoundError
from guideloom.fastread.chunks import RawSource
from guideloom.read import zipmember as _zipmember
from guideloom.read.byte_source import LocalFileSource
from guideloom.read.fileobj import ByteRangeFile, MemoryFile, SeekableReader
from guideloom.read.handles import ArchiveHandles, ArchiveLease, process_handles
from guideloom.read.hdf5 import MemberFile, file_access, open_h5_file, open_h5py
from guideloom.read.locations import Location
from guideloom.read.scan import (  # the scanning half: it lives in guideloom.read
    LOOSE_SUBDIR,
    add_member_locations,
    archive_members,
    archive_paths,
    id_parser,
    scan_locations,
)
from guideloom.read.zipdir import (
    LOCAL_HEADER,
    Member,
    ZipFormatError,
    parse_local_header,
    read_members,
)
from guideloom.read.zipmember import (
    DEFLATE_MAX_RATIO,
    DEFLATE_SLACK,
    INFLATE_BLOCK,
    INFLATE_MEMORY_SHARE,
    checked_data_offset,
    inflate_budget,
    member_data_offset,
    open_span,
)

if TYPE_CHECKING:
    from guideloom.croissant import Dataset, DatasetSpec

logger = logging.getLogger(__name__)


# --- opening, now in guideloom.read (kept under the names this module gave them) -------------
_PROCESS_HANDLES = process_handles()
raise_corrupt = _zipmember.corrupt
corrupt = _zipmember.corrupt


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



def open_h5(
    sim_id: Any,
    data_dir: str | Path | None = None,
    source: str | Path | None = None,
    dataset: Dataset | None = None,
    *,
    spec: DatasetSpec | None = None,
) -> h5py.File:
    """Open one experiment's HDF5 file, from a loose file or a zip member, read-only.

    Returns an ``h5py.File``: use it in a ``with`` block, or call ``close()`` when done. Either
    closes everything this call opened, the zip member's file object included. rddac's argument
    order ``open_h5(id, source, data_dir)`` works too (a ``.json`` path second is the manifest).
    Local files only: :func:`guideloom.open_h5` (:func:`guideloom.h5_tools.open_h5`) also
    opens an experiment of a remote release.

    Example:
        >>> with guideloom.open_h5(42, data_dir="./data") as f:   # doctest: +SKIP
        ...     force = f["force/data"][()]
        >>> f = guideloom.open_h5(42, data_dir="./data")          # doctest: +SKIP
        >>> f.attrs["index"], f.close()                           # doctest: +SKIP

    Raises:
        ExperimentNotFoundError: No local file holds this experiment (a ``KeyError`` and a
            ``FileNotFoundError``).
        CorruptDataError: The file or member is damaged or not HDF5.
    """
    from guideloom.croissant import is_manifest, load

    if is_manifest(data_dir) and not is_manifest(source):
        data_dir, source = source, data_dir  # rddac's order: open_h5(id, source, data_dir)
    ds = dataset if dataset is not None else load(data_dir, source, spec=spec)
    loc = scan_locations(ds, data_dir).get(sim_id)
    root = Path(data_dir) if data_dir is not None else ds.data_dir
    if loc is None:
        raise ExperimentNotFoundError(
            f"experiment {sim_id!r} has no HDF5 file under {root} (looked for loose "
            f"{root}/h5/<id>.h5 files and members of {', '.join(ds.archives) or '*.zip'} in "
            f"{root} and {root}/h5); download it or check the id")
    return open_h5_file(loc)


__all__ = [
    "DEFLATE_MAX_RATIO", "DEFLATE_SLACK", "INFLATE_BLOCK", "INFLATE_MEMORY_SHARE", "LOCAL_HEADER",
    "LOOSE_SUBDIR", "ArchiveHandles", "ArchiveLease", "ByteRangeFile", "DescriptorSource",
    "Location", "Member", "MemberFile", "MemoryFile", "SeekableReader", "ZipFormatError",
    "add_member_locations", "archive_members", "archive_paths", "checked_data_offset",
    "file_access", "id_parser", "inflate_budget", "inflate_member", "member_data_offset",
    "open_h5", "open_location", "open_location_bytes", "open_location_raw", "parse_local_header",
    "raise_corrupt", "read_members", "scan_locations",
]
