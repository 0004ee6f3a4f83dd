"""The archives layer, member half: opening one zip member over any byte source.

Every check of a member is written here once, for local and remote archives alike:

- the defect found when the archive was listed (an entry overlapping another) is raised;
- the local header is read (with the member's first bytes when asked, one range) and must be
  a local header naming the member the central directory entry names, whose name and extra
  field leave the data ending before the next member's local header (:func:`checked_data_offset`,
  :func:`check_extent`);
- with ``verify_crc`` a stored member's CRC-32 is checked before its data is used, streamed
  once in :data:`CRC_BLOCK` pieces; the verdict is remembered per member while the archive
  keeps its size and modification time (local) or its size and validator (remote), so the
  fields of one experiment, the schema probe and later epochs do not check it again;
- a compressed member is inflated whole into memory, bounded: its declared size is checked
  against what deflate can produce from its compressed bytes and against
  :func:`inflate_budget`, the output may never exceed it, and its CRC-32 is always checked.

The result is a :class:`Span`: ``size`` bytes from ``base`` of a byte source (the archive
itself for a stored member, an in-memory source for an inflated one). The zip directory
itself is parsed by :mod:`guideloom.read.zipdir`.
"""

from __future__ import annotations

import bz2
import logging
import lzma
import os
import struct
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

import psutil

try:
    import resource
except ImportError:  # Windows
    resource = None  # type: ignore[assignment]

from guideloom.errors import CorruptDataError, ExperimentReadError, ZipFormatError
from guideloom.read.byte_source import ByteSource, LocalFileSource, MemorySource, source_for
from guideloom.read.handles import ArchiveHandles, process_handles
from guideloom.read.zipdir import (
    BZIP2,
    DEFLATED,
    LOCAL_HEADER,
    LZMA,
    on_archive_changed,
    parse_local_header,
    read_members,
)
from guideloom.runtime.caches import BoundedCache, cache
from guideloom.runtime.os_support import pread, preadinto

if TYPE_CHECKING:
    from guideloom.read.types import Located as Location

logger = logging.getLogger(__name__)
# a local archive rewritten since it was listed: the descriptor kept open for it retires (its
# members' offsets changed with it), and the next member opened reads the new file
on_archive_changed(process_handles().retire)

NAME_READ = 256  # name bytes read with a local header at once (a longer one costs a read more)
NAME_SLACK = 64  # bytes for the local header's extra field when the name is known
DEFLATE_MAX_RATIO = 1032  # deflate's largest expansion (258-byte matches from 2-bit codes)
DEFLATE_SLACK = 1 << 16  # … plus a margin for tiny members
INFLATE_MEMORY_SHARE = 0.5  # of the memory available, for one deflated member in memory
INFLATE_BLOCK = 16 << 20  # compressed bytes read per step of inflating
CRC_BLOCK = 4 << 20  # bytes per read of a CRC check: full speed, and small enough to stay cached


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

# What a CRC check found per member and archive state: "" when intact, else what the data gave.
_verified: BoundedCache[tuple[Any, ...], str] = cache("crc_verdicts")


@dataclass
class Span:
    """The bytes of one HDF5 file: ``size`` bytes from ``base`` of ``source`` (close it when
    done). ``held`` are the file's first bytes when they came with the local header;
    ``whole_file`` is the local path when the span is a whole loose file (h5py may open it
    by name)."""

    source: ByteSource
    base: int
    size: int
    held: bytes = b""
    whole_file: str | None = None
    inflated: bool = False

    def close(self) -> None:
        self.source.close()


def corrupt(loc: Location, what: str) -> NoReturn:
    """Raise :class:`CorruptDataError` for a damaged member, naming the experiment and file."""
    from guideloom.read.metacache import cache_hint

    raise CorruptDataError(
        f"experiment {loc.sim_id}: {loc.describe()}: {what}; the archive is damaged: get a "
        f"fresh copy, or leave the experiment out{cache_hint(loc)}",
        sim_id=loc.sim_id, file=loc.describe(),
    )


