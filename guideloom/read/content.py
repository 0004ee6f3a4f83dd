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

import contextlib
import itertools
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import blake3

from guideloom.errors import ExperimentReadError
from guideloom.read.byte_source import ByteSource, source_for
from guideloom.read.locations import HeldLocation, Location
from guideloom.read.types import Held
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
# buffers finished Hashers read inputs into, for the next one: a fresh 25 MB buffer costs
# ~6,000 page faults as it is first written, and an op10 partition may hold one experiment
_spare: BoundedCache[int, bytearray] = cache("input_buffers", weigh=lambda _key, buf: len(buf))
_spare_serial = itertools.count()
_taking = threading.Lock()


def content_digest(loc: Location) -> Hashed:
    """The BLAKE3 digest (hex) of ``loc``'s stored bytes, read sequentially.

    Raises:
        ExperimentReadError: The input cannot be read (names the experiment and the file).
        CorruptDataError: The member's local header is damaged (names the experiment).
    """
    t0, cpu0 = time.perf_counter(), time.thread_time()
    source = _source(loc)
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
            raise _ends_early(loc, got, size)
        return Hashed(hasher.hexdigest(), size, time.perf_counter() - t0,
                      time.thread_time() - cpu0)
    except OSError as exc:
        raise _read_error(loc, exc) from exc
    finally:
        source.close()


def _hash_fd(hasher: blake3.blake3, fd: int, start: int, size: int,
             into: memoryview | None = None) -> int:
    """Hash ``size`` bytes of ``fd`` from ``start``; return the bytes read. ``into`` (at least
    ``size`` bytes) keeps them: each block is read into its place there and hashed at once,
    while it is still in the CPU's cache."""
    if size and os_support.HAS_FADVISE:
        os.posix_fadvise(fd, start, size, os.POSIX_FADV_SEQUENTIAL)
    buf = memoryview(bytearray(max(1, min(HASH_BLOCK, size)))) if into is None else into
    pos = 0
    while pos < size:
        n = min(HASH_BLOCK, size - pos)
        block = buf[:n] if into is None else buf[pos:pos + n]
        got = os_support.preadinto(fd, block, start + pos)
        if got <= 0:
            break
        hasher.update(block[:got])
        pos += got
    return pos


def _source(loc: Location) -> ByteSource:
    """The source of ``loc``'s bytes (an error names the experiment and the file)."""
    try:
        return source_for(loc)
    except OSError as exc:
        raise _read_error(loc, exc) from exc


def _ends_early(loc: Location, got: int, size: int) -> ExperimentReadError:
    return ExperimentReadError(
        f"experiment {loc.sim_id}: {loc.describe()}: only {got} of its {size} bytes could be "
        "read for its content digest (the file ends early)",
        sim_id=loc.sim_id, file=loc.describe())


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


def hold_limit() -> int:
    """The largest local input (bytes) a :class:`Hasher` reads into memory (``input_hold_mb``,
    default 256 MiB; 0: none)."""
    from guideloom import config

    return int(float(config.get("input_hold_mb")) * (1 << 20))


@dataclass(frozen=True)
class Hashing:
    """One input being hashed by a :class:`Hasher`: ``location`` is what to decode it from
    (the input held in memory when it was read for its digest, else ``loc`` itself), and
    ``future`` gives its :class:`Hashed` (or the error of :func:`content_digest`)."""

    location: Location
    future: Future[Hashed]

    def result(self) -> Hashed:
        """The digest (waits for the helper thread, if one hashes it)."""
        return self.future.result()


def _done(hashed: Hashed) -> Future[Hashed]:
    done: Future[Hashed] = Future()
    done.set_result(hashed)
    return done


