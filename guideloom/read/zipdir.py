"""Zip archive directories read from a :class:`~guideloom.read.byte_source.ByteSource` by offset.

One parser serves local archives (:func:`archive_members`, which caches a local archive's
listing while the file is unchanged) and remote ones
(:mod:`guideloom.read.remote_scan`): the end-of-central-directory record (and the zip64
records) is found in the archive's tail, the central directory is parsed into :class:`Member`
entries, :func:`overlapping_members` finds entries whose bytes overlap another's and
:func:`following_headers` says where each member's bytes must end. A remote
archive costs one range (the tail) when the directory lies in it, else two.

:func:`parse_local_header` reads one member's local header from bytes fetched with it (the
remote reader fetches the header and the member's first block in one range).
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from guideloom.errors import GuideloomError, ZipFormatError
from guideloom.read.byte_source import ByteSource, LocalFileSource
from guideloom.runtime.caches import BoundedCache, cache

logger = logging.getLogger(__name__)

_EOCD = struct.Struct("<4s4H2LH")  # signature, disks, entries x2, size, offset, comment length
_EOCD_SIG = b"PK\x05\x06"
_LOCATOR = struct.Struct("<4sLQL")  # zip64 locator: signature, disk, record offset, disks
_LOCATOR_SIG = b"PK\x06\x07"
_EOCD64 = struct.Struct("<4sQ2H2L4Q")  # zip64 end record
_EOCD64_SIG = b"PK\x06\x06"
_CENTRAL = struct.Struct("<4s4B4HL2L5H2L")  # one central directory entry
_CENTRAL_SIG = b"PK\x01\x02"
LOCAL_HEADER = struct.Struct("<4s2xH18xHH")  # signature, flags, name and extra lengths
LOCAL_SIG = b"PK\x03\x04"
UTF8_NAME = 0x800  # general purpose flag bit 11: the name is UTF-8 (else cp437)
ZIP_STORED = 0
DEFLATED, BZIP2, LZMA = 8, 12, 14  # the compression methods read (besides stored)
MAX_COMMENT = 0xFFFF
TAIL_READ = 16 << 10  # bytes read from the end at first: the EOCD and often the directory
_ZIP64_EXTRA = 0x0001
_FFFF = 0xFFFFFFFF
MAX_DIRECTORY = 1 << 28  # bytes of central directory read (about 3 million members)
MAX_OFFSET = (1 << 63) - 1  # no file is larger: bigger sizes or offsets are damage


@dataclass(frozen=True)
class Member:
    """One central directory entry.

    Attributes:
        name: The member name (decoded; cut at a NUL byte, as :mod:`zipfile` does).
        name_len: Bytes of the name as stored (the local header repeats them).
        header_offset: Offset of the member's local header in the archive.
        compress_size: Stored bytes.
        file_size: Bytes once inflated.
        method: Compression method (0 stored, 8 deflated).
        crc: CRC-32 of the inflated bytes.
        flags: General purpose flags.
    """

    name: str
    name_len: int
    header_offset: int
    compress_size: int
    file_size: int
    method: int
    crc: int
    flags: int

    @property
    def stored(self) -> bool:
        """True when the member is stored uncompressed."""
        return self.method == ZIP_STORED

    def is_dir(self) -> bool:
        """True for a directory entry."""
        return self.name.endswith("/")

    def to_json(self) -> dict[str, Any]:
        """A JSON-able dict (:meth:`from_json` reads it back)."""
        return asdict(self)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Member:
        """The member of a :meth:`to_json` dict; raises ``ValueError`` when fields are off."""
        fields = {"name": str, "name_len": int, "header_offset": int, "compress_size": int,
                  "file_size": int, "method": int, "crc": int, "flags": int}
        if not isinstance(doc, dict) or set(doc) != set(fields):
            raise ValueError("not a zip member entry")
        for key, kind in fields.items():
            if type(doc[key]) is not kind or (kind is int and doc[key] < 0):
                raise ValueError(f"zip member entry: bad {key}")
        return cls(**doc)


@dataclass(frozen=True)
class Directory:
    """Where an archive's central directory is."""

    offset: int  # of the directory in the file (prepended bytes included)
    size: int
    entries: int
    concat: int  # bytes before the archive proper (a self-extractor's stub), added to offsets


