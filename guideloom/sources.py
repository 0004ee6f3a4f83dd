"""Where each experiment's HDF5 file lives (loose files and zip members), found by scanning.

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
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import h5py

from guideloom.caches import BoundedCache, cache
from guideloom.errors import ExperimentNotFoundError, GuideloomError, ManifestError
from guideloom.fastread.chunks import RawSource
from guideloom.index_table import short_type
from guideloom.read import zipmember as _zipmember
from guideloom.read.byte_source import LocalFileSource
from guideloom.read.fileobj import ByteRangeFile, MemoryFile, SeekableReader
from guideloom.read.handles import ArchiveHandles, ArchiveLease, process_handles
from guideloom.read.hdf5 import MemberFile, file_access, open_h5_file, open_h5py
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
from guideloom.remote.root import RemoteRoot
from guideloom.remote.zipdir import (
    LOCAL_HEADER,
    Member,
    ZipFormatError,
    overlapping_members,
    parse_local_header,
    read_members,
)

if TYPE_CHECKING:
    from guideloom.croissant import Dataset, DatasetSpec

logger = logging.getLogger(__name__)

LOOSE_SUBDIR = "h5"


@dataclass(frozen=True)
class Location:
    """Where one experiment's HDF5 bytes are.

    Attributes:
        sim_id: The experiment id.
        path: The loose ``.h5`` file or the zip archive.
        member: The member name inside the archive, ``None`` for loose files.
        header_offset: Offset of the member's local header in the archive.
        size: The member's stored (compressed) size in bytes.
        stored: True when the member is stored uncompressed.
        crc: The member's CRC-32 from the central directory (``None`` for loose files).
        defect: Why the central directory entry cannot be trusted (its byte range overlaps
            another member's, or another member names the same id), found when the archive
            was listed; opening the location raises it as :class:`CorruptDataError`.
    """

    sim_id: Any
    path: str
    member: str | None = None
    header_offset: int = 0
    size: int = 0
    stored: bool = True
    crc: int | None = None
    defect: str | None = None

    def describe(self) -> str:
        """``path`` or ``archive::member``, for messages."""
        return self.path if self.member is None else f"{self.path}::{self.member}"


def id_parser(ds: Dataset) -> Callable[[str], Any]:
    """Return the function turning a file-name id into an index id."""
    return int if short_type(ds.id_column_type) == "sc:Integer" else str


def scan_locations(ds: Dataset, data_dir: str | Path | None = None) -> dict[Any, Location]:
    """Map every experiment id with local data to its :class:`Location`.

    Reads directory listings and zip central directories only, never member data.

    Raises:
        GuideloomError: A zip archive is damaged (its central directory cannot be read).
        TypeError: No ``data_dir`` is given and the dataset is read by URL (not local).
    """
    if data_dir is None:
        if isinstance(ds.data_dir, RemoteRoot):
            raise TypeError(f"dataset {ds.name!r} is read by URL ({ds.data_dir.url}), not from "
                            "a local folder: give data_dir, the folder holding its files")
        data_dir = ds.data_dir
    root = Path(data_dir)
    pattern = re.compile(ds.spec.member_pattern)
    to_id = id_parser(ds)
    found: dict[Any, Location] = {}
    for archive in archive_paths(ds, root):
        add_member_locations(found, str(archive), archive_members(archive), pattern, to_id)
    for folder in (root, root / LOOSE_SUBDIR):  # loose files win over zip members, and h5/
        if not folder.is_dir():  # (the canonical loose folder) over the dataset's root
            continue
        if folder != root and folder.is_symlink():
            ds.file_in_data_dir(root, LOOSE_SUBDIR, "the loose-file folder")
        here: dict[Any, str] = {}
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            m = pattern.match(entry.name)
            if m is not None and entry.is_file():
                if entry.is_symlink():  # a link may point within the data directory only
                    ds.file_in_data_dir(root, os.path.relpath(entry.path, root),
                                        "a loose HDF5 file")
                sim_id = to_id(m.group("id"))
                if sim_id in here:
                    raise ManifestError(
                        f"two loose files hold experiment {sim_id!r}: {here[sim_id]} and "
                        f"{entry.path}; keep one of them")
                here[sim_id] = entry.path
                found[sim_id] = Location(sim_id=sim_id, path=entry.path)
    return found


def add_member_locations(found: dict[Any, Location], archive: str, members: list[Member],
                         pattern: re.Pattern[str], to_id: Callable[[str], Any],
                         make: Callable[..., Location] = Location) -> None:
    """Add a :class:`Location` (built by ``make``) for each experiment member of ``archive``.

    Raises:
        ManifestError: Two members hold one experiment id.
    """
    defects = overlapping_members(members)
    for info in members:
        if info.is_dir():
            continue
        m = pattern.match(info.name.rsplit("/", 1)[-1])
        if m is None:
            continue
        sim_id = to_id(m.group("id"))
        if sim_id in found:
            raise ManifestError(
                f"two zip members hold experiment {sim_id!r}: {found[sim_id].describe()} "
                f"and {archive}::{info.name}; keep one of them")
        found[sim_id] = make(
            sim_id=sim_id, path=archive, member=info.name, header_offset=info.header_offset,
            size=info.compress_size, stored=info.stored, crc=info.crc,
            defect=defects.get(info.name))


# Central directories read recently, by archive and its (inode, size, mtime): a training loop
# calls iter_view once per epoch, and re-parsing a large central directory each time is waste.
_MEMBERS: BoundedCache[tuple[str, int, int, int], list[Member]] = cache("archive_listings")


def archive_members(archive: Path) -> list[Member]:
    """The archive's central directory entries (cached while the file is unchanged); parsed by
    :mod:`guideloom.remote.zipdir`, which reads remote archives too.

    Raises:
        GuideloomError: The archive cannot be read.
    """
    try:
        st = os.stat(archive)
        key = (str(archive), st.st_ino, st.st_size, st.st_mtime_ns)
        infos = _MEMBERS.get(key)
        if infos is None:
            # the archive changed since it was listed: so did its members' offsets
            if _MEMBERS.pop_where(lambda k: k[0] != key[0]):
                _PROCESS_HANDLES.retire(key[0])
            with LocalFileSource(archive) as src:
                infos = read_members(src)
            _MEMBERS.put(key, infos)
        return infos
    except (ZipFormatError, OSError) as exc:
        raise GuideloomError(f"zip archive {archive} cannot be read: {exc}") from exc


def archive_paths(ds: Dataset, root: Path) -> list[Path]:
    """The zip archives holding experiments, in the order their members are claimed.

    First the archives the manifest names, each at ``root/<name>`` or else ``root/h5/<name>``
    (where ``rddac download`` writes them, e.g. ``h5/sample.zip``); then any other ``*.zip`` in
    ``root/h5`` and ``root`` that holds at least one experiment member (the DDACS-style
    ``h5/<id>.zip``). rddac and ddacs look in the same two folders.
    """
    found: list[Path] = []
    for name in ds.archives:  # each must stay inside the data directory (symlinks resolved)
        for subdir in ("", LOOSE_SUBDIR):
            path = ds.file_in_data_dir(root, f"{subdir}/{name}" if subdir else name,
                                       "a zip FileObject's 'name'")
            if path.is_file():
                found.append(path)
                break
    taken = {p.resolve() for p in found}
    pattern = re.compile(ds.spec.member_pattern)
    for folder in (root / LOOSE_SUBDIR, root):
        for path in sorted(folder.glob("*.zip")) if folder.is_dir() else ():
            if path.resolve() in taken or not path.is_file():
                continue
            if ds.archives and not _holds_experiments(path, pattern):
                continue  # an unrelated zip next to the dataset's own archives
            ds.file_in_data_dir(root, str(path.relative_to(root)),
                                "the zip archive found in the data directory")
            taken.add(path.resolve())
            found.append(path)
    return found


def _holds_experiments(archive: Path, pattern: re.Pattern[str]) -> bool:
    return any(pattern.match(i.name.rsplit("/", 1)[-1]) for i in archive_members(archive))


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
