"""Where one experiment's HDF5 bytes are: a :class:`Location` (a local loose file or zip
member) or a :class:`RemoteLocation` (a member of a remote archive, or a remote loose file).

Locations are small, frozen and picklable: a job's locations are shipped to Dask workers and
compared (equal locations are the same input). :attr:`Location.is_local` is the one question
code above the read package asks of them. Both satisfy :class:`guideloom.read.types.Located`:
a local location carries the remote fields as class-level defaults (zeros and empties, not
dataclass fields: nothing more to pickle or compare), a remote one as fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from guideloom.read.types import Held
from guideloom.read.zipdir import DEFLATED, LOCAL_HEADER

_NO_OPTIONS: Mapping[str, Any] = MappingProxyType({})
_NO_HEADERS: tuple[tuple[str, str], ...] = ()


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
        next_header: Where the next member's bytes begin: the offset of the first local
            header after this member's, ``None`` when none follows (or it is not known). The
            member's data, from where its *local* header's name and extra field put it, must
            end there (:func:`guideloom.read.zipmember.checked_data_offset`).
        next_member: The name of the member at ``next_header``, for messages.
    """

    sim_id: Any
    path: str
    member: str | None = None
    header_offset: int = 0
    size: int = 0
    stored: bool = True
    crc: int | None = None
    defect: str | None = None
    # derived from the other members' offsets, not part of what this input is
    next_header: int | None = field(default=None, compare=False)
    next_member: str | None = field(default=None, compare=False, repr=False)
    # what a remote location carries (see RemoteLocation); class-level defaults, not fields
    archive_size = 0
    validator = ""
    file_size = 0
    method = DEFLATED
    headers = _NO_HEADERS
    options = _NO_OPTIONS

    @property
    def is_local(self) -> bool:
        """True when the bytes are on this machine's file system (read with ``pread``)."""
        return True

    @property
    def held(self) -> Held | None:
        """``None``: the bytes are read from the file (see :class:`HeldLocation`)."""
        return None

    def cache_key(self) -> str | None:
        """The key of this member's cached HDF5 metadata: none for a local file."""
        return None

    def describe(self) -> str:
        """``path`` or ``archive::member``, for messages."""
        return self.path if self.member is None else f"{self.path}::{self.member}"


@dataclass(frozen=True)
class HeldLocation(Location):
    """A local location whose stored bytes were read into memory once (``bytes_held``), made
    by the export that hashed them (:meth:`guideloom.read.content.Hasher.start`) for its own
    decode only: never pickled or shipped (a ``memoryview`` cannot be), and equal to no plain
    :class:`Location`."""

    bytes_held: Held | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, loc: Location, held: Held) -> HeldLocation:
        """``loc`` with ``held``."""
        return cls(loc.sim_id, loc.path, loc.member, loc.header_offset, loc.size, loc.stored,
                   loc.crc, loc.defect, loc.next_header, loc.next_member, held)

    @property
    def held(self) -> Held | None:
        """The bytes held (see :class:`~guideloom.read.types.Held`)."""
        return self.bytes_held


@dataclass(frozen=True)
class RemoteLocation(Location):
    """A zip member of a remote archive (``path`` is the archive's URL), or a loose remote
    ``.h5`` file (``member`` is ``None``, its bytes start at 0, ``archive_size`` is its size).

    Attributes:
        archive_size: The archive's size in bytes (offsets are checked against it).
        validator: The archive's ETag or Last-Modified when the server gave one.
        file_size: The member's size once inflated (what a compressed member must give).
        method: The member's compression method (from the central directory).
        headers: HTTP headers for the archive's requests (kept out of ``repr``).
        options: The root's fsspec storage options (kept out of ``repr``).
    """

    member: str | None  # the zip member; None for a loose file
    archive_size: int = 0
    validator: str = ""
    file_size: int = 0  # bytes once inflated (what a deflated member must inflate to)
    method: int = field(default=DEFLATED, compare=False)
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False, compare=False)
    options: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def is_local(self) -> bool:
        """False: the bytes are fetched by range from a server or an object store."""
        return False

    def data_bounds(self) -> tuple[int, int]:
        """The lowest and highest archive offset at which the member's data may start (after
        its local header, name and extra field, and ending before the next member's local
        header); ``(0, 0)`` for a loose file."""
        if self.member is None:
            return 0, 0
        low = self.header_offset + LOCAL_HEADER.size + len(self.member.encode())
        high = self.header_offset + LOCAL_HEADER.size + 2 * 0xFFFF
        if self.next_header is not None:
            high = min(high, self.next_header - self.size)
        return low, high

    def cache_key(self) -> str:
        """The key of this member's cached HDF5 metadata."""
        return f"{archive_key(self.path, self.archive_size, self.validator)}::{self.member}" \
               f"@{self.header_offset}+{self.size}"


def archive_key(url: str, size: int, validator: str) -> str:
    """The cache key of one archive: URL, size and validator."""
    return f"{url}|{size}|{validator}"