def data_bounds(loc: Location) -> tuple[int, int]:
    """The lowest and highest archive offset at which the member's data may start (after its
    local header, name and extra field, and ending before the next member's local header);
    ``(0, 0)`` for a loose file."""
    if loc.member is None:
        return 0, 0
    low = loc.header_offset + LOCAL_HEADER.size + len(loc.member.encode())
    high = loc.header_offset + LOCAL_HEADER.size + 2 * 0xFFFF
    following = loc.next_header
    if following is not None:
        high = min(high, following - loc.size)
    return low, high


def check_extent(loc: Location, start: int) -> None:
    """Refuse the member ``loc`` when its data, from ``start`` (where its *local* header's
    name and extra field put it) for its stored size, reaches the next member's local header.

    The central directory's extents leave the local extra field out, so only here can a
    local header whose extra field spans the next member's header be caught: its data would
    be that member's bytes, with that member's size and CRC-32 (``verify_crc`` passes).

    Raises:
        CorruptDataError: Naming the experiment, ``archive::member`` and the other member.
    """
    following = loc.next_header
    if following is not None and start + loc.size > following:
        other = loc.next_member or "the next member"
        corrupt(loc, f"its local header's name and extra field ({start - loc.header_offset} "
                     f"bytes from offset {loc.header_offset}) put its data at {start}-"
                     f"{start + loc.size}, over the bytes of member {other!r} (local header "
                     f"at {following}): the bytes served would be that member's (a tampered "
                     "or damaged archive)")


def checked_data_offset(loc: Location, blob: bytes | memoryview,
                        read_name: Callable[[int], bytes]) -> int:
    """The data offset of ``loc`` from ``blob``, the bytes read at its local header
    (``read_name(n)`` gives the name's ``n`` bytes when ``blob`` ends inside it).

    Raises:
        CorruptDataError: The header is truncated, has a bad signature or names another
            member, or its extra field puts the data over the next member's (:func:`check_extent`).
    """
    try:
        try:
            name, _, start = parse_local_header(blob, loc.header_offset)
        except IndexError as short:
            name_len = short.args[0]
            head = bytes(blob[:LOCAL_HEADER.size]) + read_name(name_len)
            name, _, start = parse_local_header(head, loc.header_offset)
    except (ZipFormatError, IndexError) as exc:
        corrupt(loc, str(exc) if isinstance(exc, ZipFormatError) else "truncated zip local "
                "header")
    if name != loc.member:
        corrupt(loc, f"the central directory points at the local header of {name!r}, not of "
                     f"{loc.member!r} (a tampered or damaged archive)")
    check_extent(loc, start)
    return start


def read_bytes(source: ByteSource, offset: int, n: int, loc: Location) -> bytes:
    """``n`` bytes from ``offset`` of the source holding ``loc``; a failed read (the network,
    an I/O error) is an :class:`ExperimentReadError` naming the experiment and the file."""
    try:
        return source.read(offset, n)
    except (OSError, ValueError) as exc:
        raise ExperimentReadError(
            f"experiment {loc.sim_id}: {loc.describe()}: reading from {loc.path} failed "
            f"({exc}); check the connection and run again",
            sim_id=loc.sim_id, file=loc.describe()) from exc


def _read_upto(source: ByteSource, offset: int, n: int, loc: Location) -> bytes:
    """Up to ``n`` bytes from ``offset`` (fewer at the end of the source)."""
    fd = source.fd
    if fd is not None:
        return pread(fd, n, offset)
    try:
        total = source.size()
    except (OSError, ValueError):
        total = offset + n
    return read_bytes(source, offset, max(0, min(n, total - offset)), loc)


