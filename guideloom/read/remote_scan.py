"""Experiments of a remote release: zip members located by URL, member and offsets.

:func:`remote_locations` is :func:`guideloom.read.scan.scan_locations` for a remote root
(:class:`~guideloom.read.roots.RemoteRoot`): it reads each archive's central directory (from
the local cache when the archive is unchanged, else by one or two ranges) and yields one
:class:`~guideloom.read.locations.RemoteLocation` per experiment member. Locations are small
and picklable; a Dask worker opens its own byte source for each archive (:func:`source_of`,
one per archive and process).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from guideloom.errors import ConfigError, GuideloomError, ZipFormatError
from guideloom.read.byte_source import ByteSource
from guideloom.read.fetch import http_validator, source_of
from guideloom.read.files import LOOSE_SUBDIR, RemoteFiles, ScannedDataset
from guideloom.read.fsspec_source import FsspecSource
from guideloom.read.http import HttpRangeSource, run_concurrently
from guideloom.read.locations import Location, RemoteLocation, archive_key
from guideloom.read.metacache import process_cache
from guideloom.read.scan import add_member_locations, id_parser
from guideloom.read.zipdir import Member, read_directory, read_members

logger = logging.getLogger(__name__)

DIRECTORY_KIND = "zip-directory"
ARCHIVE_LANES = 8  # archives whose HEAD or directory is fetched at once


def location_source(loc: RemoteLocation) -> ByteSource:
    """The byte source of the archive holding ``loc``."""
    return source_of(loc.path, loc.archive_size, loc.headers, loc.options)


def stat_file(url: str, root: RemoteFiles) -> tuple[int, str]:
    """The file's size and its ETag or modification time ('' when the server gives none),
    from one metadata request, asked on every scan: an archive replaced on the server is
    noticed.

    Raises:
        FileNotFoundError: There is no such file.
    """
    src = source_of(url, None, root.headers, root.options)
    if isinstance(src, HttpRangeSource):
        size, validator = http_validator(url)
        if src._size not in (None, size):
            src._size = size
        return size, validator
    if not isinstance(src, FsspecSource):
        return src.size(), ""
    info = src._fs.info(src._path)
    size = int(info["size"])
    src._size = size
    return size, info_validator(info)


def info_validator(info: Mapping[str, Any]) -> str:
    """The ETag or modification time in an fsspec ``info`` answer ('' when none)."""
    return next((str(info[k]) for k in ("ETag", "etag", "Last-Modified", "LastModified",
                                        "last_modified", "mtime", "created") if info.get(k)),
                "")


@dataclass(frozen=True)
class _Archive:
    url: str
    size: int | None
    validator: str = ""


def _archives(ds: ScannedDataset, root: RemoteFiles) -> list[_Archive]:
    """The archives to read: those the manifest names (at ``name`` or ``h5/name``); for a
    listed root (a DOI) in which none of them is, any ``*.zip`` at the top or in ``h5/``
    holding experiments (the release also lists ``h5/sample.zip``, whose members repeat
    those of the full archives)."""
    found: list[_Archive] = []
    taken: set[str] = set()

    def find(name: str) -> tuple[str, _Archive] | None:
        for rel in (name, f"{LOOSE_SUBDIR}/{name}"):
            entry = root.entry(rel)
            if entry is None:
                continue
            if root.listed:
                return rel, _Archive(entry.url, entry.size, entry.checksum)
            try:
                size, validator = stat_file(entry.url, root)
            except FileNotFoundError:  # absent (404): not this candidate
                continue
            return rel, _Archive(entry.url, size, validator)
        return None

    # the archives' HEADs at once: each is a round trip
    for hit in run_concurrently(find, list(ds.archives), ARCHIVE_LANES):
        if hit is not None:
            taken.add(hit[0])
            found.append(hit[1])
    if root.listed and not found:
        pattern = re.compile(ds.spec.member_pattern)
        for f in sorted(root.files, key=lambda f: f.relpath):
            folder, _, base = f.relpath.rpartition("/")
            if f.relpath in taken or folder not in ("", LOOSE_SUBDIR) \
                    or not base.lower().endswith(".zip"):
                continue
            if ds.archives and not any(pattern.match(m.name.rsplit("/", 1)[-1])
                                       for m in _members(_Archive(f.url, f.size, f.checksum),
                                                         root)[0]):
                continue
            found.append(_Archive(f.url, f.size, f.checksum))
    return found


def _members(archive: _Archive, root: RemoteFiles) -> tuple[list[Member], str]:
    """The archive's central directory and the validator its cache entries are keyed on: from
    the cache when the archive is unchanged. Where the server names no version (no ETag,
    Last-Modified or checksum), the directory is read again on every scan and its fingerprint
    (:func:`~guideloom.read.zipdir.read_directory`) is the version: an archive replaced by
    another of the same size is never read through what was learnt of the old one."""
    src = source_of(archive.url, archive.size, root.headers, root.options)
    try:
        size = src.size()
        if not archive.validator:
            members, fingerprint = read_directory(src)
            return members, f"zip-directory:{fingerprint}"
    except ConfigError:
        raise
    except (ZipFormatError, OSError, ValueError) as exc:
        raise GuideloomError(f"zip archive {archive.url} cannot be read: {exc}") from exc
    key = archive_key(archive.url, size, archive.validator)
    cache = process_cache()
    cached = cache.get(DIRECTORY_KIND, key)
    if isinstance(cached, list):
        try:
            members = [Member.from_json(m) for m in cached]
            if all(m.header_offset + m.compress_size <= size for m in members):
                return members, archive.validator
        except (TypeError, ValueError):
            pass  # a damaged entry: read the directory again
    try:
        members = read_members(src)
    except (ZipFormatError, OSError) as exc:
        raise GuideloomError(f"zip archive {archive.url} cannot be read: {exc}") from exc
    cache.put(DIRECTORY_KIND, key, [m.to_json() for m in members])
    return members, archive.validator


def remote_locations(ds: ScannedDataset, root: RemoteFiles) -> dict[Any, Location]:
    """Map every experiment id held in the remote release's archives to its
    :class:`RemoteLocation` (:func:`~guideloom.read.roots.release_locations` adds loose files).

    Raises:
        GuideloomError: An archive cannot be read (naming its URL).
        ManifestError: Two members hold one experiment.
    """
    pattern = re.compile(ds.spec.member_pattern)
    to_id = id_parser(ds)
    found: dict[Any, Location] = {}
    archives = _archives(ds, root)
    listings = run_concurrently(lambda a: _members(a, root), archives, ARCHIVE_LANES)
    for archive, (members, validator) in zip(archives, listings, strict=True):
        size = source_of(archive.url, archive.size, root.headers, root.options).size()
        inflated = {m.name: (m.file_size, m.method) for m in members}
        add_member_locations(found, archive.url, members, pattern, to_id,
                             _maker(size, validator, root, inflated))
    return found


def loose_location(sim_id: Any, url: str, size: int, validator: str, root: RemoteFiles
                   ) -> RemoteLocation:
    """The :class:`RemoteLocation` of the loose file ``url`` (``size`` bytes)."""
    return RemoteLocation(sim_id=sim_id, path=url, member=None, size=size, stored=True,
                          archive_size=size, validator=validator, file_size=size,
                          headers=root.headers, options=root.options)


def _maker(archive_size: int, validator: str, root: RemoteFiles,
           inflated: Mapping[str, tuple[int, int]]) -> Callable[..., Location]:
    """What builds one archive's locations for :func:`~guideloom.read.scan.add_member_locations`
    (which gives the :class:`~guideloom.read.locations.Location` fields)."""
    def make(**kw: Any) -> Location:
        return RemoteLocation(**kw, archive_size=archive_size, validator=validator,
                              headers=root.headers, options=root.options,
                              file_size=inflated[kw["member"]][0],
                              method=inflated[kw["member"]][1])
    return make
