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


def location_tokens(locations: Iterable[Any]) -> list[str]:
    """What each experiment's input is, one short text per location, for telling an unchanged
    experiment from a changed one when an export is updated (no member data is read).

    A zip member (local or remote) is its name, stored size, CRC-32 and compression, wherever
    its archive is (an archive that gains members keeps the others' tokens); a local loose file
    its name, size and modification time; a remote loose file its name, size and the server's
    validator. Equal tokens: the same bytes as far as the directory or the server can tell.
    """
    stats: dict[str, str] = {}
    tokens = []
    for loc in locations:
        if loc.member is not None:
            tokens.append(f"zip:{loc.member}:{loc.size}:{loc.crc}:{int(loc.stored)}")
        elif loc.is_local:
            stat = stats.get(loc.path)
            if stat is None:
                st = os.stat(loc.path)
                stat = stats[loc.path] = f"{st.st_size}:{st.st_mtime_ns}"
            tokens.append(f"h5:{os.path.basename(loc.path)}:{stat}")
        else:
            name = loc.path.rsplit("/", 1)[-1]
            tokens.append(f"url:{name}:{getattr(loc, 'archive_size', '')}:"
                          f"{getattr(loc, 'validator', '')}")
    return tokens


def input_sizes(locations: Iterable[Any]) -> list[int]:
    """Bytes each experiment's input takes where it is (a zip member's stored size, a loose
    file's size): what reading it costs at most."""
    sizes = []
    for loc in locations:
        if loc.member is not None:
            sizes.append(int(loc.size))
        elif loc.is_local:
            sizes.append(os.stat(loc.path).st_size)
        else:
            sizes.append(int(getattr(loc, "archive_size", 0) or 0))
    return sizes
