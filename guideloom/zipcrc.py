"""CRC-32 checks of stored zip members, read in place (the ``verify_crc`` option).

A stored member is read in place by ``pread`` (see :mod:`guideloom.sources`), usually only in
part: HDF5 metadata and the chunks a view needs. Such partial reads are trusted by default; with
``verify_crc=True`` the whole member is streamed once, in :data:`CRC_BLOCK` pieces, through a
CRC-32 and compared with the archive's central directory before any of its data is used. The
result is remembered per process for each (archive, member, archive size and mtime), so the
fields of one experiment, the schema probe and later epochs do not check it again.
"""

from __future__ import annotations

import os
import zlib
from typing import Any, Protocol

from guideloom.caches import BoundedCache, cache
from guideloom.errors import CorruptDataError
from guideloom.os_support import preadinto

CRC_BLOCK = 4 << 20  # bytes per pread: large enough for full speed, small enough to stay cached


class Crc32(Protocol):
    """``crc32(data[, value])``: the running CRC-32 of ``data`` continued from ``value``
    (default 0), as :func:`zlib.crc32` (positional arguments only)."""

    def __call__(self, data: Any, value: int = 0, /) -> int: ...


def _crc32_function() -> Crc32:
    """libdeflate's CRC-32 (from the ``deflate`` package) when present, else zlib's; both give
    the zip CRC-32 (benchmarks/crc_cost.py measures them)."""
    try:
        import deflate
    except ImportError:  # pragma: no cover - deflate is a dependency
        return zlib.crc32
    return getattr(deflate, "crc32", zlib.crc32)


crc32 = _crc32_function()

# What verify_member found per member: "" when intact, else what the data gave.
_verified: BoundedCache[tuple[str, str, int, int, int], str] = cache("crc_verdicts")


def member_crc(fd: int, start: int, size: int, block: int = CRC_BLOCK) -> tuple[int, int]:
    """CRC-32 of ``size`` bytes of ``fd`` from ``start``, read in ``block`` pieces.

    Returns:
        ``(crc, bytes read)``; fewer bytes than ``size`` means the file ends early.
    """
    buf = memoryview(bytearray(max(1, min(block, size))))
    crc, pos = 0, 0
    while pos < size:
        got = preadinto(fd, buf[:min(block, size - pos)], start + pos)
        if got <= 0:
            break
        crc = crc32(buf[:got], crc)
        pos += got
    return crc & 0xFFFFFFFF, pos


def verify_member(fd: int, start: int, size: int, expected: int, *, archive: str, member: str,
                  sim_id: object) -> None:
    """Check a stored member's bytes (``size`` bytes of ``fd`` from ``start``) against
    ``expected``, its CRC-32 from the central directory.

    The outcome is remembered while the archive keeps its size and modification time, so a
    member is read once per process.

    Raises:
        CorruptDataError: The CRC differs or the archive ends inside the member; the message
            names the experiment, the archive and the member.
    """
    st = os.fstat(fd)
    key = (archive, member, start, st.st_size, st.st_mtime_ns)
    found = _verified.get(key)
    if found is None:
        crc, got = member_crc(fd, start, size)
        found = "" if got == size and crc == expected else (
            f"{crc:08x}" if got == size else f"only {got} of its {size} bytes")
        _verified.put(key, found)
    if found:
        raise CorruptDataError(
            f"experiment {sim_id}: {archive}::{member}: CRC-32 mismatch (the archive records "
            f"{expected:08x}, the member's data gives {found}); the member is damaged",
            sim_id=sim_id, file=f"{archive}::{member}",
        )


def forget_verified() -> None:
    """Drop what :func:`verify_member` remembers (tests and benchmarks measure cold checks)."""
    _verified.clear()