def read_local_header(source: ByteSource, loc: Location, first: int = 0) -> tuple[int, bytes]:
    """``(data offset, first bytes)`` of the stored member ``loc``: its local header checked,
    read in one range with up to ``first`` bytes of the member's data (returned).

    Raises:
        CorruptDataError: A listed defect, a bad or foreign local header, or offsets past the
            end of an archive of known size (``archive_size``).
    """
    if loc.defect is not None:
        corrupt(loc, loc.defect)
    archive_size = loc.archive_size or None
    if loc.member is None:  # a loose file: its bytes start at 0
        return 0, (_read_upto(source, 0, min(first, loc.size or first), loc) if first else b"")
    if archive_size is not None and loc.header_offset + LOCAL_HEADER.size > archive_size:
        corrupt(loc, "the central directory points past the end of the archive")
    head = LOCAL_HEADER.size + (len(loc.member.encode()) + NAME_SLACK if first else NAME_READ)
    blob = _read_upto(source, loc.header_offset, head + first, loc)
    start = checked_data_offset(loc, blob, lambda n: read_bytes(
        source, loc.header_offset + LOCAL_HEADER.size, n, loc))
    if archive_size is not None and start + loc.size > archive_size:
        corrupt(loc, "the member's data runs past the end of the archive")
    if not first:
        return start, b""
    return start, bytes(blob[start - loc.header_offset:start - loc.header_offset + loc.size])


def member_data_offset(fd: int, loc: Location) -> int:
    """Where the data of the stored member ``loc`` starts in the archive open as ``fd``.

    Raises:
        CorruptDataError: The local header is truncated, has a bad signature, or names another
            member than the central directory entry that points at it (naming archive::member).
    """
    if loc.defect is not None:
        corrupt(loc, loc.defect)
    blob = pread(fd, LOCAL_HEADER.size + NAME_READ, loc.header_offset)
    return checked_data_offset(loc, blob, lambda n: pread(fd, n, loc.header_offset
                                                          + LOCAL_HEADER.size))


# --- CRC-32 -----------------------------------------------------------------------------------
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


def _source_crc(source: ByteSource, start: int, loc: Location) -> tuple[int, int]:
    """:func:`member_crc` of a source: a local descriptor directly, any other by ``read``."""
    fd = source.fd
    if fd is not None:
        return member_crc(fd, start, loc.size)
    crc = 0
    for offset in range(0, loc.size, CRC_BLOCK):
        crc = crc32(read_bytes(source, start + offset, min(CRC_BLOCK, loc.size - offset), loc),
                    crc)
    return crc & 0xFFFFFFFF, loc.size


def _checked(key: tuple[Any, ...], expected: int, compute: Callable[[], tuple[int, int]],
             size: int, sim_id: object, file: str) -> None:
    found = _verified.get(key)
    if found is None:
        crc, got = compute()
        found = "" if got == size and crc == expected else (
            f"{crc:08x}" if got == size else f"only {got} of its {size} bytes")
        _verified.put(key, found)
    if found:
        raise CorruptDataError(
            f"experiment {sim_id}: {file}: CRC-32 mismatch (the archive records "
            f"{expected:08x}, the member's data gives {found}); the member is damaged",
            sim_id=sim_id, file=file,
        )


def verify_crc(source: ByteSource, start: int, loc: Location) -> None:
    """Check the stored member ``loc`` (data from ``start`` of ``source``) against its CRC-32
    from the central directory, remembered while the archive keeps its size and modification
    time (a remote one its validator), so a member is read once per process.

    Raises:
        CorruptDataError: The CRC differs or the archive ends inside the member.
    """
    if loc.crc is None:
        return
    fd, held = source.fd, loc.held
    if fd is not None:
        st = os.fstat(fd)
        stamp: tuple[Any, ...] = (st.st_size, st.st_mtime_ns)
    elif held is not None:  # the bytes read for the content digest: known by that digest
        stamp = ("blake3", held.digest)
    else:
        stamp = (loc.archive_size, loc.validator)
    _checked((loc.path, loc.member, start, *stamp), loc.crc,
             lambda: _source_crc(source, start, loc), loc.size, loc.sim_id,
             loc.describe())