class Hasher:
    """Hashes the inputs an export decodes, one at a time (the export's partitions).

    A local loose file or stored member of at most ``limit`` bytes (:func:`hold_limit`) is
    read once, into a buffer this hasher keeps and reuses, each block hashed as it lands; the
    record is then decoded from that buffer (:class:`~guideloom.read.locations.HeldLocation`:
    the chunks in place, no second read), so the digest is that of exactly the bytes the row
    was made from. Any other input (remote, deflated, or larger) is hashed on a helper thread
    while the caller decodes it (BLAKE3 and ``pread`` run outside the GIL). Close it when
    done: that drops the buffer.
    """

    def __init__(self, limit: int | None = None) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self.limit = hold_limit() if limit is None else limit
        self._buffer = bytearray()
        self._lent: memoryview | None = None  # the buffer as the last HeldLocation holds it

    def start(self, loc: Location, known: Hashed | None = None) -> Hashing:
        """Start hashing ``loc``'s input (see the class). ``known``: its digest, already
        proven (:meth:`ReadCheck.known`): nothing is read and no thread starts. The bytes held
        for the input before are released (its ``HeldLocation`` reads no more).

        Raises:
            ExperimentReadError: Reading a held input failed or it ended early (names the
                experiment and the file).
            CorruptDataError: A held member's local header is damaged.
        """
        self._take_back()
        if known is not None:
            return Hashing(loc, _done(known))
        if loc.is_local and loc.stored and self.limit > 0:  # a deflated one: inflated from
            # the archive (its declared size is read from the directory there)
            held = self._hold(loc)
            if held is not None:
                return Hashing(HeldLocation.of(loc, held[0]), _done(held[1]))
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="guideloom-hash")
        return Hashing(loc, self._pool.submit(content_digest, loc))

    def _hold(self, loc: Location) -> tuple[Held, Hashed] | None:
        """``loc``'s bytes read into the buffer and hashed; ``None`` when over the limit."""
        t0, cpu0 = time.perf_counter(), time.thread_time()
        source = _source(loc)
        try:
            fd = source.fd
            assert fd is not None, "a local input's source reads its descriptor"
            if loc.member is None:
                begin = start = 0
                size = source.size()
            else:  # from the local header, checked again when the record opens the held bytes
                begin = loc.header_offset
                start, _ = read_local_header(source, loc)
                size = int(loc.size)
            if start + size - begin > self.limit:
                return None
            room = self._room(start + size - begin)
            head = start - begin
            got = os_support.preadinto(fd, room[:head], begin) if head else 0
            hasher = blake3.blake3()
            if got == head:
                got = _hash_fd(hasher, fd, start, size, into=room[head:])
            if got != size:
                raise _ends_early(loc, got, size)
            digest = hasher.hexdigest()
            self._lent = room.toreadonly()
            return (Held(self._lent, begin, digest),
                    Hashed(digest, size, time.perf_counter() - t0, time.thread_time() - cpu0))
        except OSError as exc:
            raise _read_error(loc, exc) from exc
        finally:
            source.close()

    def _room(self, n: int) -> memoryview:
        """``n`` bytes of the buffer: this hasher's, a spare one of a finished hasher, or a new
        one; never one a view of an earlier input's bytes is still alive on (a reader's)."""
        buf = self._buffer
        if len(buf) < max(n, 1) or not _unshared(buf):
            self._buffer = bytearray()  # the old one first: not two at once
            buf = self._buffer = _take_spare(n) or bytearray(max(n, 1))
        return memoryview(buf)[:n]

    def _take_back(self) -> None:
        """Release the view the last held input was given (its readers are done)."""
        lent, self._lent = self._lent, None
        if lent is not None:
            with contextlib.suppress(BufferError):  # still read directly: _room takes another
                lent.release()

    def close(self) -> None:
        """Stop the helper thread (after the hash it runs, if any); give the buffer to the
        next hasher of this process (the ``input_buffers`` cache bounds what is kept)."""
        self._take_back()
        buf, self._buffer = self._buffer, bytearray()
        if buf and _unshared(buf):
            _spare.put(next(_spare_serial), buf)
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


def _take_spare(n: int) -> bytearray | None:
    """A spare buffer of at least ``n`` bytes (taken out of the cache), or ``None``."""
    with _taking:  # no two hashers take the same buffer
        for key in _spare.keys():  # noqa: SIM118 - a BoundedCache is not iterable
            buf = _spare.get(key)
            if isinstance(buf, bytearray) and len(buf) >= n:
                _spare.pop(key)
                return buf
    return None


def _unshared(buf: bytearray) -> bool:
    """Whether no view of ``buf`` exists (a bytearray with views cannot change size; a byte
    removed and appended again reallocates nothing)."""
    try:
        del buf[-1]
    except BufferError:
        return False
    buf.append(0)
    return True


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

