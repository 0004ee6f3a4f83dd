"""The identity of a job's input data, without reading member data: the index table's bytes
and, per experiment, where its bytes are and what the file system or server says of them."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from guideloom.read.types import Located

FINGERPRINT_HEX_CHARS = 32  # 128 bits of sha256


def local_fingerprint(index: bytes, locations: Iterable[Any]) -> str:
    """The identity of a local job's input data: the index table's bytes ``index``, and each
    experiment file's name, member, size, modification and change time, inode and device
    (content is not read: that would cost a pass; an input changed between an interrupted run
    and its rerun makes another job, whose partitions are read again)."""
    digest = hashlib.sha256()
    digest.update(hashlib.sha256(index).digest())
    stats: dict[str, str] = {}
    for loc in locations:
        stat = stats.get(loc.path)
        if stat is None:
            st = os.stat(loc.path)
            stat = stats[loc.path] = (f"{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}:"
                                      f"{st.st_ino}:{st.st_dev}")
        digest.update(f"{loc.sim_id}|{os.path.basename(loc.path)}|{loc.member}|{stat};".encode())
    return digest.hexdigest()[:FINGERPRINT_HEX_CHARS]


def remote_fingerprint(index_bytes: bytes, locations: Iterable[Located]) -> str:
    """The identity of a remote job's input: the index table's bytes and each member's
    archive URL, size, validator, offsets and CRC (no member data is read)."""
    digest = hashlib.sha256(hashlib.sha256(index_bytes).digest())
    for loc in locations:
        digest.update(f"{loc.sim_id}|{loc.path}|{loc.archive_size}|"
                      f"{loc.validator}|{loc.member}|{loc.header_offset}|"
                      f"{loc.size}|{loc.crc};".encode())
    return digest.hexdigest()


# what each piece of evidence is called in a reason ("ctime changed")
EVIDENCE_NAMES = {
    "kind": "where it is read from", "file": "file name", "size": "size", "mtime_ns": "mtime",
    "ctime_ns": "ctime", "ino": "inode", "dev": "device", "member": "member name",
    "stored_size": "stored size", "crc": "CRC-32", "offset": "offset", "stored": "compression",
    "validator": "server checksum (MD5/ETag)",
}


def input_evidence(locations: Iterable[Located]) -> list[dict[str, Any]]:
    """The cheap evidence of each experiment's input, read without its data: what an update
    compares before it trusts that the input is unchanged (see
    :func:`guideloom.export.update.plan_update`).

    A local input: its file's (the loose ``.h5`` or the zip archive) base name, size,
    ``mtime_ns``, ``ctime_ns``, inode and device (one ``stat`` per file; ``ctime`` cannot be
    set back by a user, so ``os.utime``/``touch -r``/``cp -p``/``rsync -t`` show), and for a
    zip member also the member's name, stored size, CRC-32, header offset and compression. A
    remote input: its file's name, size and the server's checksum or validator (a Dataverse
    MD5, an ETag or Last-Modified), and the member's entry. Equal evidence proves nothing by
    itself (same size and CRC-32 are forgeable): only with the "racy" rule, see
    :func:`trusted`.
    """
    stats: dict[str, dict[str, Any]] = {}
    out = []
    for loc in locations:
        if loc.is_local:
            seen = stats.get(loc.path)
            if seen is None:
                st = os.stat(loc.path)
                seen = stats[loc.path] = {
                    "kind": "local", "file": os.path.basename(loc.path), "size": st.st_size,
                    "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns, "ino": st.st_ino,
                    "dev": st.st_dev}
            evidence = dict(seen)
        else:
            evidence = {"kind": "remote", "file": loc.path.rsplit("/", 1)[-1],
                        "size": int(loc.archive_size or 0),
                        "validator": str(loc.validator or "")}
        if loc.member is not None:
            evidence.update(member=loc.member, stored_size=int(loc.size), crc=loc.crc,
                            offset=int(loc.header_offset), stored=bool(loc.stored))
        out.append(evidence)
    return out


def evidence_differs(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What differs between two inputs' evidence (:func:`input_evidence`), one phrase each
    (``["ctime changed", "inode changed"]``); empty when all of it is equal."""
    if old.get("kind") != new.get("kind"):
        return [f"read from {new.get('kind')} data, recorded from {old.get('kind')} data"]
    keys = [k for k in EVIDENCE_NAMES if k in old or k in new]
    return [f"{EVIDENCE_NAMES[k]} changed" for k in keys if old.get(k) != new.get(k)]


def racy_margin_ns() -> int:
    """How much older than the export's start an input's last change must be for its
    unchanged evidence to be trusted (``input_racy_s``, default 2 s: the kernel stamps files
    with a coarse clock a tick behind the one that timed the start, and some file systems keep
    1 or 2 s of timestamp granularity)."""
    from guideloom import config

    return int(float(config.get("input_racy_s")) * 1e9)


def trusted(evidence: Mapping[str, Any], started_ns: int) -> bool:
    """Whether unchanged ``evidence`` proves an unchanged input: a remote server's checksum
    always does (the server is trusted to change its checksum or validator with the bytes);
    a local file only when it was last changed (its ``mtime`` and ``ctime``) at least
    :func:`racy_margin_ns` before the export that recorded it started (git's "racy" rule: a
    file changed within the same timestamp tick as it was looked at can change again without
    its times showing it)."""
    if evidence.get("kind") == "remote":
        return bool(evidence.get("validator"))
    changed = max(int(evidence.get("mtime_ns", 0)), int(evidence.get("ctime_ns", 0)))
    return changed + racy_margin_ns() < started_ns


def input_sizes(locations: Iterable[Located]) -> list[int]:
    """Bytes each experiment's input takes where it is (a zip member's stored size, a loose
    file's size): what reading it costs at most."""
    sizes = []
    for loc in locations:
        if loc.member is not None:
            sizes.append(int(loc.size))
        elif loc.is_local:
            sizes.append(os.stat(loc.path).st_size)
        else:
            sizes.append(int(loc.archive_size or 0))
    return sizes