def forget_verified() -> None:
    """Drop the CRC verdicts remembered (tests and benchmarks measure cold checks)."""
    _verified.clear()


# --- inflating ------------------------------------------------------------------------------
def inflate_budget() -> int:
    """Bytes one deflated member may inflate to in memory: half the memory available, and
    half of this process's data or address-space limit (``ulimit -d``/``-v``) if one is set."""
    budget = int(psutil.virtual_memory().available * INFLATE_MEMORY_SHARE)
    for which in ("RLIMIT_DATA", "RLIMIT_AS"):
        if resource is not None and hasattr(resource, which):
            soft = resource.getrlimit(getattr(resource, which))[0]
            if soft != resource.RLIM_INFINITY:
                budget = min(budget, int(soft * INFLATE_MEMORY_SHARE))
    return budget


class _Zlib:
    """Raw deflate with the bz2/lzma decompressor interface (``needs_input``, ``eof``)."""

    def __init__(self) -> None:
        self._d = zlib.decompressobj(-15)
        self._tail = b""

    @property
    def eof(self) -> bool:
        return self._d.eof

    @property
    def needs_input(self) -> bool:
        return not self._tail

    def decompress(self, data: bytes, max_length: int) -> bytes:
        out = self._d.decompress(self._tail + data if self._tail else data, max_length)
        self._tail = self._d.unconsumed_tail
        return out


class _ZipLzma:
    """LZMA as zip stores it: a 4-byte header (version, properties size), the LZMA1
    properties, then the raw stream."""

    def __init__(self) -> None:
        self._d: Any = None
        self._head = b""

    @property
    def eof(self) -> bool:
        return self._d is not None and self._d.eof

    @property
    def needs_input(self) -> bool:
        return self._d is None or self._d.needs_input

    def decompress(self, data: bytes, max_length: int) -> bytes:
        if self._d is None:
            self._head += data
            if len(self._head) < 4:
                return b""
            n = struct.unpack_from("<H", self._head, 2)[0]
            if len(self._head) < 4 + n:
                return b""
            props = lzma._decode_filter_properties(lzma.FILTER_LZMA1,  # type: ignore[attr-defined]
                                                   self._head[4:4 + n])
            self._d = lzma.LZMADecompressor(lzma.FORMAT_RAW, filters=[props])
            data, self._head = self._head[4 + n:], b""
        return bytes(self._d.decompress(data, max_length))


def _decompressor(method: int) -> Any:
    if method == DEFLATED:
        return _Zlib()
    if method == BZIP2:
        return bz2.BZ2Decompressor()
    if method == LZMA:
        return _ZipLzma()
    raise NotImplementedError(f"compression method {method} is not supported")


def _declared(source: ByteSource, loc: Location) -> tuple[int, int, int]:
    """``(inflated size, compression method, compressed size)`` of ``loc``: from the location
    when it carries them (``file_size``; deflate), else from the archive's central directory
    (as :mod:`zipfile` would read it)."""
    if loc.file_size:
        return loc.file_size, loc.method, loc.size
    try:
        members = read_members(source)
    except (ZipFormatError, OSError) as exc:
        corrupt(loc, f"the archive's directory cannot be read again ({exc})")
    for m in members:
        if m.name == loc.member and m.header_offset == loc.header_offset:
            return m.file_size, m.method, m.compress_size
    corrupt(loc, "the member is no longer in the archive (it was rewritten)")


