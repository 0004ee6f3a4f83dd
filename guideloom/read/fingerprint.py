"""The identity of a job's input data, without reading member data: the index table's bytes
and, per experiment, where its bytes are and what the file system or server says of them."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from typing import Any

FINGERPRINT_HEX_CHARS = 32  # 128 bits of sha256


def local_fingerprint(index: bytes, locations: Iterable[Any]) -> str:
    """The identity of a local job's input data: the index table's bytes ``index``, and each
    experiment file's name, member, size and modification time (content is not read: that
    would cost a pass)."""
    digest = hashlib.sha256()
    digest.update(hashlib.sha256(index).digest())
    stats: dict[str, str] = {}
    for loc in locations:
        stat = stats.get(loc.path)
        if stat is None:
            st = os.stat(loc.path)
            stat = stats[loc.path] = f"{st.st_size}:{st.st_mtime_ns}"
        digest.update(f"{loc.sim_id}|{os.path.basename(loc.path)}|{loc.member}|{stat};".encode())
    return digest.hexdigest()[:FINGERPRINT_HEX_CHARS]


def remote_fingerprint(index_bytes: bytes, locations: Iterable[Any]) -> str:
    """The identity of a remote job's input: the index table's bytes and each member's
    archive URL, size, validator, offsets and CRC (no member data is read)."""
    digest = hashlib.sha256(hashlib.sha256(index_bytes).digest())
    for loc in locations:
        digest.update(f"{loc.sim_id}|{loc.path}|{getattr(loc, 'archive_size', '')}|"
                      f"{getattr(loc, 'validator', '')}|{loc.member}|{loc.header_offset}|"
                      f"{loc.size}|{loc.crc};".encode())
    return digest.hexdigest()