def find_directory(tail: bytes, tail_offset: int, file_size: int) -> Directory:
    """Locate the central directory from the archive's last bytes.

    Args:
        tail: The last bytes of the archive (the EOCD record, its comment and, for zip64,
            the 76 bytes before it must be inside).
        tail_offset: Where ``tail`` starts in the archive.
        file_size: The archive's size.

    Raises:
        ZipFormatError: No end-of-central-directory record, or one that points outside the file.
    """
    pos = _eocd_position(tail)
    if pos < 0:
        raise ZipFormatError("File is not a zip file")
    (_, disk, disk_cd, _, entries, cd_size, cd_offset, _) = _EOCD.unpack_from(tail, pos)
    eocd_at = tail_offset + pos
    extra = 0
    loc_at = pos - _LOCATOR.size
    if loc_at >= 0 and tail[loc_at:loc_at + 4] == _LOCATOR_SIG:
        _, loc_disk, _, disks = _LOCATOR.unpack_from(tail, loc_at)
        if loc_disk != 0 or disks > 1:
            raise ZipFormatError("zipfiles that span multiple disks are not supported")
        rec_at = loc_at - _EOCD64.size
        if rec_at >= 0 and tail[rec_at:rec_at + 4] == _EOCD64_SIG:
            (_, _, _, _, disk, disk_cd, _, entries, cd_size,
             cd_offset) = _EOCD64.unpack_from(tail, rec_at)
            extra = _EOCD64.size + _LOCATOR.size
    if disk != 0 or disk_cd != 0:
        raise ZipFormatError("zipfiles that span multiple disks are not supported")
    concat = eocd_at - cd_size - cd_offset - extra
    start = cd_offset + concat
    if start < 0 or concat < 0 or start + cd_size > file_size:
        raise ZipFormatError("Bad offset for central directory")
    if cd_size > MAX_DIRECTORY:
        raise ZipFormatError(f"the central directory claims {cd_size} bytes, more than the "
                             f"{MAX_DIRECTORY} guideloom reads (a damaged or hostile archive)")
    return Directory(start, cd_size, entries, concat)


def _eocd_position(tail: bytes) -> int:
    """Index of the EOCD record in ``tail`` (-1 when absent): at the very end without a
    comment, else the last signature in the comment's reach (as :mod:`zipfile` finds it)."""
    end = len(tail) - _EOCD.size
    if end < 0:
        return -1
    if tail[end:end + 4] == _EOCD_SIG and tail[-2:] == b"\0\0":
        return end
    pos = tail.rfind(_EOCD_SIG, max(0, end - MAX_COMMENT))
    return pos if 0 <= pos <= end else -1


def parse_directory(blob: bytes | memoryview, directory: Directory) -> list[Member]:
    """The entries of a central directory (``blob``, ``directory.size`` bytes).

    Raises:
        ZipFormatError: A truncated entry, a bad signature or an undecodable name.
    """
    view = memoryview(blob)
    members: list[Member] = []
    pos = 0
    while pos < directory.size:
        if pos + _CENTRAL.size > len(view):
            raise ZipFormatError("Truncated central directory")
        entry = _CENTRAL.unpack_from(view, pos)
        if entry[0] != _CENTRAL_SIG:
            raise ZipFormatError("Bad magic number for central directory")
        flags, method, crc, csize, fsize = entry[5], entry[6], entry[9], entry[10], entry[11]
        name_len, extra_len, comment_len = entry[12], entry[13], entry[14]
        offset = entry[18]
        start = pos + _CENTRAL.size
        raw = bytes(view[start:start + name_len])
        extra = bytes(view[start + name_len:start + name_len + extra_len])
        if len(raw) != name_len or len(extra) != extra_len:
            raise ZipFormatError("Truncated central directory")
        try:
            name = raw.decode("utf-8" if flags & UTF8_NAME else "cp437")
        except UnicodeDecodeError as exc:
            raise ZipFormatError(f"a member name is not UTF-8 ({exc})") from None
        fsize, csize, offset = _zip64_sizes(extra, fsize, csize, offset)
        if max(fsize, csize, offset + directory.concat) > MAX_OFFSET:
            raise ZipFormatError(f"member {name.split(chr(0), 1)[0]!r} claims a size or offset "
                                 "beyond any file (a damaged zip64 field)")
        members.append(Member(name=name.split("\0", 1)[0], name_len=name_len,
                              header_offset=offset + directory.concat, compress_size=csize,
                              file_size=fsize, method=method, crc=crc, flags=flags))
        pos = start + name_len + extra_len + comment_len
    return members


