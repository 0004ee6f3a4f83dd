"""The experiments of a local data directory: loose files and zip members, as locations.

Two layouts are found: loose files (``data_dir/h5/0042.h5`` or ``data_dir/0042.h5``) and members
of zip archives (``concave.zip::0042.h5``, ``h5/sample.zip::0042.h5``, ``h5/258864.zip``; see
:func:`archive_paths`). Loose files win over members for the same id. Only directory listings
and zip central directories are read (:func:`guideloom.read.zipdir.archive_members`), never
member data.

Zip member names are never used as paths: only their base name is matched against the member
pattern to learn the experiment id. Two members naming one id (``3.h5`` and ``0003.h5``) are
refused, as two loose files are (:func:`add_member_locations`, which the remote scan
:mod:`guideloom.read.remote_scan` shares).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from guideloom.errors import ManifestError
from guideloom.read.access import data_file
from guideloom.read.files import LOOSE_SUBDIR, ScannedDataset, short_type
from guideloom.read.locations import Location
from guideloom.read.zipdir import (
    Member,
    archive_members,
    following_headers,
    overlapping_members,
)

__all__ = ["LOOSE_SUBDIR", "add_member_locations", "archive_members", "archive_paths",
           "id_parser", "local_locations", "scan_locations"]


def id_parser(ds: ScannedDataset) -> Callable[[str], Any]:
    """Return the function turning a file-name id into an index id."""
    return int if short_type(ds.id_column_type) == "sc:Integer" else str


def scan_locations(ds: ScannedDataset, data_dir: str | Path | None = None
                   ) -> dict[Any, Location]:
    """Map every experiment id with local data to its :class:`Location`.

    Reads directory listings and zip central directories only, never member data.

    Raises:
        GuideloomError: A zip archive is damaged (its central directory cannot be read).
        TypeError: No ``data_dir`` is given and the dataset is read by URL (not local).
    """
    if data_dir is not None:
        return local_locations(ds, Path(data_dir))
    kept = ds.data_dir
    if not isinstance(kept, str | os.PathLike):  # a remote root
        raise TypeError(f"dataset {ds.name!r} is read by URL ({kept}), "
                        "not from a local folder: give data_dir, the folder holding its files")
    return local_locations(ds, Path(kept))


def local_locations(ds: ScannedDataset, root: Path) -> dict[Any, Location]:
    """:func:`scan_locations` of the folder ``root``.

    Raises:
        GuideloomError: A zip archive is damaged.
        ManifestError: Two loose files or members hold one experiment, or a file the
            manifest names (or a link) leads outside ``root``.
    """
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
        with data_file(folder):
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        for entry in entries:
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
    following = following_headers((m.header_offset, m.name) for m in members)
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
            defect=defects.get(info.name), **_next(following.get(info.header_offset)))


def _next(following: tuple[int, str] | None) -> dict[str, Any]:
    """The location's ``next_header`` and ``next_member`` fields."""
    if following is None:
        return {}
    return {"next_header": following[0], "next_member": following[1]}


def archive_paths(ds: ScannedDataset, root: Path) -> list[Path]:
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