def inflate(source: ByteSource, start: int, loc: Location) -> memoryview:
    """The compressed member ``loc`` (data from ``start`` of ``source``) inflated into memory.

    The declared size is checked first (against what deflate can produce from the member's
    compressed bytes and against :func:`inflate_budget`), then the member is inflated into a
    buffer of exactly that size, never further: a header that lies is caught by a short or
    long stream or by the CRC-32, never by running out of memory.

    Raises:
        CorruptDataError: The member is a zip bomb, lies about its size, has a bad CRC-32 or
            is damaged (naming the experiment and ``archive::member``).
    """
    declared, method, compressed = _declared(source, loc)
    budget = inflate_budget()
    if declared <= compressed * DEFLATE_MAX_RATIO + DEFLATE_SLACK and declared > budget:
        corrupt(loc, f"the deflated member inflates to {declared / 2**30:.2f} GiB, more than "
                     f"the {budget / 2**30:.2f} GiB guideloom inflates in memory (half the "
                     "memory available); store it uncompressed or extract it to a loose file "
                     "(guideloom extract)")
    try:
        buf = bytearray(declared)
    except MemoryError:
        corrupt(loc, f"the deflated member's {declared} bytes do not fit in memory")
    view = memoryview(buf)
    got = 0
    for piece in _inflated(source, start, loc, declared, method, compressed):
        view[got:got + len(piece)] = piece
        got += len(piece)
    return view


def member_pieces(loc: Location, source: ByteSource, start: int,
                  declared: tuple[int, int] | None = None,
                  block: int = INFLATE_BLOCK) -> Iterator[bytes]:
    """The bytes of the member ``loc`` (data from ``start`` of ``source``) as a loose file
    holds them, in pieces of at most ``block`` bytes: a stored member read, a compressed one
    inflated as it goes (never whole in memory). ``declared`` is the member's ``(inflated
    size, compression method)`` from its central directory entry when the caller has it.

    The pieces are checked as they pass, and the generator raises instead of ending when a
    check fails: a consumer keeps what it got only when the iteration ends normally.

    Raises:
        CorruptDataError: The member ends early, inflates to another size than it declares,
            is a zip bomb, does not inflate, or its CRC-32 differs from the archive's.
        ExperimentReadError: A read failed.
    """
    if loc.stored:
        crc = got = 0
        while got < loc.size:
            piece = read_bytes(source, start + got, min(block, loc.size - got), loc)
            if not piece:
                corrupt(loc, f"the archive ends after {got} of the member's {loc.size} bytes")
            crc = crc32(piece, crc)
            got += len(piece)
            yield piece
        _check_crc(loc, crc)
        return
    size, method = declared if declared is not None else _declared(source, loc)[:2]
    yield from _inflated(source, start, loc, size, method, loc.size, block)


class MemberReader:
    """Reads whole members for one task (``guideloom extract``): one descriptor per archive,
    closed with the reader (a removed archive's space is freed when the task ends, not when
    the process does)."""

    def __init__(self) -> None:
        self._handles = ArchiveHandles()

    def pieces(self, loc: Location, declared: tuple[int, int] | None = None,
               block: int = INFLATE_BLOCK) -> Iterator[bytes]:
        """:func:`member_pieces` of ``loc``, opened by :func:`open_span` as every reader opens a
        member (listed defect, local header and extent checked first), the compressed bytes
        left to be inflated as they stream."""
        span = open_span(loc, handles=self._handles, stream=True)
        try:
            yield from member_pieces(loc, span.source, span.base, declared, block)
        finally:
            span.close()

    def close(self) -> None:
        """Close the archives' descriptors."""
        self._handles.close()

    def __enter__(self) -> MemberReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def file_crc32(path: str) -> int:
    """The CRC-32 of a whole local file, as zip archives record it."""
    with LocalFileSource(path) as source:
        return member_crc(source.fd, 0, source.size())[0]


