"""Experiments of a remote release: zip members located by URL, member and offsets.

:func:`remote_locations` is :func:`guideloom.sources.scan_locations` for a
:class:`~guideloom.remote.root.RemoteRoot`: it reads each archive's central directory (from the
local cache when the archive is unchanged, else by one or two ranges) and yields one
:class:`RemoteLocation` per experiment member. Locations are small and picklable; a Dask worker
opens its own byte source for each archive (:func:`source_of`, one per archive and process).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from guideloom.errors import GuideloomError
from guideloom.remote.byte_source import ByteSource, FsspecSource
from guideloom.remote.cache import process_cache
from guideloom.remote.fetch import http_validator, source_of
from guideloom.remote.http import HttpRangeSource, run_concurrently
from guideloom.remote.root import RemoteRoot
from guideloom.remote.zipdir import LOCAL_HEADER, Member, ZipFormatError, read_members
from guideloom.sources import LOOSE_SUBDIR, Location, add_member_locations, id_parser

if TYPE_CHECKING:
    from guideloom.croissant import Dataset

DIRECTORY_KIND = "zip-directory"
ARCHIVE_LANES = 8  # archives whose HEAD or directory is fetched at once


@dataclass(frozen=True)
class RemoteLocation(Location):
    """A zip member of a remote archive (``path`` is the archive's URL), or a loose remote
    ``.h5`` file (``member`` is ``None``, its bytes start at 0, ``archive_size`` is its size).

    Attributes:
        archive_size: The archive's size in bytes (offsets are checked against it).
        validator: The archive's ETag or Last-Modified when the server gave one.
        headers: HTTP headers for the archive's requests (kept out of ``repr``).
        options: The root's fsspec storage options (kept out of ``repr``).
    """

    member: str | None  # the zip member; None for a loose file
    archive_size: int = 0
    validator: str = ""
    file_size: int = 0  # bytes once inflated (what a deflated member must inflate to)
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False, compare=False)
    options: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def data_bounds(self) -> tuple[int, int]:
        """The lowest and highest archive offset at which the member's data may start (after
        its local header, name and extra field); ``(0, 0)`` for a loose file."""
        if self.member is None:
            return 0, 0
        low = self.header_offset + LOCAL_HEADER.size + len(self.member.encode())
        return low, self.header_offset + LOCAL_HEADER.size + 2 * 0xFFFF

    def cache_key(self) -> str:
        """The key of this member's cached HDF5 metadata."""
        return f"{archive_key(self.path, self.archive_size, self.validator)}::{self.member}" \
               f"@{self.header_offset}+{self.size}"


def archive_key(url: str, size: int, validator: str) -> str:
    """The cache key of one archive: URL, size and validator."""
    return f"{url}|{size}|{validator}"


def location_source(loc: RemoteLocation) -> ByteSource:
    """The byte source of the archive holding ``loc``."""
    return source_of(loc.path, loc.archive_size, loc.headers, loc.options)


def stat_file(url: str, root: RemoteRoot) -> tuple[int, str]:
    """The file's size and its ETag or modification time ('' when the server gives none),
    from one metadata request, asked on every scan: an archive replaced on the server is
    noticed.

    Raises:
        FileNotFoundError: There is no such file.
    """
    src = source_of(url, None, root.headers, root.options)
    if isinstance(src, HttpRangeSource):
        size, validator = http_validator(url)
        if src._size not in (None, size):  # noqa: SLF001
            src._size = size  # noqa: SLF001 - replaced: forget the old size
        return size, validator
    if not isinstance(src, FsspecSource):
        return src.size(), ""
    info = src._fs.info(src._path)  # noqa: SLF001
    size = int(info["size"])
    src._size = size  # noqa: SLF001 - the one metadata request answers both
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


def _archives(ds: Dataset, root: RemoteRoot) -> list[_Archive]:
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
                                                         root)):
                continue
            found.append(_Archive(f.url, f.size, f.checksum))
    return found


def _members(archive: _Archive, root: RemoteRoot) -> list[Member]:
    """The archive's central directory: from the cache when the archive is unchanged."""
    src = source_of(archive.url, archive.size, root.headers, root.options)
    try:
        size = src.size()
    except (OSError, ValueError) as exc:
        raise GuideloomError(f"zip archive {archive.url} cannot be read: {exc}") from exc
    key = archive_key(archive.url, size, archive.validator)
    cache = process_cache()
    cached = cache.get(DIRECTORY_KIND, key)
    if isinstance(cached, list):
        try:
            members = [Member.from_json(m) for m in cached]
            if all(m.header_offset + m.compress_size <= size for m in members):
                return members
        except (TypeError, ValueError):
            pass  # a damaged entry: read the directory again
    try:
        members = read_members(src)
    except (ZipFormatError, OSError) as exc:
        raise GuideloomError(f"zip archive {archive.url} cannot be read: {exc}") from exc
    cache.put(DIRECTORY_KIND, key, [m.to_json() for m in members])
    return members


def remote_locations(ds: Dataset, root: RemoteRoot) -> dict[Any, Location]:
    """Map every experiment id held in the remote release's archives to its
    :class:`RemoteLocation` (:func:`~guideloom.remote.scan.release_locations` adds loose files).

    Raises:
        GuideloomError: An archive cannot be read (naming its URL).
        ManifestError: Two members hold one experiment.
    """
    pattern = re.compile(ds.spec.member_pattern)
    to_id = id_parser(ds)
    found: dict[Any, Location] = {}
    archives = _archives(ds, root)
    listings = run_concurrently(lambda a: _members(a, root), archives, ARCHIVE_LANES)
    for archive, members in zip(archives, listings, strict=True):
        size = source_of(archive.url, archive.size, root.headers, root.options).size()
        inflated = {m.name: m.file_size for m in members}
        add_member_locations(found, archive.url, members, pattern, to_id,
                             _maker(size, archive.validator, root, inflated))
    return found


def loose_location(sim_id: Any, url: str, size: int, validator: str, root: RemoteRoot
                   ) -> RemoteLocation:
    """The :class:`RemoteLocation` of the loose file ``url`` (``size`` bytes)."""
    return RemoteLocation(sim_id=sim_id, path=url, member=None, size=size, stored=True,
                          archive_size=size, validator=validator, file_size=size,
                          headers=root.headers, options=root.options)


def _maker(archive_size: int, validator: str, root: RemoteRoot,
           inflated: Mapping[str, int]) -> Callable[..., Location]:
    """What builds one archive's locations for :func:`~guideloom.sources.add_member_locations`
    (which gives the :class:`~guideloom.sources.Location` fields)."""
    def make(**kw: Any) -> Location:
        return RemoteLocation(**kw, archive_size=archive_size, validator=validator,
                              headers=root.headers, options=root.options,
                              file_size=inflated[kw["member"]])
    return make


def remote_fingerprint(index_bytes: bytes, locations: Any) -> str:
    """The identity of a remote job's input: the index table's bytes and each member's
    archive URL, size, validator, offsets and CRC (no member data is read)."""
    digest = hashlib.sha256(hashlib.sha256(index_bytes).digest())
    for loc in locations:
        digest.update(f"{loc.sim_id}|{loc.path}|{getattr(loc, 'archive_size', '')}|"
                      f"{getattr(loc, 'validator', '')}|{loc.member}|{loc.header_offset}|"
                      f"{loc.size}|{loc.crc};".encode())
    return digest.hexdigest()
