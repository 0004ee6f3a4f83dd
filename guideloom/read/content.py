"""The content digest of an experiment's input: a cryptographic hash of the bytes it is stored
as (a loose ``.h5`` file's bytes, or a zip member's stored, possibly compressed, bytes).

It is what proves that an input is unchanged when its cheap evidence (size, times, inode,
CRC-32, a server's checksum) cannot (see :mod:`guideloom.read.fingerprint` and
:mod:`guideloom.export.update`). The hash is BLAKE3 (the ``blake3`` package, a binding of the
reference Rust crate): 256 bits, cryptographic, and measured at 4.8 GB/s on one core of the
development machine, against 1.1 GB/s for ``hashlib.sha256`` (with SHA-NI) and 0.8 GB/s for
``hashlib.blake2b``; hashing a member costs little beside reading it.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import blake3

from guideloom.errors import ExperimentReadError
from guideloom.read.byte_source import source_for
from guideloom.read.locations import Location
from guideloom.read.zipmember import read_bytes, read_local_header
from guideloom.runtime import os_support
from guideloom.runtime.caches import BoundedCache, cache

logger = logging.getLogger(__name__)

HASH_NAME = "blake3"  # what provenance.json records as the digest's algorithm
HASH_BLOCK = 1 << 20  # bytes read and hashed at a time (local files; 1 MiB: ~10% less CPU than
# 4 MiB, the block stays in the cache between the copy and the hash)
REMOTE_BLOCK = 16 << 20  # bytes fetched and hashed at a time (one range request)
HASH_THREADS = 4  # inputs hashed at once by :func:`content_digests`


@dataclass(frozen=True)
class Hashed:
    """One input's content digest, the bytes hashed for it, the seconds it took and the
    CPU seconds of its thread."""

    digest: str
    nbytes: int
    seconds: float = 0.0
    cpu_s: float = 0.0


# the digests this process hashed of local inputs, by the input and its file's stat, kept only
# for a file last changed well before its hash began (see ReadCheck.known)
_known: BoundedCache[tuple[Any, ...], Hashed] = cache("content_digests")


def content_digest(loc: Location) -> Hashed:
    """The BLAKE3 digest (hex) of ``loc``'s stored bytes, read sequentially.

    Raises:
        ExperimentReadError: The input cannot be read (names the experiment and the file).
        CorruptDataError: The member's local header is damaged (names the experiment).
    """
    t0, cpu0 = time.perf_counter(), time.thread_time()
    try:
        source = source_for(loc)
    except OSError as exc:
        raise _read_error(loc, exc) from exc
    try:
        hasher = blake3.blake3()
        fd = source.fd
        if fd is not None:
            start, _ = read_local_header(source, loc)
            size = source.size() if loc.member is None else int(loc.size)
            got = _hash_fd(hasher, fd, start, size)
        else:  # a remote input: a small one in one request with its local header
            size = int(loc.size) if loc.member is not None else source.size()
            first = size if size <= REMOTE_BLOCK else 0
            start, head = read_local_header(source, loc, first=first)
            hasher.update(head)
            got = len(head)
            for offset in range(got, size, REMOTE_BLOCK):
                block = read_bytes(source, start + offset, min(REMOTE_BLOCK, size - offset), loc)
                hasher.update(block)
                got += len(block)
        if got != size:
            raise ExperimentReadError(
                f"experiment {loc.sim_id}: {loc.describe()}: only {got} of its {size} bytes "
                "could be read for its content digest (the file ends early)",
                sim_id=loc.sim_id, file=loc.describe())
        return Hashed(hasher.hexdigest(), size, time.perf_counter() - t0,
                      time.thread_time() - cpu0)
    except OSError as exc:
        raise _read_error(loc, exc) from exc
    finally:
        source.close()


def _hash_fd(hasher: blake3.blake3, fd: int, start: int, size: int) -> int:
    """Hash ``size`` bytes of ``fd`` from ``start``; return the bytes read."""
    if size and os_support.HAS_FADVISE:
        os.posix_fadvise(fd, start, size, os.POSIX_FADV_SEQUENTIAL)
    buf = memoryview(bytearray(max(1, min(HASH_BLOCK, size))))
    pos = 0
    while pos < size:
        got = os_support.preadinto(fd, buf[:min(HASH_BLOCK, size - pos)], start + pos)
        if got <= 0:
            break
        hasher.update(buf[:got])
        pos += got
    return pos


def _read_error(loc: Location, exc: OSError) -> ExperimentReadError:
    return ExperimentReadError(
        f"experiment {loc.sim_id}: {loc.describe()}: reading it for its content digest failed "
        f"({exc})", sim_id=loc.sim_id, file=loc.describe())


def content_digests(locations: Sequence[Location],
                    on_done: Callable[[int, Hashed], None] | None = None,
                    threads: int = HASH_THREADS) -> list[Hashed]:
    """:func:`content_digest` of each location, ``threads`` at a time (reads and BLAKE3 run
    outside the GIL), in the order given; ``on_done(k, hashed)`` after each."""
    if not locations:
        return []
    if len(locations) == 1 or threads <= 1:
        out = []
        for k, loc in enumerate(locations):
            out.append(content_digest(loc))
            if on_done is not None:
                on_done(k, out[-1])
        return out
    with ThreadPoolExecutor(min(threads, len(locations)),
                            thread_name_prefix="guideloom-hash") as pool:
        futures = [pool.submit(content_digest, loc) for loc in locations]
        results = []
        for k, future in enumerate(futures):
            results.append(future.result())
            if on_done is not None:
                on_done(k, results[-1])
    total = sum(h.nbytes for h in results)
    logger.debug("hashed %d inputs (%d bytes)", len(results), total)
    return results


class Hasher:
    """Hashes one input at a time on a helper thread, while the caller decodes it (the
    export's partitions: the decode and the hash read the same pages, and BLAKE3 and
    ``pread`` run outside the GIL). Close it when done."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None

    def start(self, loc: Location, known: Hashed | None = None) -> Future[Hashed]:
        """Start hashing ``loc``'s input; the future's result is its :class:`Hashed` (or the
        error of :func:`content_digest`). ``known``: its digest, already proven
        (:meth:`ReadCheck.known`): the future holds it at once and no thread starts."""
        if known is not None:
            done: Future[Hashed] = Future()
            done.set_result(known)
            return done
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="guideloom-hash")
        return self._pool.submit(content_digest, loc)

    def close(self) -> None:
        """Stop the helper thread (after the hash it runs, if any)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def input_stat(loc: Location) -> tuple[int, ...] | None:
    """What a local input's file (the loose ``.h5`` or the archive) says of itself now: size,
    ``mtime_ns``, ``ctime_ns``, inode and device; ``None`` for a remote input."""
    if not loc.is_local:
        return None
    try:
        st = os.stat(loc.path)
    except OSError as exc:
        raise _read_error(loc, exc) from exc
    return st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev


class ReadCheck:
    """Whether an input stayed the same while an export decoded and hashed it: its file's
    stat before (:meth:`begin`) and after (:meth:`end`) must be equal, and a file changed
    within ``racy_ns`` of the first stat (a change in the same clock tick would not show in
    its times) is hashed again after the decode, to the same digest. So the digest recorded
    is of the bytes the row was made from."""

    def __init__(self, loc: Location, racy_ns: int):
        self.loc, self.racy_ns = loc, racy_ns
        self.started_ns = time.time_ns()
        self.before = input_stat(loc)
        self._recorded = False  # known() found this input's digest recorded already

    def known(self) -> Hashed | None:
        """The digest this process (or another of this user: :func:`_from_disk`, the user's
        private cache folder) hashed of this very input (the same file and member) in the
        same state, or ``None``.

        The state is the file's stat taken now (size, ``mtime_ns``, ``ctime_ns``, inode,
        device); a digest is kept (by :meth:`end`) only when the file was last changed more
        than ``racy_ns`` before its hash began. A change since would show in the stat
        (``ctime`` cannot be set back), so an equal stat proves the bytes are the ones hashed:
        the rule by which an update trusts unchanged evidence
        (:func:`guideloom.read.fingerprint.trusted`). Remote inputs are hashed each time.
        """
        key = self._key(self.before)
        if key is None:
            return None
        found = _known.get(key)
        if found is None:
            found = _from_disk(key)  # another process of this user hashed it
            if found is not None:
                _known.put(key, found)
        self._recorded = found is not None  # end() need not record it again
        return None if found is None else Hashed(found.digest, found.nbytes)  # no time spent

    def _key(self, stat: tuple[int, ...] | None) -> tuple[Any, ...] | None:
        if stat is None:
            return None
        loc = self.loc
        member = (None if loc.member is None
                  else (loc.member, int(loc.header_offset), int(loc.size), loc.crc))
        return (loc.path, member, *stat)

    def end(self, hashed: Hashed) -> None:
        """Raise :class:`ExperimentReadError` when the input changed while it was read;
        else keep ``hashed`` for :meth:`known` when the file's last change is old enough."""
        loc, after = self.loc, input_stat(self.loc)
        if after != self.before:
            raise ExperimentReadError(
                f"experiment {loc.sim_id}: {loc.describe()} changed while the export read it "
                "(its size, times or inode moved); run the export again",
                sim_id=loc.sim_id, file=loc.describe())
        if after is not None and max(after[1], after[2]) + self.racy_ns >= self.started_ns \
                and content_digest(loc).digest != hashed.digest:
            raise ExperimentReadError(
                f"experiment {loc.sim_id}: {loc.describe()} changed while the export read it "
                "(two hashes of it differ); run the export again",
                sim_id=loc.sim_id, file=loc.describe())
        if after is not None and max(after[1], after[2]) + self.racy_ns < self.started_ns \
                and not self._recorded:
            key = self._key(after)
            if key is not None:
                _known.put(key, hashed)
                _to_disk(key, hashed)