def _zip64_sizes(extra: bytes, fsize: int, csize: int, offset: int) -> tuple[int, int, int]:
    """Sizes and offset with the zip64 extra field's values where the entry says 0xFFFFFFFF."""
    pos = 0
    while pos + 4 <= len(extra):
        tag, length = struct.unpack_from("<HH", extra, pos)
        body = extra[pos + 4:pos + 4 + length]
        if len(body) != length:
            raise ZipFormatError("Corrupt extra field in a central directory entry")
        if tag == _ZIP64_EXTRA:
            values = list(struct.unpack_from(f"<{length // 8}Q", body))
            try:
                if fsize == _FFFF:
                    fsize = values.pop(0)
                if csize == _FFFF:
                    csize = values.pop(0)
                if offset == _FFFF:
                    offset = values.pop(0)
            except IndexError:
                raise ZipFormatError("Corrupt zip64 extra field") from None
        pos += 4 + length
    return fsize, csize, offset


def read_members(source: ByteSource, tail_read: int = TAIL_READ) -> list[Member]:
    """The central directory of the archive ``source``: one read of its tail, and a second one
    when the directory starts before it.

    Raises:
        ZipFormatError: The archive is not a zip or its directory is damaged.
        OSError: The bytes cannot be read.
    """
    return read_directory(source, tail_read)[0]


def read_directory(source: ByteSource, tail_read: int = TAIL_READ) -> tuple[list[Member], str]:
    """:func:`read_members` and a fingerprint of what they were parsed from (a SHA-256 of the
    central directory and of where the end records put it): an archive replaced by another
    of the same size has another fingerprint, so it may stand in for a version (an ETag)
    where the server gives none.

    Raises:
        ZipFormatError: The archive is not a zip or its directory is damaged.
        OSError: The bytes cannot be read.
    """
    size = source.size()
    if size < _EOCD.size:
        raise ZipFormatError("File is not a zip file")
    want = min(size, max(tail_read, _EOCD.size + _EOCD64.size + _LOCATOR.size))
    tail_offset = size - want
    tail = source.read(tail_offset, want)
    try:
        directory = find_directory(tail, tail_offset, size)
    except ZipFormatError:
        if tail_offset == 0 or want >= MAX_COMMENT + _EOCD.size + _EOCD64.size + _LOCATOR.size:
            raise
        return read_directory(source, MAX_COMMENT + _EOCD.size + _EOCD64.size + _LOCATOR.size)
    if directory.offset >= tail_offset:
        start = directory.offset - tail_offset
        blob: bytes | memoryview = memoryview(tail)[start:start + directory.size]
    else:
        blob = source.read(directory.offset, directory.size)
    members = parse_directory(blob, directory)
    digest = hashlib.sha256(f"{size}|{directory.offset}|{directory.size}|{directory.entries}|"
                            f"{directory.concat}|".encode())
    digest.update(blob)
    return members, digest.hexdigest()


