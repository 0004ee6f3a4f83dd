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
