"""Jenkins' lookup3 ``hashlittle``, the checksum of HDF5's version-2 metadata structures."""

from __future__ import annotations

import struct

_M = 0xFFFFFFFF
_WORDS = struct.Struct("<3I")


def _rot(x: int, k: int) -> int:
    return ((x << k) | (x >> (32 - k))) & _M


def lookup3(data: bytes | memoryview, initval: int = 0) -> int:
    """The 32-bit lookup3 hash of ``data`` (what HDF5 stores after each checksummed block)."""
    n = len(data)
    a = b = c = (0xDEADBEEF + n + initval) & _M
    if n == 0:
        return c
    pos = 0
    while n - pos > 12:
        x, y, z = _WORDS.unpack_from(data, pos)
        a = (a + x) & _M
        b = (b + y) & _M
        c = (c + z) & _M
        a = (a - c) & _M; a ^= _rot(c, 4); c = (c + b) & _M  # noqa: E702
        b = (b - a) & _M; b ^= _rot(a, 6); a = (a + c) & _M  # noqa: E702
        c = (c - b) & _M; c ^= _rot(b, 8); b = (b + a) & _M  # noqa: E702
        a = (a - c) & _M; a ^= _rot(c, 16); c = (c + b) & _M  # noqa: E702
        b = (b - a) & _M; b ^= _rot(a, 19); a = (a + c) & _M  # noqa: E702
        c = (c - b) & _M; c ^= _rot(b, 4); b = (b + a) & _M  # noqa: E702
        pos += 12
    x, y, z = _WORDS.unpack(bytes(data[pos:]).ljust(12, b"\0"))
    a = (a + x) & _M
    b = (b + y) & _M
    c = (c + z) & _M
    c ^= b; c = (c - _rot(b, 14)) & _M  # noqa: E702
    a ^= c; a = (a - _rot(c, 11)) & _M  # noqa: E702
    b ^= a; b = (b - _rot(a, 25)) & _M  # noqa: E702
    c ^= b; c = (c - _rot(b, 16)) & _M  # noqa: E702
    a ^= c; a = (a - _rot(c, 4)) & _M  # noqa: E702
    b ^= a; b = (b - _rot(a, 14)) & _M  # noqa: E702
    c ^= b; return (c - _rot(b, 24)) & _M  # noqa: E702