def _inflated(source: ByteSource, start: int, loc: Location, declared: int, method: int,
              compressed: int, block: int = INFLATE_BLOCK) -> Iterator[bytes]:
    """The compressed member's inflated bytes in pieces, checked (see :func:`member_pieces`)."""
    if declared > compressed * DEFLATE_MAX_RATIO + DEFLATE_SLACK:
        corrupt(loc, f"the member declares {declared} bytes from {compressed} compressed ones, "
                     "more than deflate can produce (a zip bomb or a damaged header)")
    got, crc = 0, 0
    try:
        dec = _decompressor(method)
        for offset in range(0, compressed, INFLATE_BLOCK):
            data = read_bytes(source, start + offset, min(INFLATE_BLOCK, compressed - offset),
                              loc)
            while True:
                piece = dec.decompress(data, min(block, declared + 1 - got))
                data = b""
                if got + len(piece) > declared:
                    corrupt(loc, f"the member inflates to more bytes, not the {declared} its "
                                 "header declares")
                crc = crc32(piece, crc)
                got += len(piece)
                if piece:
                    yield piece
                if dec.eof or dec.needs_input:
                    break
            if dec.eof:
                break
        if not dec.eof and got == declared:
            raise EOFError("the compressed stream ends before its end-of-stream marker")
    except (zlib.error, OSError, EOFError, NotImplementedError, ValueError, lzma.LZMAError
            ) as exc:  # not ExperimentReadError (a failed read): that is raised as it is
        corrupt(loc, f"the member does not inflate ({type(exc).__name__}: {exc})")
    if got != declared:
        corrupt(loc, f"the member inflates to {got} bytes, not the {declared} its header "
                     "declares")
    _check_crc(loc, crc)


def _check_crc(loc: Location, crc: int) -> None:
    """Refuse the member whose bytes gave ``crc`` when the archive records another CRC-32."""
    if loc.crc is not None and (crc & 0xFFFFFFFF) != loc.crc:
        from guideloom.read.metacache import cache_hint

        raise CorruptDataError(
            f"experiment {loc.sim_id}: {loc.describe()} is damaged: Bad CRC-32 of the "
            f"{'stored' if loc.stored else 'inflated'} member (the archive records "
            f"{loc.crc:08x}, its data gives {crc & 0xFFFFFFFF:08x}); get a fresh copy, or "
            f"leave the experiment out{cache_hint(loc)}",
            sim_id=loc.sim_id, file=loc.describe())


def open_span(loc: Location, source: ByteSource | None = None, *, verify: bool = False,
              first: int = 0, start: int | None = None,
              handles: ArchiveHandles | None = None, stream: bool = False) -> Span:
    """The bytes of the HDF5 file at ``loc`` in ``source`` (default: :func:`~guideloom.read.
    byte_source.source_for` with ``handles``; closed on error, else by the span), its zip
    member checked: a loose file whole, a
    stored member in place (with up to ``first`` of its bytes read along with the local
    header), a compressed member inflated. ``start`` is the member's data offset when known
    (from the metadata cache: no header read). ``verify`` checks a stored member's CRC-32.
    ``stream=True`` leaves a compressed member's span over its compressed bytes (for
    :func:`member_pieces` to inflate as it streams: ``guideloom extract``).

    Raises:
        CorruptDataError: The member is damaged (see the module docstring).
        OSError: The file cannot be opened or read.
    """
    if source is None:
        source = source_for(loc, handles)
    try:
        if loc.defect is not None:
            corrupt(loc, loc.defect)
        if loc.member is None:
            size = loc.size if loc.archive_size else source.size()
            held = _read_upto(source, 0, min(first, size), loc) if first else b""
            return Span(source, 0, size, held,
                        whole_file=None if source.fd is None else loc.path)
        held = b""
        if start is None:
            start, held = read_local_header(source, loc, first)
        else:  # from the metadata cache: held to the same extent
            check_extent(loc, start)
        if not loc.stored and not stream:
            data = inflate(source, start, loc)
            source.close()
            return Span(MemorySource(data, loc.describe()), 0, len(data), inflated=True)
        if verify and loc.stored:  # a streamed compressed member's CRC: member_pieces
            verify_crc(source, start, loc)
        return Span(source, start, loc.size, held)
    except BaseException:
        source.close()
        raise
