"""Decoding deflate-compressed HDF5 chunks without HDF5's filter pipeline.

:func:`plan` reads what it needs from h5py once per dataset (shape, dtype, filters, fill value
and the chunk index) and returns ``None`` for anything it does not handle, so the caller falls
back to h5py. :func:`read` then reads each chunk's stored bytes with ``os.preadv`` at its file
offset and undoes the filters itself: fletcher32 is verified, deflate is inflated (see
:mod:`guideloom.fastread.inflate`) and shuffle is undone with numpy, all outside HDF5's global
lock. A chunk whose decoded bytes sit contiguously in the output is decoded straight into it.

Any inconsistency (a short read, a bad zlib stream, a checksum mismatch) raises
:class:`FastReadError`; callers then read the dataset through h5py, which is the reference and
produces the error message for damaged files.
"""

from __future__ import annotations

import functools
import math
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import h5py
import numpy as np

from guideloom.errors import FastReadError
from guideloom.fastread import inflate as _inflate
from guideloom.fastread.pool import run_all, threads_for
from guideloom.runtime.caches import memoize
from guideloom.runtime.os_support import pread, preadinto

DEFLATE, SHUFFLE, FLETCHER32 = 1, 2, 3
_SUPPORTED = {DEFLATE, SHUFFLE, FLETCHER32}
_MIN_BYTES_PER_THREAD = 1 << 19  # below this, a thread hand-off costs more than it saves


HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"


@dataclass(frozen=True)
class RawSource:
    """Where an HDF5 file's bytes are: ``size`` bytes of descriptor ``fd`` from ``start``.

    ``size`` is ``None`` when the file is the whole descriptor. Build one with :meth:`checked`
    unless the file is known to start with its superblock (no user block).
    """

    fd: int
    start: int = 0
    size: int | None = None

    @classmethod
    def checked(cls, fd: int, start: int = 0, size: int | None = None) -> RawSource | None:
        """A source for a file whose superblock is at ``start``, else ``None``.

        Files with a user block (superblock further in) are left to h5py.
        """
        return cls(fd, start, size) if pread(fd, 8, start) == HDF5_SIGNATURE else None


@dataclass(frozen=True)
class Chunk:
    """One allocated chunk: element offset per axis, filter mask, file address, stored size."""

    offset: tuple[int, ...]
    mask: int
    address: int
    size: int


@dataclass(frozen=True)
class Layout:
    """The per-dataset facts decoding needs apart from the chunk index."""

    dtype: np.dtype
    chunk_shape: tuple[int, ...]
    filters: tuple[tuple[int, tuple[int, ...]], ...]  # (filter id, client values), write order
    fill: np.ndarray  # 0-d, the dataset's fill value
    chunk_nbytes: int  # bytes of one decoded chunk


@dataclass(frozen=True)
class Plan:
    """What decoding one chunked dataset needs: its shape, layout and chunk index."""

    shape: tuple[int, ...]
    layout: Layout
    chunks: tuple[Chunk, ...]  # allocated chunks, by file address
    complete: bool  # every chunk is allocated (no fill value needed)
    in_place: bool  # a whole chunk is one contiguous run of the output

    @property
    def dtype(self) -> np.dtype:
        return self.layout.dtype

    @property
    def chunk_shape(self) -> tuple[int, ...]:
        return self.layout.chunk_shape

    @property
    def chunk_nbytes(self) -> int:
        return self.layout.chunk_nbytes



_NATIVE: dict[np.dtype, h5py.h5t.TypeID] = {}  # numpy dtype -> the HDF5 type h5py reads into


