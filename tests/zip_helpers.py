"""Damaging zip members in place, for the tests of corrupt input."""

from __future__ import annotations

import zipfile
from pathlib import Path


def corrupt_member(archive: Path, member: str, offset_in_member: int = 0,
                   data: bytes = b"\xff" * 64) -> None:
    """Overwrite ``data`` at ``offset_in_member`` bytes into a stored member's data."""
    with zipfile.ZipFile(archive) as zf:
        info = zf.getinfo(member)
    with open(archive, "r+b") as fh:
        fh.seek(info.header_offset + 26)
        name_len = int.from_bytes(fh.read(2), "little")
        extra_len = int.from_bytes(fh.read(2), "little")
        fh.seek(info.header_offset + 30 + name_len + extra_len + offset_in_member)
        fh.write(data)


def rebuild_archive(archive: Path, replace: dict[str, bytes] | None = None,
                    compression: int = zipfile.ZIP_STORED) -> None:
    """Rewrite ``archive`` with every member (``replace`` swapping some members' bytes) and
    consistent CRCs, stored or deflated."""
    with zipfile.ZipFile(archive) as zf:
        payload = {m: zf.read(m) for m in zf.namelist()}
    payload.update(replace or {})
    partial = archive.with_name(archive.name + ".partial")
    with zipfile.ZipFile(partial, "w", compression=compression) as zf:
        for member, data in payload.items():
            zf.writestr(member, data)
    partial.replace(archive)


def member_bytes(archive: Path, member: str) -> bytes:
    """A member's bytes (zipfile checks its CRC-32 on this whole read)."""
    with zipfile.ZipFile(archive) as zf:
        return zf.read(member)


def patch_central_entry(archive: Path, member: str, *, header_offset: int | None = None,
                        compress_size: int | None = None, file_size: int | None = None) -> None:
    """Rewrite fields of ``member``'s central directory entry in place (nothing else changes:
    the local headers and data stay as they are)."""
    import struct

    with zipfile.ZipFile(archive) as zf:
        start = zf.start_dir
        count = len(zf.infolist())
    with open(archive, "r+b") as fh:
        pos = start
        for _ in range(count):
            fh.seek(pos)
            head = fh.read(46)
            assert head[:4] == b"PK\x01\x02"
            n, m, k = struct.unpack("<HHH", head[28:34])
            if fh.read(n).decode("utf-8", "replace") == member:
                for field, where in ((compress_size, 20), (file_size, 24), (header_offset, 42)):
                    if field is not None:
                        fh.seek(pos + where)
                        fh.write(struct.pack("<I", field))
                return
            pos += 46 + n + m + k
    raise KeyError(member)


def smuggle_member(archive: Path, victim: str, donor: str) -> int:
    """Rewrite stored ``archive`` so that ``victim``'s local header's extra field reaches over
    ``donor``'s local header: ``victim``'s data is ``donor``'s bytes, with ``donor``'s size and
    CRC-32 in its central directory entry, and ``donor``'s entry points at its header inside
    that extra field. Measured by the central directory alone (which has no local extra
    field), no two members overlap. Returns ``donor``'s new header offset.

    The extra field is one well-formed record (tag 0xCAFE): zeros as long as ``donor``'s data,
    then ``donor``'s local header and name; ``victim``'s data follows it.
    """
    import struct

    with zipfile.ZipFile(archive) as zf:
        payload = {m: zf.read(m) for m in zf.namelist()}
    data = payload[donor]
    header = zipfile.ZipInfo(donor, date_time=(2026, 1, 1, 0, 0, 0))
    header.compress_type = zipfile.ZIP_STORED
    header.CRC, header.compress_size, header.file_size = zipfile.crc32(data), len(data), len(data)
    body = bytes(len(data)) + header.FileHeader()
    assert len(body) + 4 <= 0xFFFF, "the donor must fit in one extra field"
    partial = archive.with_name(archive.name + ".partial")
    with zipfile.ZipFile(partial, "w") as zf:
        for member, blob in payload.items():
            if member == donor:
                continue
            if member == victim:
                info = zipfile.ZipInfo(victim, date_time=(2026, 1, 1, 0, 0, 0))
                info.extra = struct.pack("<HH", 0xCAFE, len(body)) + body
                at = zf.fp.tell()
                zf.writestr(info, data)
                moved = at + 30 + len(victim.encode()) + 4 + len(data)
            else:
                zf.writestr(member, blob)
        zf.writestr(donor, data)  # its entry; the copy it points at is moved below
    partial.replace(archive)
    patch_central_entry(archive, donor, header_offset=moved)
    return moved


def forge_crc(data: bytes, position: int, target: int) -> bytes:
    """``data`` with its 4 bytes at ``position`` replaced so that its CRC-32 is ``target``.

    CRC-32 is affine over GF(2): for messages of one length, ``crc(a ^ b) = crc(a) ^ crc(b)
    ^ crc(0)``. So the CRC of ``data`` with ``x`` at ``position`` is the CRC with zeros there
    XOR a linear function of ``x``'s 32 bits, whose columns are computed here (one CRC per
    bit) and the system solved by Gaussian elimination (4 consecutive bytes can reach any
    CRC-32).
    """
    import zlib

    n = len(data)
    assert 0 <= position <= n - 4

    def with_x(base: bytes, x: int) -> bytes:
        return base[:position] + x.to_bytes(4, "little") + base[position + 4:]

    zeros = bytes(n)
    zero_crc = zlib.crc32(zeros)
    columns = [zlib.crc32(with_x(zeros, 1 << bit)) ^ zero_crc for bit in range(32)]
    want = target ^ zlib.crc32(with_x(data, 0))
    # solve sum(x_bit * columns[bit]) = want over GF(2): rows are the 32 CRC bits
    rows = [(sum(((columns[bit] >> r) & 1) << bit for bit in range(32)), (want >> r) & 1)
            for r in range(32)]
    x, pivots = 0, []
    for bit in range(32):
        pick = next(k for k in range(len(pivots), 32) if (rows[k][0] >> bit) & 1)
        rows[len(pivots)], rows[pick] = rows[pick], rows[len(pivots)]
        pivot = rows[len(pivots)]
        rows = [(r[0] ^ pivot[0], r[1] ^ pivot[1]) if k != len(pivots) and (r[0] >> bit) & 1
                else r for k, r in enumerate(rows)]
        pivots.append(bit)
    for k, bit in enumerate(pivots):  # reduced: row k holds bit k alone
        if rows[k][1]:
            x |= 1 << bit
    forged = with_x(data, x)
    assert zlib.crc32(forged) == target
    return forged
