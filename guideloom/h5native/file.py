"""Opening an HDF5 file from a :class:`ByteSource` and reading datasets without h5py."""

from __future__ import annotations

import math
import struct
import threading
from collections.abc import Sequence

import numpy as np
import psutil

from guideloom.errors import FastReadError
from guideloom.fastread import chunks as fastchunks
from guideloom.h5native import indexes, messages
from guideloom.h5native.blocks import FIRST_BLOCK, Blocks
from guideloom.h5native.errors import (
    NativeDamageError,
    NativeError,
    NativeFormatError,
    NativeUnsupported,
)
from guideloom.h5native.meta import DatasetInfo, FileMeta
from guideloom.h5native.objects import Reader, read_object_header, read_superblock
from guideloom.read.byte_source import ByteSource
from guideloom.read.ranges import COALESCE_GAP, coalesce_ranges

SUPPORTED_FILTERS = {fastchunks.DEFLATE, fastchunks.SHUFFLE, fastchunks.FLETCHER32}
MAX_CHUNK_BYTES = 1 << 32  # HDF5's own limit on one chunk
LARGE_READ = 1 << 30  # reads from this size are checked against the memory available
MAX_SPAN = 64 << 20  # bytes fetched across one dataset's B-tree leaves in one range, at most
MAX_PATH_DEPTH = 64
# chunks of a local source read in one pread per run of neighbours: gaps of at most this many
# bytes are read along (and dropped)
LOCAL_GAP = COALESCE_GAP