def plan(dset: h5py.Dataset | h5py.h5d.DatasetID,
         dcpl: h5py.h5p.PropDCID | None = None,
         chunks: Sequence[Chunk] | None = None) -> Plan | None:
    """Return the decoding plan of ``dset`` (a Dataset or its ``DatasetID``), or ``None`` when
    h5py must read it. ``chunks`` is its :func:`chunk_index` when the caller has it already.

    Handled: chunked layout, filters among deflate, shuffle and fletcher32, a fixed-size dtype
    stored exactly as numpy holds it (so HDF5 would not convert it) and a defined fill value.
    """
    dsid = dset.id if isinstance(dset, h5py.Dataset) else dset
    if dcpl is None:
        dcpl = dsid.get_create_plist()
    if dcpl.get_layout() != h5py.h5d.CHUNKED:
        return None
    filters = tuple(_filter(dcpl, i) for i in range(dcpl.get_nfilters()))
    if any(code not in _SUPPORTED for code, _ in filters):
        return None
    dtype = dsid.dtype
    if dtype.hasobject or dtype.kind not in "biufcS" or not _stored_as_is(dtype, dsid):
        return None
    defined = dcpl.fill_value_defined()
    if defined == h5py.h5d.FILL_VALUE_UNDEFINED or dcpl.get_fill_time() == h5py.h5d.FILL_TIME_NEVER:
        return None
    fill = np.zeros((), dtype)
    if defined == h5py.h5d.FILL_VALUE_USER_DEFINED:
        dcpl.get_fill_value(fill)
    shape = dsid.shape
    if shape is None or 0 in shape:
        return None
    chunk_shape = tuple(int(c) for c in dcpl.get_chunk())
    return make_plan(tuple(shape), dtype, chunk_shape, filters, fill,
                     chunk_index(dsid) if chunks is None else chunks)