# --- across processes: the user's private cache ------------------------------------------------
DIGEST_KIND = "input-digest"  # entries of guideloom.read.metacache (the user's 0700 folder)


def _disk_key(key: tuple[Any, ...]) -> str:
    return json.dumps(key, separators=(",", ":"), default=str)


def _from_disk(key: tuple[Any, ...]) -> Hashed | None:
    """The digest a process of this user recorded for this very input in this very state (the
    same key as :data:`_known`'s: path, member and the file's full stat), or ``None``."""
    from guideloom.read.metacache import process_cache

    doc = process_cache().get(DIGEST_KIND, _disk_key(key))
    if not isinstance(doc, dict):
        return None
    digest, nbytes = doc.get("digest"), doc.get("nbytes")
    if (not isinstance(digest, str) or len(digest) != 64 or type(nbytes) is not int
            or nbytes < 0 or any(c not in "0123456789abcdef" for c in digest)):
        return None
    return Hashed(digest, nbytes)


def _to_disk(key: tuple[Any, ...], hashed: Hashed) -> None:
    """Record ``hashed`` for :func:`_from_disk` (the cache never fails an export)."""
    from guideloom.read.metacache import process_cache

    process_cache().put(DIGEST_KIND, _disk_key(key), {"digest": hashed.digest,
                                                      "nbytes": hashed.nbytes})