def overlapping_members(members: Sequence[Member]) -> dict[str, str]:
    """Members whose byte ranges (local header, name, data) overlap another member's, as
    ``{member: what}``; members of one local header are left to the name check of the local
    header, which tells which entry lies."""
    spans = sorted((m.header_offset, m.header_offset + LOCAL_HEADER.size + m.name_len
                    + m.compress_size, m.name) for m in members)
    defects: dict[str, str] = {}
    reach, owner, owner_start = -1, "", -1
    for start, end, name in spans:
        if start < reach and start != owner_start:
            defects[name] = f"its bytes overlap those of member {owner!r} of the same archive"
            defects.setdefault(owner, f"its bytes overlap those of member {name!r} of the same "
                                      "archive")
        if end > reach:
            reach, owner, owner_start = end, name, start
    return defects


def following_headers(headers: Iterable[tuple[int, str]]) -> dict[int, tuple[int, str]]:
    """For each local header offset of ``headers`` (``(header_offset, name)`` pairs), the
    offset and name of the next header after it: where that member's bytes must end.

    The central directory does not record the local header's extra field, so a member's
    extent is known only once its local header is read; a local header whose extra field
    reaches over the next member's header would make that member's bytes this one's (same
    size, same CRC-32). The last member has no entry (nothing follows it).
    """
    ordered = sorted(set(headers))
    out: dict[int, tuple[int, str]] = {}
    for (offset, _), (following, name) in itertools.pairwise(ordered):
        if following > offset:  # members sharing one local header: the name check decides
            out[offset] = (following, name)
    return out


def parse_local_header(blob: bytes | memoryview, header_offset: int) -> tuple[str, int, int]:
    """``(name, name_len, data offset)`` of the local header at the start of ``blob``.

    ``blob`` holds the header and at least its name; the name is decoded as the header's flags
    say. Raises :class:`ZipFormatError` for a truncated header or a bad signature, and
    ``IndexError`` (``name_len`` bytes needed) when ``blob`` ends inside the name.
    """
    if len(blob) < LOCAL_HEADER.size:
        raise ZipFormatError("truncated zip local header")
    signature, flags, name_len, extra_len = LOCAL_HEADER.unpack_from(blob)
    if signature != LOCAL_SIG:
        raise ZipFormatError("bad zip local header signature")
    raw = bytes(blob[LOCAL_HEADER.size:LOCAL_HEADER.size + name_len])
    if len(raw) < name_len:
        raise IndexError(name_len)
    name = raw.decode("utf-8" if flags & UTF8_NAME else "cp437", "replace")
    return name, name_len, header_offset + LOCAL_HEADER.size + name_len + extra_len


# Central directories read recently, by archive and its (inode, size, mtime): a training loop
# calls iter_view once per epoch, and re-parsing a large central directory each time is waste.
_MEMBERS: BoundedCache[tuple[str, int, int, int], list[Member]] = cache("archive_listings")
_CHANGED: list[Callable[[str], None]] = []


def on_archive_changed(listener: Callable[[str], None]) -> Callable[[], None]:
    """Call ``listener(path)`` when a local archive listed before has changed since (its
    members' offsets did too): the member opener forgets the descriptor it keeps open.
    Returns the function that stops calling it."""
    _CHANGED.append(listener)
    return lambda: _CHANGED.remove(listener)


def archive_members(archive: Path | str) -> list[Member]:
    """The local archive's central directory entries (cached while the file is unchanged).

    Raises:
        GuideloomError: The archive cannot be read.
    """
    try:
        st = os.stat(archive)
        key = (str(archive), st.st_ino, st.st_size, st.st_mtime_ns)
        infos: list[Member] | None = _MEMBERS.get(key)
        if infos is None:
            # the archive changed since it was listed: so did its members' offsets
            if _MEMBERS.pop_where(lambda k: k[0] != key[0]):
                logger.debug("zip archive %s changed since it was listed", key[0])
                for listener in _CHANGED:
                    listener(key[0])
            with LocalFileSource(archive) as src:
                infos = read_members(src)
            _MEMBERS.put(key, infos)
        return infos
    except PermissionError:
        raise  # named by the byte source (guideloom.read.access)
    except (ZipFormatError, OSError) as exc:
        raise GuideloomError(f"zip archive {archive} cannot be read: {exc}") from exc