def make_plan(shape: tuple[int, ...], dtype: np.dtype, chunk_shape: tuple[int, ...],
              filters: tuple[tuple[int, tuple[int, ...]], ...], fill: np.ndarray,
              chunks: Sequence[Chunk]) -> Plan:
    """The plan of a chunked dataset from its parts, however they were read (h5py's chunk
    queries or :mod:`guideloom.h5native`)."""
    layout = Layout(dtype, chunk_shape, filters, fill, math.prod(chunk_shape) * dtype.itemsize)
    ordered = sorted(chunks, key=lambda c: c.address)
    grid = math.prod(-(-n // c) for n, c in zip(shape, chunk_shape, strict=True))
    return Plan(shape, layout, tuple(ordered), len(ordered) == grid,
                _in_place(chunk_shape, shape))


def _stored_as_is(dtype: np.dtype, dsid: h5py.h5d.DatasetID) -> bool:
    """True when HDF5 would hand the stored bytes over unconverted."""
    native = _NATIVE.get(dtype)
    if native is None:
        try:
            native = _NATIVE[dtype] = h5py.h5t.py_create(dtype)
        except (TypeError, ValueError):
            return False
    return bool(native.equal(dsid.get_type()))


def _filter(dcpl: h5py.h5p.PropDCID, i: int) -> tuple[int, tuple[int, ...]]:
    code, _flags, values, _name = dcpl.get_filter(i)
    return int(code), tuple(int(v) for v in values)


def chunk_index(dsid: h5py.h5d.DatasetID) -> list[Chunk]:
    """The allocated chunks of the chunked dataset ``dsid``, as HDF5's index lists them (one
    ``chunk_iter`` pass: under 1 ms for the 512 chunks of a 2000 x 3200 scan)."""
    found: list[Chunk] = []
    if hasattr(dsid, "chunk_iter"):
        dsid.chunk_iter(lambda s: found.append(
            Chunk(tuple(s.chunk_offset), s.filter_mask, s.byte_offset, s.size)))
        return found
    for i in range(dsid.get_num_chunks()):  # older HDF5: one call per chunk
        s = dsid.get_chunk_info(i)
        found.append(Chunk(tuple(s.chunk_offset), s.filter_mask, s.byte_offset, s.size))
    return found


def first_overlap(extents: Sequence[tuple[int, int]]) -> tuple[int, int] | None:
    """Indices ``(i, j)`` of two of ``extents`` (``(address, size)`` pairs of stored chunks)
    whose bytes overlap (``j`` starts inside ``i``), or ``None`` when they are disjoint.
    Empty extents are ignored. One pass when the extents come in address order (HDF5's
    indexes list them so), else a sort."""
    end = -1
    for address, size in extents:
        if size > 0:
            if address < end:
                break
            end = address + size
    else:
        return None
    reach, last = -1, -1
    for i in sorted((k for k, e in enumerate(extents) if e[1] > 0), key=lambda k: extents[k][0]):
        address, size = extents[i]
        if last >= 0 and address < reach:
            return last, i
        if address + size > reach:
            reach, last = address + size, i
    return None


class ChunkBytes:
    """Stored bytes of chunks fetched beforehand (e.g. in one ranged request), by chunk
    address: a source for :func:`read` besides a :class:`RawSource`."""

    def __init__(self, stored: dict[int, np.ndarray]):
        self.stored = stored

    def raw(self, c: Chunk) -> np.ndarray:
        buf = self.stored.get(c.address)
        if buf is None or len(buf) < c.size:
            raise FastReadError(f"no stored bytes for the chunk at {c.address}")
        return buf


def needed(p: Plan, rows: Sequence[int] | np.ndarray | None = None) -> tuple[Chunk, ...]:
    """The allocated chunks that hold rows ``rows`` (increasing, unique; all when None)."""
    if rows is None:
        return p.chunks
    sel = np.asarray(rows, dtype=np.int64)
    return tuple(c for c in p.chunks if _hits(p, c, sel))


def read(p: Plan, source: RawSource | ChunkBytes, rows: Sequence[int] | np.ndarray | None = None,
         out: np.ndarray | None = None) -> np.ndarray:
    """Decode the dataset, or only rows ``rows`` (increasing, unique) of its first axis.

    Args:
        p: The dataset's plan.
        source: Where its chunks are read from (a descriptor, or bytes fetched before).
        rows: Rows of the first axis to decode (all when None).
        out: A C-contiguous array of the result's shape and dtype to decode into (a buffer
            reused across records saves the page faults of a fresh one); None allocates.

    Returns:
        ``out``, or a new array of the dataset's dtype: the full shape, or
        ``(len(rows), *shape[1:])``.

    Raises:
        FastReadError: A chunk is out of the file's range, short, or fails to decode.
    """
    _inflate.refresh()  # the configured back end, counted when not the fastest
    sel = None if rows is None else np.asarray(rows, dtype=np.int64)
    out_shape = p.shape if sel is None else (len(sel), *p.shape[1:])
    if out is None:
        out = np.empty(out_shape, dtype=p.dtype)
    elif out.shape != out_shape or out.dtype != p.dtype or not out.flags.c_contiguous:
        raise ValueError(f"out is {out.dtype}{out.shape}, expected C-contiguous "
                         f"{p.dtype}{out_shape}")
    todo = needed(p, sel)
    if not p.complete:
        out[...] = p.layout.fill
    if not todo:
        return out
    n_threads = threads_for(len(todo) * p.chunk_nbytes, len(todo), _MIN_BYTES_PER_THREAD)
    if n_threads == 1:
        if not (sel is None and not p.in_place and _decode_grid(p, source, todo, out)):
            _decode_group(p, source, todo, out, sel)
        return out
    per = -(-len(todo) // n_threads)
    groups = [todo[i:i + per] for i in range(0, len(todo), per)]
    run_all([functools.partial(_decode_group, p, source, g, out, sel) for g in groups])
    return out


def _hits(p: Plan, c: Chunk, sel: np.ndarray) -> bool:
    lo, hi = np.searchsorted(sel, (c.offset[0], c.offset[0] + p.chunk_shape[0]))
    return bool(hi > lo)


class _Buffers(threading.local):
    """Per-thread scratch buffers (raw bytes, two decode stages, the unshuffle's scratch, a batch
    of inflated chunks), grown on demand and kept."""

    def __init__(self) -> None:
        self.bufs = [np.empty(0, np.uint8) for _ in range(5)]

    def get(self, which: int, n: int) -> np.ndarray:
        buf = self.bufs[which]
        if buf.nbytes < n:
            buf = self.bufs[which] = np.empty(max(n, 2 * buf.nbytes), np.uint8)
        return buf


_BUFFERS = _Buffers()
_RAW, _TARGET = 0, -1


def _decode_group(
    p: Plan, source: RawSource | ChunkBytes, group: Sequence[Chunk], out: np.ndarray,
    sel: np.ndarray | None,
) -> None:
    in_place = sel is None and p.in_place
    flat = out.reshape(-1).view(np.uint8) if in_place else None
    buffers = _BUFFERS
    batch = _ShuffleBatch(p, flat) if flat is not None else None
    for c in group:
        raw = _read_raw(buffers, source, c)
        if in_place and _is_full(p, c):
            assert flat is not None
            assert batch is not None
            start = int(np.ravel_multi_index(c.offset, p.shape)) * p.dtype.itemsize
            if batch.add(c, raw, start):
                continue
            target = flat[start:start + p.chunk_nbytes]
            data = _unfilter(buffers, p, c, raw, target)
            if data is not target:
                target[:] = data
        else:
            _place(p, c, _unfilter(buffers, p, c, raw, None), out, sel)
    if batch is not None:
        batch.flush()


_BATCH_BYTES = 1 << 20  # shuffled chunks inflated before one unshuffle of them all (fits a cache)
_BATCH = 4  # the _Buffers slot a batch of inflated chunks waits in


class _ShuffleBatch:
    """Full, in-place chunks filtered by shuffle then deflate (the common layout), whose
    destinations follow each other: each is inflated into a scratch run, and the run is
    unshuffled with one interleave of all its chunks. Small chunks (the published files' are
    50 KB) then cost one inflate call each instead of a dozen numpy calls."""

    def __init__(self, p: Plan, flat: np.ndarray) -> None:
        self.p, self.flat = p, flat
        self.nbytes = p.chunk_nbytes
        self.capacity = max(1, _BATCH_BYTES // max(1, self.nbytes))
        self.first = self.count = 0
        self.scratch: np.ndarray | None = None

    def add(self, c: Chunk, raw: np.ndarray, start: int) -> bool:
        """Inflate ``c`` into the batch; False when it must take the general path."""
        steps = _steps(self.p.layout.filters, c.mask, self.p.dtype.itemsize)
        if not (_LITTLE_ENDIAN and len(steps) == 2 and steps[0] == (DEFLATE, steps[0][1], 0)
                and steps[1][0] == SHUFFLE and steps[1][1] in _TREE_SIZES and steps[1][2] == 0
                and self.nbytes % steps[1][1] == 0):
            return False
        if self.count and (start != self.first + self.count * self.nbytes
                           or self.count == self.capacity):
            self.flush()
        if self.scratch is None:
            self.scratch = _BUFFERS.get(_BATCH, self.capacity * self.nbytes)
        if not self.count:
            self.first = start
        slot = self.scratch[self.count * self.nbytes:(self.count + 1) * self.nbytes]
        try:
            _inflate.inflate_into(raw, c.size, slot)
        except _inflate.InflateError as exc:
            raise FastReadError(f"chunk at {c.address}: {exc}") from exc
        self.count += 1
        self.size = steps[1][1]
        return True

    def flush(self) -> None:
        """Unshuffle the waiting chunks into their destination."""
        if not self.count:
            return
        assert self.scratch is not None
        n = self.nbytes // self.size
        end = self.first + self.count * self.nbytes
        if self.count * n >= _TREE_MIN_ELEMENTS:
            _unshuffle_tree(self.scratch, self.flat[self.first:end], self.size, n, self.count)
        else:
            for k in range(self.count):
                at = self.first + k * self.nbytes
                _unshuffle_strided(self.scratch[k * self.nbytes:(k + 1) * self.nbytes],
                                   self.flat[at:at + self.nbytes], self.size, n)
        self.count = 0


_GRID_BYTES = 4 << 20  # a small dataset decoded as one grid of chunks (scratch bounded)
_GRID, _GRID_OUT = 1, 2  # the _Buffers slots it inflates and unshuffles into


def _decode_grid(p: Plan, source: RawSource | ChunkBytes, todo: Sequence[Chunk],
                 out: np.ndarray) -> bool:
    """Decode every chunk of a small dataset whose chunks are not runs of the output (the
    seed's force table: 4 chunks of 559 x 4 in 1117 x 8) as one grid: each chunk inflated into
    its cell of a scratch grid, all of them unshuffled together, and the grid copied into
    ``out`` in one or two numpy calls, instead of a dozen numpy calls per chunk. Only for
    complete datasets filtered by shuffle then deflate; False (nothing done) otherwise.

    Raises:
        FastReadError: A chunk fails to inflate or lies outside its grid.
    """
    cs, nbytes = p.chunk_shape, p.chunk_nbytes
    grid = tuple(-(-n // c) for n, c in zip(p.shape, cs, strict=True))
    count = len(todo)
    if not (p.complete and _LITTLE_ENDIAN and count == math.prod(grid) and count > 1
            and count * nbytes <= _GRID_BYTES):
        return False
    steps = _steps(p.layout.filters, todo[0].mask, p.dtype.itemsize)
    if not (len(steps) == 2 and steps[0] == (DEFLATE, steps[0][1], 0) and steps[1][0] == SHUFFLE
            and steps[1][2] == 0 and steps[1][1] > 1 and nbytes % steps[1][1] == 0
            and all(c.mask == todo[0].mask for c in todo)):
        return False
    size = steps[1][1]
    n = nbytes // size
    shuffled = _BUFFERS.get(_GRID, count * nbytes)[:count * nbytes]
    done = bytearray(count)
    for c in todo:
        cell = 0
        for o, k, g in zip(c.offset, cs, grid, strict=True):
            cell = cell * g + o // k
        if not 0 <= cell < count or done[cell]:
            raise FastReadError(f"chunk at {c.address}: offset {c.offset} off the chunk grid")
        done[cell] = 1
        raw = _read_raw(_BUFFERS, source, c)
        try:
            _inflate.inflate_into(raw, c.size, shuffled[cell * nbytes:(cell + 1) * nbytes])
        except _inflate.InflateError as exc:
            raise FastReadError(f"chunk at {c.address}: {exc}") from exc
    plain = _BUFFERS.get(_GRID_OUT, count * nbytes)[:count * nbytes]
    if size in _TREE_SIZES and count * n >= _TREE_MIN_ELEMENTS:
        _unshuffle_tree(shuffled, plain, size, n, count)
    else:
        body = plain.reshape(count, n, size)
        planes = shuffled.reshape(count, size, n)
        for k in range(size):  # one strided copy per byte plane, for all chunks at once
            body[:, :, k] = planes[:, k, :]
    rank = len(grid)
    cells = plain.view(p.dtype).reshape(*grid, *cs).transpose(
        [axis for k in range(rank) for axis in (k, rank + k)])  # (g0, c0, g1, c1, ...)
    padded = tuple(g * k for g, k in zip(grid, cs, strict=True))
    if padded == p.shape:
        out.reshape(*(d for pair in zip(grid, cs, strict=True) for d in pair))[...] = cells
    else:  # edge chunks reach past the shape: assemble the whole grid, then cut it
        whole = cells.reshape(padded)
        out[...] = whole[tuple(slice(0, d) for d in p.shape)]
    return True


def _read_raw(buffers: _Buffers, source: RawSource | ChunkBytes, c: Chunk) -> np.ndarray:
    if isinstance(source, ChunkBytes):
        return source.raw(c)
    if c.address < 0 or (source.size is not None and c.address + c.size > source.size):
        raise FastReadError(f"chunk at {c.address} (+{c.size}) lies outside the file")
    buf = buffers.get(_RAW, c.size)
    got = preadinto(source.fd, buf.data[:c.size], source.start + c.address)
    if got != c.size:
        raise FastReadError(f"short read: {got} of {c.size} bytes at {c.address}")
    return buf


@memoize("chunk_steps")
def _steps(
    filters: tuple[tuple[int, tuple[int, ...]], ...], mask: int, itemsize: int
) -> tuple[tuple[int, int, int], ...]:
    """Read-order steps ``(filter id, shuffle element size, checksum bytes still attached)``."""
    active = [f for i, f in enumerate(filters) if not mask >> i & 1][::-1]
    out = []
    checksums = sum(code == FLETCHER32 for code, _ in active)
    for code, values in active:
        if code == FLETCHER32:
            checksums -= 1
        out.append((code, values[0] if values else itemsize, 4 * checksums))
    return tuple(out)


def _unfilter(
    buffers: _Buffers, p: Plan, c: Chunk, raw: np.ndarray, target: np.ndarray | None
) -> np.ndarray:
    """Undo the chunk's filters; the decoded bytes are ``target`` when the last step could
    write there, else a scratch buffer of this thread."""
    steps = _steps(p.layout.filters, c.mask, p.dtype.itemsize)
    nbytes = p.chunk_nbytes
    cur, cur_n, where = raw, c.size, _RAW
    last = len(steps) - 1
    for j, (code, size, extra) in enumerate(steps):
        if code == FLETCHER32:
            _verify_fletcher32(cur[:cur_n])
            cur_n -= 4
            continue
        want = nbytes + extra
        if j == last and extra == 0 and target is not None:
            dst, where = target, _TARGET
        else:
            where = 2 if where == 1 else 1
            dst = buffers.get(where, want)[:want]
        if code == DEFLATE:
            try:
                _inflate.inflate_into(cur, cur_n, dst)
            except _inflate.InflateError as exc:
                raise FastReadError(f"chunk at {c.address}: {exc}") from exc
        else:  # SHUFFLE
            if cur_n != want:
                raise FastReadError(f"chunk at {c.address}: {cur_n} bytes, expected {want}")
            _unshuffle(cur[:cur_n], dst, size)
        cur, cur_n = dst, want
    if cur_n != nbytes:
        raise FastReadError(f"chunk at {c.address}: {cur_n} bytes, expected {nbytes}")
    return cur if where == _TARGET else cur[:nbytes]


def _unshuffle(src: np.ndarray, dst: np.ndarray, size: int) -> None:
    """Undo HDF5's byte shuffle: byte ``k`` of every element is stored in plane ``k``."""
    if size <= 1:
        dst[:] = src
        return
    n = len(dst) // size
    if n == 0:  # an element larger than the chunk (a damaged parameter): HDF5 copies the bytes
        dst[:] = src[:len(dst)]
        return
    if size in _TREE_SIZES and _LITTLE_ENDIAN and n >= _TREE_MIN_ELEMENTS:
        _unshuffle_tree(src, dst, size, n)
    else:
        _unshuffle_strided(src, dst, size, n)
    if n * size < len(dst):  # a tail shorter than one element stays in place
        dst[n * size:] = src[n * size:len(dst)]


def _unshuffle_strided(src: np.ndarray, dst: np.ndarray, size: int, n: int) -> None:
    body = dst[:n * size].reshape(n, size)
    for k in range(size):  # one strided copy per plane
        body[:, k] = src[k * n:(k + 1) * n]


_TREE_SIZES = (2, 4, 8)
# below this many elements the interleave's dozen numpy calls cost more than strided copies
# (4-byte elements here: 2,236 -> 3.9 vs 11.0 us; 32,768 -> 32.6 vs 24.2 us)
_TREE_MIN_ELEMENTS = 1 << 14
_LITTLE_ENDIAN = sys.byteorder == "little"
_SCRATCH = 3  # the _Buffers slot the tree unshuffle works in


def _unshuffle_tree(src: np.ndarray, dst: np.ndarray, size: int, n: int, batch: int = 1) -> None:
    """Interleave the byte planes pairwise with integer shifts: bytes into 2-byte words, those
    into 4-byte words, and so on. On a little-endian machine the byte of plane ``k`` is bits
    ``8k…8k+7`` of its element. On 1 MB chunks here: 1.2x (8-byte), 1.8x (4-byte) and 3x
    (2-byte elements) the speed of one strided byte copy per plane.

    ``src`` holds ``batch`` shuffled chunks of ``n`` elements one after the other; ``dst``
    receives them unshuffled, one after the other.
    """
    nb = n * size * batch
    scratch = _BUFFERS.get(_SCRATCH, 3 * nb)
    regions, spare = (scratch[:nb], scratch[nb:2 * nb]), scratch[2 * nb:3 * nb]
    blocks = src[:nb].reshape(batch, size, n)
    planes = [blocks[:, k, :] for k in range(size)]
    width, level = 1, 0
    while len(planes) > 1:
        wide = np.dtype(f"<u{2 * width}")
        step = batch * n * 2 * width
        out_all = dst[:nb] if len(planes) == 2 else regions[level % 2]
        shifted = spare[:step].view(wide).reshape(batch, n)
        merged = []
        for j in range(0, len(planes), 2):
            out = out_all[(j // 2) * step:(j // 2 + 1) * step].view(wide).reshape(batch, n)
            np.copyto(out, planes[j], casting="unsafe")
            np.copyto(shifted, planes[j + 1], casting="unsafe")
            np.left_shift(shifted, 8 * width, out=shifted)
            np.bitwise_or(out, shifted, out=out)
            merged.append(out)
        planes, width, level = merged, 2 * width, level + 1


def _verify_fletcher32(data: np.ndarray) -> None:
    from numcodecs.fletcher32 import Fletcher32

    try:
        Fletcher32().decode(data)
    except RuntimeError as exc:
        raise FastReadError(f"fletcher32 checksum mismatch ({exc})") from exc


def _in_place(chunk_shape: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """True when a whole chunk is one contiguous run of the C-ordered output."""
    dims = list(zip(chunk_shape, shape, strict=True))
    k = 0
    while k < len(dims) and dims[k][0] == 1:
        k += 1
    return all(c == s for c, s in dims[k + 1:])


def _is_full(p: Plan, c: Chunk) -> bool:
    return all(o + n <= s for o, n, s in zip(c.offset, p.chunk_shape, p.shape, strict=True))


def _place(p: Plan, c: Chunk, data: np.ndarray, out: np.ndarray, sel: np.ndarray | None) -> None:
    """Copy the part of a decoded chunk that lies in the output."""
    chunk = data.view(p.dtype).reshape(p.chunk_shape)
    extent = [min(n, s - o) for o, n, s in zip(c.offset, p.chunk_shape, p.shape, strict=True)]
    inner_out = tuple(slice(o, o + e) for o, e in zip(c.offset[1:], extent[1:], strict=True))
    inner_in = tuple(slice(0, e) for e in extent[1:])
    if sel is None:
        o0 = c.offset[0]
        out[(slice(o0, o0 + extent[0]), *inner_out)] = chunk[(slice(0, extent[0]), *inner_in)]
        return
    lo, hi = np.searchsorted(sel, (c.offset[0], c.offset[0] + extent[0]))
    rows: tuple[np.ndarray | slice, ...] = (sel[lo:hi] - c.offset[0], *inner_in)
    out[(slice(lo, hi), *inner_out)] = chunk[rows]