class H5File:
    """One HDF5 file read natively. Build it with :func:`open_file`."""

    def __init__(self, source: ByteSource, base: int, size: int, meta: FileMeta | None,
                 first_block: int = FIRST_BLOCK):
        self.source, self.base, self.size = source, base, size
        self.blocks = Blocks(source, base, size, first_block=first_block)
        self._infos: dict[str, DatasetInfo] = dict(meta.datasets) if meta else {}
        self._groups: dict[int, dict[str, int]] = {}
        self._plans: dict[str, fastchunks.Plan] = {}
        self._fetched: dict[int, bytes] = {}  # chunk bytes by address (:meth:`prefetch`)
        self._root_cache: tuple[int, int] | None = None
        if meta is not None:
            self._reader: Reader | None = Reader(self.blocks, meta.offset_size, meta.length_size)
            self._root = meta.root
        else:
            self._reader = None
            self._root = -1

    @property
    def reader(self) -> Reader:
        if self._reader is None:
            sb = read_superblock(self.blocks)
            self._reader = Reader(self.blocks, sb.offset_size, sb.length_size)
            self._root = sb.root
            if sb.root_btree is not None and sb.root_heap is not None:
                self._root_cache = (sb.root_btree, sb.root_heap)
        return self._reader

    @property
    def meta(self) -> FileMeta:
        """What has been parsed so far (for a cache; see :func:`open_file`)."""
        r = self.reader
        return FileMeta(r.osz, r.lsz, self._root, dict(self._infos))

    def dataset(self, path: str) -> DatasetInfo:
        """The description of dataset ``path``.

        Raises:
            KeyError: No dataset at ``path``.
            NativeUnsupported: It (or a group on the way) uses a feature not handled here.
            NativeFormatError: Its metadata is damaged.
        """
        key = _key(path)
        info = self._infos.get(key)
        if info is None:
            try:
                info = self._parse_dataset(key)
            except (struct.error, IndexError, ValueError, OverflowError) as exc:
                raise NativeFormatError(f"dataset {key!r}: damaged metadata ({exc})") from exc
            self._infos[key] = info
        return info

    def read(self, path: str, rows: Sequence[int] | np.ndarray | None = None, *,
             out: np.ndarray | None = None) -> np.ndarray:
        """The values of dataset ``path``, or of rows ``rows`` (increasing, unique) of its
        first axis. ``out``, a C-contiguous array of the result's shape and dtype, receives
        them when given.

        Raises:
            KeyError, NativeUnsupported, NativeFormatError: As :meth:`dataset`, and
                NativeFormatError for data that does not decode.
            IndexError: A row is out of range.
        """
        info = self.dataset(path)
        dtype = info.np_dtype
        shape = info.shape
        sel = None
        if rows is not None:
            if not shape:
                raise IndexError("rows of a scalar dataset")
            sel = np.asarray(rows, dtype=np.int64).reshape(-1)
            if sel.size and (sel[0] < 0 or sel[-1] >= shape[0] or np.any(np.diff(sel) <= 0)):
                raise IndexError(f"rows must be increasing and in [0, {shape[0]})")
        out_shape = shape if sel is None else (len(sel), *shape[1:])
        nbytes = math.prod(out_shape) * dtype.itemsize
        if nbytes >= LARGE_READ and nbytes > psutil.virtual_memory().available:
            raise NativeFormatError(f"dataset {path!r} of shape {shape} does not fit in memory")
        if out is not None and (out.shape != out_shape or out.dtype != dtype
                                or not out.flags.c_contiguous):
            out = None
        if 0 in out_shape:
            return np.empty(out_shape, dtype) if out is None else out
        if info.layout == "chunked":
            return self._read_chunked(path, info, sel, out)
        if out is None:
            out = np.empty(out_shape, dtype)
        flat = self._whole(info, sel)
        if flat is None:
            out[...] = info.fill_value()
        else:
            out.reshape(-1)[:] = flat
        return out

    # -- reading data ---------------------------------------------------------------------

    def _whole(self, info: DatasetInfo, sel: np.ndarray | None) -> np.ndarray | None:
        """Contiguous or compact data (the rows ``sel``) as a flat array; None: all fill."""
        dtype = info.np_dtype
        need = info.size * dtype.itemsize
        if info.layout == "compact":
            if len(info.compact) != need:  # HDF5 refuses a mismatch too
                raise NativeFormatError(f"compact data of {len(info.compact)} bytes, "
                                        f"expected {need}")
            data = np.frombuffer(info.compact, dtype, count=info.size)
            return data if sel is None else data.reshape(info.shape)[sel].reshape(-1)
        if info.address is None:
            return None
        if info.nbytes < need:
            raise NativeFormatError(f"contiguous data of {info.nbytes} bytes, expected {need}")
        if sel is None:
            blob = self._data(info.address, need)
            return np.frombuffer(blob, dtype, count=info.size)
        row = need // info.shape[0]
        runs = _runs(sel)
        ranges = [(info.address + a * row, (b - a) * row) for a, b in runs]
        blobs = self._data_ranges(ranges)
        return np.frombuffer(b"".join(blobs), dtype)

    def _data(self, addr: int, n: int) -> bytes | memoryview:
        self.blocks.check(addr, n)
        held = self.blocks.held(addr, n)
        if held is not None:
            block, off = held
            return memoryview(block)[off:off + n]
        return self._data_ranges([(addr, n)])[0]

    def _data_ranges(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        for addr, n in ranges:
            self.blocks.check(addr, n)
        try:
            blobs = self.source.read_ranges([(self.base + a, n) for a, n in ranges])
        except OSError as exc:
            raise NativeFormatError(f"reading data: {exc}") from exc
        for (addr, n), blob in zip(ranges, blobs, strict=True):
            if len(blob) != n:
                raise NativeFormatError(f"short read of {n} bytes at {addr}")
        return blobs

    def _read_chunked(self, path: str, info: DatasetInfo, sel: np.ndarray | None,
                      out: np.ndarray | None) -> np.ndarray:
        p = self._plans.get(path)
        if p is None:
            p = self._plans[path] = _plan(info)
        todo = fastchunks.needed(p, sel)
        found: dict[int, np.ndarray] = {}
        missing = []
        for c in todo:
            self.blocks.check(c.address, c.size, "chunk")
            got = self._fetched.get(c.address)
            if got is not None and len(got) == c.size:
                found[c.address] = np.frombuffer(got, np.uint8)
                continue
            held = self.blocks.held(c.address, c.size)
            if held is None:
                missing.append(c)
            else:
                found[c.address] = np.frombuffer(held[0], np.uint8, c.size, held[1])
        if missing and not self.source.high_latency:
            found.update(self._local_chunks(missing))
        elif missing:
            blobs = self._data_ranges([(c.address, c.size) for c in missing])
            for c, blob in zip(missing, blobs, strict=True):
                found[c.address] = np.frombuffer(blob, np.uint8)
        try:
            return fastchunks.read(p, fastchunks.ChunkBytes(found), sel, out)
        except FastReadError as exc:
            raise NativeFormatError(f"dataset {path!r}: {exc}") from exc

    def _local_chunks(self, chunks: Sequence[fastchunks.Chunk], gap: int = LOCAL_GAP
                      ) -> dict[int, np.ndarray]:
        """The stored bytes of ``chunks`` (checked to lie in the file) by address, read from
        a local source with one ``pread`` per run of neighbours (:func:`coalesce_ranges`:
        gaps up to ``gap`` bytes) into this thread's scratch
        buffer: a view each, valid until this thread reads chunks again (the decode that
        follows is done by then). A 2000 x 3200 scan's 512 chunks take one call, not 512."""
        runs = coalesce_ranges([(c.address, c.size) for c in chunks], gap)
        scratch = _SCRATCH.get(sum(n for _, n in runs))
        views: list[np.ndarray] = []
        at = 0
        for addr, n in runs:
            view = scratch[at:at + n]
            try:
                got = self.source.readinto(view.data, self.base + addr)
            except OSError as exc:
                raise NativeFormatError(f"reading data: {exc}") from exc
            if got != n:
                raise NativeFormatError(f"short read of {n} bytes at {addr}")
            views.append(view)
            at += n
        starts = [addr for addr, _ in runs]
        found = {}
        k = 0
        for c in sorted(chunks, key=lambda c: c.address):
            while k + 1 < len(runs) and starts[k + 1] <= c.address:
                k += 1
            off = c.address - starts[k]
            found[c.address] = views[k][off:off + c.size]
        return found

    # -- fetching several datasets together ------------------------------------------------

    def prefetch(self, paths: Sequence[str], whole: Sequence[str] = ()) -> None:
        """Fetch what reading the datasets ``paths`` needs in few round trips, each one
        ``read_ranges`` call (a remote source coalesces it and issues it concurrently): the
        object headers of those not described yet, then each level of their v1 B-tree chunk
        indexes, all datasets' nodes of a level together; then the chunks of the datasets
        ``whole`` (read whole next) in one call. Nothing is checked or raised here: the reads
        that follow do that, fetching whatever this did not."""
        keys = [k for k in map(_key, paths) if k and k not in self._infos]
        read_whole = {_key(p) for p in whole}
        try:
            headers = {k: a for k in keys if (a := self._header_address(k)) is not None}
            self.blocks.prefetch([(a, self.blocks.miss_block) for a in headers.values()])
            r = self.reader
            trees = [t for k, a in headers.items()
                     if (t := self._btree_root(a, k in read_whole)) is not None]
            indexes.prefetch_btrees(r, trees)
            for key in keys:
                self.dataset(key)
        except (KeyError, NativeError, struct.error, IndexError, ValueError, OverflowError):
            pass
        self._prefetch_chunks(whole)

    def _header_address(self, key: str) -> int | None:
        """The object header address of ``key`` (its groups read as a lookup reads them)."""
        _ = self.reader  # reads the superblock: the root group's address
        addr = self._root
        for part in key.split("/"):
            target = self._members(addr).get(part)
            if target is None:
                return None
            addr = target
        return addr

    def _btree_root(self, header: int, whole: bool) -> tuple[int, int, int] | None:
        """``(address, rank, span)`` of the v1 B-tree chunk index of the dataset at
        ``header``; ``span``: the bytes its leaves may be fetched across in one range (its
        values' size when it is read whole, else 0; see :func:`indexes.prefetch_btrees`)."""
        r = self.reader
        msgs = read_object_header(r, header)
        body, space = messages.find(msgs, messages.LAYOUT), messages.find(msgs, messages.DATASPACE)
        dt_body = messages.find(msgs, messages.DATATYPE)
        if body is None or space is None or dt_body is None:
            return None
        shape = messages.dataspace(r, space)[0]
        lay = messages.layout(r, body, len(shape))
        if lay.kind != "chunked" or lay.index != 0 or lay.address is None:
            return None
        span = math.prod(shape) * messages.datatype(dt_body).itemsize if whole else 0
        return lay.address, len(shape), min(span, MAX_SPAN)

    def _prefetch_chunks(self, paths: Sequence[str]) -> None:
        """The chunks of the chunked datasets ``paths`` not held yet, in one call."""
        want: list[tuple[int, int]] = []
        for path in paths:
            info = self._infos.get(_key(path))
            if info is None or info.layout != "chunked":
                continue
            for _offset, _mask, addr, size in info.chunks:
                if (addr not in self._fetched and addr >= 0 and size > 0
                        and addr + size <= self.size and self.blocks.held(addr, size) is None):
                    want.append((addr, size))
        if len(want) < 2:
            return
        try:
            blobs = self.source.read_ranges([(self.base + a, n) for a, n in want])
        except OSError:
            return  # the reads fetch their chunks again and word the error
        for (addr, _n), blob in zip(want, blobs, strict=True):
            self._fetched[addr] = blob

    # -- metadata ---------------------------------------------------------------------------

    def _members(self, header: int) -> dict[str, int]:
        """``{name: object header address}`` of the group whose header is at ``header``."""
        found = self._groups.get(header)
        if found is not None:
            return found
        r = self.reader
        if header == self._root and self._root_cache is not None:
            found = indexes.group_members(r, *self._root_cache)
        else:
            msgs = read_object_header(r, header)
            body = messages.find(msgs, messages.SYMBOL_TABLE)
            if body is not None:
                found = indexes.group_members(r, *messages.symbol_table(r, body))
            else:
                info = messages.find(msgs, messages.LINK_INFO)
                if info is not None and messages.dense_storage(r, info):
                    raise NativeUnsupported("a group with dense link storage")
                found = {}
                for t, _f, b in msgs:
                    if t == messages.LINK:
                        name, target, kind = messages.link(r, b)
                        if kind != 0:
                            raise NativeUnsupported(f"link {name!r} of type {kind} (soft or "
                                                    "external)")
                        found[name] = target  # type: ignore[assignment]
                if info is None and not found and messages.find(msgs, messages.LAYOUT):
                    raise KeyError("not a group")
        self._groups[header] = found
        return found

    def _parse_dataset(self, key: str) -> DatasetInfo:
        r = self.reader
        parts = key.split("/")
        if not key or len(parts) > MAX_PATH_DEPTH:
            raise KeyError(key)
        addr = self._root
        for part in parts:
            try:
                members = self._members(addr)
            except KeyError:
                raise KeyError(f"{key}: {part!r} is below a dataset") from None
            target = members.get(part)
            if target is None:
                raise KeyError(f"{key}: no {part!r}")
            addr = target
        msgs = read_object_header(r, addr)
        if messages.find(msgs, messages.EXTERNAL) is not None:
            raise NativeUnsupported("external raw data storage")
        lay_body = messages.find(msgs, messages.LAYOUT)
        space = messages.find(msgs, messages.DATASPACE)
        dt_body = messages.find(msgs, messages.DATATYPE)
        if lay_body is None or space is None or dt_body is None:
            raise KeyError(f"{key} is not a dataset")
        shape, maxshape = messages.dataspace(r, space)
        dtype = messages.datatype(dt_body)
        lay = messages.layout(r, lay_body, len(shape))
        flt = messages.filters(messages.find(msgs, messages.FILTERS))
        if any(code not in SUPPORTED_FILTERS for code, _ in flt):
            raise NativeUnsupported(f"filters {[c for c, _ in flt]}")
        if any(code == fastchunks.SHUFFLE and params and params[0] != dtype.itemsize
               for code, params in flt):  # HDF5 writes the element size there
            raise NativeDamageError(f"a shuffle filter for elements of other than "
                                    f"{dtype.itemsize} bytes (a damaged filter parameter, "
                                    "which HDF5 reads as bytes left shuffled)")
        fill = messages.fill_value(msgs, dtype)
        if lay.kind != "chunked":
            if flt:
                raise NativeFormatError("filters on a dataset that is not chunked")
            if lay.kind == "compact" and len(lay.compact) != math.prod(shape) * dtype.itemsize:
                raise NativeFormatError(f"compact data of {len(lay.compact)} bytes for shape "
                                        f"{shape}")  # HDF5 refuses the mismatch too
            return DatasetInfo(shape, maxshape, dtype.str, lay.kind, fill=fill,
                               address=lay.address, nbytes=lay.nbytes, compact=lay.compact)
        if not shape:
            raise NativeFormatError("a chunked scalar dataset")
        if math.prod(lay.chunk_shape) * dtype.itemsize > MAX_CHUNK_BYTES:
            raise NativeFormatError(f"chunks of shape {lay.chunk_shape}")
        found = indexes.chunk_index(r, lay, shape, maxshape, dtype.itemsize)
        found.sort(key=lambda c: c[2])
        return DatasetInfo(shape, maxshape, dtype.str, "chunked", lay.chunk_shape, flt, fill,
                           chunks=tuple(found))


class _Scratch(threading.local):
    """One reused byte buffer per thread for chunks read together, grown on demand (kept
    only up to :data:`MAX_SPAN` times two: a larger read gets a buffer of its own)."""

    def __init__(self) -> None:
        self.buf = np.empty(0, np.uint8)

    def get(self, n: int) -> np.ndarray:
        if n > 2 * MAX_SPAN:
            return np.empty(n, np.uint8)
        if self.buf.nbytes < n:
            self.buf = np.empty(n, np.uint8)
        return self.buf


_SCRATCH = _Scratch()


def _key(path: str) -> str:
    return "/".join(p for p in path.split("/") if p and p != ".")


def _runs(sel: np.ndarray) -> list[tuple[int, int]]:
    """Increasing rows as ``[start, stop)`` runs of consecutive rows."""
    breaks = np.flatnonzero(np.diff(sel) != 1) + 1
    starts = np.concatenate(([0], breaks))
    stops = np.concatenate((breaks, [len(sel)]))
    return [(int(sel[a]), int(sel[b - 1]) + 1) for a, b in zip(starts, stops, strict=True)]


def _plan(info: DatasetInfo) -> fastchunks.Plan:
    assert info.chunk_shape is not None
    return fastchunks.make_plan(
        info.shape, info.np_dtype, info.chunk_shape, info.filters, info.fill_value(),
        [fastchunks.Chunk(o, m, a, s) for o, m, a, s in info.chunks])


def open_file(source: ByteSource, base: int = 0, size: int | None = None,
              meta: FileMeta | None = None, *, first_block: int = FIRST_BLOCK) -> H5File:
    """Open the HDF5 file that starts at ``base`` of ``source`` (``size`` bytes; the rest of
    the source by default). With ``meta`` (from an earlier :attr:`H5File.meta`) the datasets
    it describes are read without any metadata read. Nothing is read until a dataset is asked
    for; the first metadata read fetches ``first_block`` bytes from the file's start.

    Raises:
        NativeFormatError: ``base``/``size`` do not fit the source.
    """
    total = source.size()
    if size is None:
        size = total - base
    if base < 0 or size < 0 or base + size > total:
        raise NativeFormatError(f"file range {base}+{size} outside the source's {total} bytes")
    return H5File(source, base, size, meta, first_block)
