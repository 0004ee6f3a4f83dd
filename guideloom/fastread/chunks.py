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

import math
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import h5py
import numpy as np

from guideloom.fastread import inflate as _inflate
from guideloom.fastread.pool import run_all, threads_for

DEFLATE, SHUFFLE, FLETCHER32 = 1, 2, 3
_SUPPORTED = {DEFLATE, SHUFFLE, FLETCHER32}
_MIN_BYTES_PER_THREAD = 1 << 19  # below this, a thread hand-off costs more than it saves


class FastReadError(ValueError):
    """The fast path could not decode a chunk; read the dataset through h5py instead."""


@dataclass(frozen=True)
class RawSource:
    """Where an HDF5 file's bytes are: ``size`` bytes of descriptor ``fd`` from ``start``.

    ``size`` is ``None`` when the file is the whole descriptor.
    """

    fd: int
    start: int = 0
    size: int | None = None


@dataclass(frozen=True)
class Chunk:
    """One allocated chunk: element offset per axis, filter mask, file address, stored size."""

    offset: tuple[int, ...]
    mask: int
    address: int
    size: int


@dataclass(frozen=True)
class Plan:
    """What decoding one chunked dataset needs, taken from its HDF5 metadata."""

    shape: tuple[int, ...]
    dtype: np.dtype
    chunk_shape: tuple[int, ...]
    filters: tuple[tuple[int, tuple[int, ...]], ...]  # (filter id, client values), write order
    fill: np.ndarray  # 0-d, the dataset's fill value
    chunks: tuple[Chunk, ...]  # allocated chunks, by file address

    @property
    def chunk_nbytes(self) -> int:
        """Bytes of one decoded chunk."""
        return math.prod(self.chunk_shape) * self.dtype.itemsize

    @property
    def complete(self) -> bool:
        """True when every chunk of the dataset is allocated (no fill value needed)."""
        grid = math.prod(-(-s // c) for s, c in zip(self.shape, self.chunk_shape, strict=True))
        return len(self.chunks) == grid


def plan(dset: h5py.Dataset) -> Plan | None:
    """Return the decoding plan of ``dset``, or ``None`` when h5py must read it.

    Handled: chunked layout, filters among deflate, shuffle and fletcher32, a fixed-size dtype
    stored exactly as numpy holds it (so HDF5 would not convert it), a defined fill value and
    no user block.
    """
    dcpl = dset.id.get_create_plist()
    if dcpl.get_layout() != h5py.h5d.CHUNKED or dset.chunks is None or dset.size == 0:
        return None
    filters = tuple(_filter(dcpl, i) for i in range(dcpl.get_nfilters()))
    if any(code not in _SUPPORTED for code, _ in filters):
        return None
    dtype = dset.dtype
    if dtype.hasobject or dtype.kind not in "biufcS":
        return None
    try:
        if not h5py.h5t.py_create(dtype).equal(dset.id.get_type()):
            return None  # HDF5 would convert on read
    except (TypeError, ValueError):
        return None
    if dcpl.fill_value_defined() == h5py.h5d.FILL_VALUE_UNDEFINED:
        return None
    if dcpl.get_fill_time() == h5py.h5d.FILL_TIME_NEVER:
        return None
    if dset.file.id.get_create_plist().get_userblock():
        return None  # chunk addresses would need the base-address correction
    fill = np.array(dset.fillvalue, dtype=dtype)
    chunks = sorted(_chunk_index(dset.id), key=lambda c: c.address)
    return Plan(tuple(dset.shape), dtype, tuple(dset.chunks), filters, fill, tuple(chunks))


def _filter(dcpl: h5py.h5p.PropDCID, i: int) -> tuple[int, tuple[int, ...]]:
    code, _flags, values, _name = dcpl.get_filter(i)
    return int(code), tuple(int(v) for v in values)


def _chunk_index(dsid: h5py.h5d.DatasetID) -> list[Chunk]:
    found: list[Chunk] = []
    if hasattr(dsid, "chunk_iter"):
        dsid.chunk_iter(lambda s: found.append(
            Chunk(tuple(s.chunk_offset), s.filter_mask, s.byte_offset, s.size)))
        return found
    for i in range(dsid.get_num_chunks()):  # older HDF5: one call per chunk
        s = dsid.get_chunk_info(i)
        found.append(Chunk(tuple(s.chunk_offset), s.filter_mask, s.byte_offset, s.size))
    return found


def read(p: Plan, source: RawSource, rows: Sequence[int] | np.ndarray | None = None) -> np.ndarray:
    """Decode the dataset, or only rows ``rows`` (increasing, unique) of its first axis.

    Returns:
        An array of the dataset's dtype: the full shape, or ``(len(rows), *shape[1:])``.

    Raises:
        FastReadError: A chunk is out of the file's range, short, or fails to decode.
    """
    sel = None if rows is None else np.asarray(rows, dtype=np.int64)
    out_shape = p.shape if sel is None else (len(sel), *p.shape[1:])
    out = np.empty(out_shape, dtype=p.dtype)
    todo = p.chunks if sel is None else tuple(c for c in p.chunks if _hits(p, c, sel))
    if not p.complete:
        out[...] = p.fill
    if not todo or out.size == 0:
        return out
    n_threads = threads_for(len(todo) * p.chunk_nbytes, len(todo), _MIN_BYTES_PER_THREAD)
    per = -(-len(todo) // n_threads)
    groups = [todo[i:i + per] for i in range(0, len(todo), per)]
    run_all([lambda g=g: _decode_group(p, source, g, out, sel) for g in groups])
    return out


def _hits(p: Plan, c: Chunk, sel: np.ndarray) -> bool:
    lo, hi = np.searchsorted(sel, (c.offset[0], c.offset[0] + p.chunk_shape[0]))
    return bool(hi > lo)


class _Buffers(threading.local):
    """Per-thread scratch buffers, grown on demand and kept."""

    def __init__(self) -> None:
        self.raw = np.empty(0, np.uint8)
        self.a = np.empty(0, np.uint8)
        self.b = np.empty(0, np.uint8)

    def get(self, name: str, n: int) -> np.ndarray:
        buf = getattr(self, name)
        if buf.nbytes < n:
            buf = np.empty(max(n, 2 * buf.nbytes), np.uint8)
            setattr(self, name, buf)
        return buf


_BUFFERS = _Buffers()


def _decode_group(
    p: Plan, source: RawSource, group: Sequence[Chunk], out: np.ndarray, sel: np.ndarray | None
) -> None:
    contiguous_shape = _contiguous_chunk_shape(p)
    flat = out.reshape(-1).view(np.uint8)
    for c in group:
        raw = _read_raw(source, c)
        target = None
        if sel is None and contiguous_shape and _is_full(p, c):
            start = int(np.ravel_multi_index(c.offset, p.shape)) * p.dtype.itemsize
            target = flat[start:start + p.chunk_nbytes]
        data = _unfilter(p, c, raw, target)
        if target is None:
            _place(p, c, data.view(p.dtype).reshape(p.chunk_shape), out, sel)


def _read_raw(source: RawSource, c: Chunk) -> np.ndarray:
    if c.address < 0 or (source.size is not None and c.address + c.size > source.size):
        raise FastReadError(f"chunk at {c.address} (+{c.size}) lies outside the file")
    buf = _BUFFERS.get("raw", c.size)
    got = os.preadv(source.fd, [memoryview(buf)[:c.size]], source.start + c.address)
    if got != c.size:
        raise FastReadError(f"short read: {got} of {c.size} bytes at {c.address}")
    return buf


def _unfilter(p: Plan, c: Chunk, raw: np.ndarray, target: np.ndarray | None) -> np.ndarray:
    """Undo the chunk's filters; the result is in ``target`` when given, else a scratch buffer."""
    steps = [f for i, f in reversed(list(enumerate(p.filters))) if not c.mask >> i & 1]
    nbytes = p.chunk_nbytes
    checksums_left = sum(code == FLETCHER32 for code, _ in steps)
    cur, cur_n, cur_name = raw, c.size, "raw"
    for j, (code, values) in enumerate(steps):
        if code == FLETCHER32:
            _verify_fletcher32(cur[:cur_n])
            cur_n -= 4
            checksums_left -= 1
            continue
        want = nbytes + 4 * checksums_left
        if want == nbytes and target is not None and j == len(steps) - 1:
            dst, dst_name = target, "target"
        else:
            dst_name = "b" if cur_name == "a" else "a"
            dst = _BUFFERS.get(dst_name, want)[:want]
        if code == DEFLATE:
            try:
                _inflate.inflate_into(cur, cur_n, dst)
            except _inflate.InflateError as exc:
                raise FastReadError(f"chunk at {c.address}: {exc}") from exc
        else:  # SHUFFLE
            if cur_n != want:
                raise FastReadError(f"chunk at {c.address}: {cur_n} bytes, expected {want}")
            _unshuffle(cur[:cur_n], dst, values[0] if values else p.dtype.itemsize)
        cur, cur_n, cur_name = dst, want, dst_name
    if cur_n != nbytes:
        raise FastReadError(f"chunk at {c.address}: {cur_n} bytes, expected {nbytes}")
    if target is None:
        return cur[:nbytes]
    if cur is not target:
        target[:] = cur[:nbytes]
    return target


def _unshuffle(src: np.ndarray, dst: np.ndarray, size: int) -> None:
    """Undo HDF5's byte shuffle: byte ``k`` of every element is stored in plane ``k``."""
    if size <= 1:
        dst[:] = src
        return
    n = len(dst) // size
    body = dst[:n * size].reshape(n, size)
    for k in range(size):
        body[:, k] = src[k * n:(k + 1) * n]
    dst[n * size:] = src[n * size:len(dst)]  # a tail shorter than one element stays in place


def _verify_fletcher32(data: np.ndarray) -> None:
    from numcodecs.fletcher32 import Fletcher32

    try:
        Fletcher32().decode(data)
    except RuntimeError as exc:
        raise FastReadError(f"fletcher32 checksum mismatch ({exc})") from exc


def _contiguous_chunk_shape(p: Plan) -> bool:
    """True when a whole chunk is one contiguous run of the C-ordered output."""
    dims = list(zip(p.chunk_shape, p.shape, strict=True))
    k = 0
    while k < len(dims) and dims[k][0] == 1:
        k += 1
    return all(c == s for c, s in dims[k + 1:])


def _is_full(p: Plan, c: Chunk) -> bool:
    return all(o + n <= s for o, n, s in zip(c.offset, p.chunk_shape, p.shape, strict=True))


def _place(p: Plan, c: Chunk, chunk: np.ndarray, out: np.ndarray, sel: np.ndarray | None) -> None:
    extent = [min(n, s - o) for o, n, s in zip(c.offset, p.chunk_shape, p.shape, strict=True)]
    inner_out = tuple(slice(o, o + e) for o, e in zip(c.offset[1:], extent[1:], strict=True))
    inner_in = tuple(slice(0, e) for e in extent[1:])
    if sel is None:
        o0 = c.offset[0]
        out[(slice(o0, o0 + extent[0]), *inner_out)] = chunk[(slice(0, extent[0]), *inner_in)]
        return
    lo, hi = np.searchsorted(sel, (c.offset[0], c.offset[0] + extent[0]))
    out[(slice(lo, hi), *inner_out)] = chunk[(sel[lo:hi] - c.offset[0], *inner_in)]
