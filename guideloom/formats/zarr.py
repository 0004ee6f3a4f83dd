"""``zarr``: a zarr v3 group with one array per alias, chunked along records, plus ``sim_ids``.

Chunk boundaries lie on partition boundaries, so no two tasks write one chunk; a task buffers a
chunk's rows and writes it whole. The store is a local path or any fsspec URL the workers reach.
"""

from __future__ import annotations

import os
import posixpath
import re
import shutil
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from guideloom.errors import CorruptExportError, permission_denied
from guideloom.faults import fault_point
from guideloom.formats.base import (
    ExportFormat,
    FormatReader,
    Part,
    PartitionSink,
    Schema,
    fail,
)
from guideloom.formats.checksums import RowDigests, digest
from guideloom.formats.durable import fsync_files, fsync_tree
from guideloom.formats.layout import SIM_IDS_ARRAY, check_output_name
from guideloom.formats.options import option

if TYPE_CHECKING:  # zarr is imported where it is used (import guideloom stays cheap)
    from zarr.abc.store import ByteRequest, Store
    from zarr.codecs import BloscCodec, GzipCodec
    from zarr.core.array_spec import ArrayConfigParams
    from zarr.core.buffer import Buffer, BufferPrototype

ZARR_CHUNK_BYTES = 16 << 20  # upper bound of one zarr chunk
ONE_ROW_CHUNK_BYTES = 512 << 10  # rows this large get a chunk each (compaction renames them)
COMPACT_GROUP_BYTES = 64 << 20  # source rows one compaction thread holds decoded at once
DEFAULT_COMPRESSOR = "lz4"
BLOSC_LEVEL = 5
GZIP_LEVEL = 4


_BLOSC_CNAMES: dict[str, Literal["lz4", "zstd"]] = {"lz4": "lz4", "zstd": "zstd"}


def zarr_compressor(name: str | None) -> BloscCodec | GzipCodec | None:
    """A zarr v3 codec for ``"lz4"`` (default), ``"zstd"``, ``"gzip"`` or ``None``."""
    from zarr.codecs import BloscCodec, GzipCodec

    if name is None or name == "none":
        return None
    cname = _BLOSC_CNAMES.get(name)
    if cname is not None:
        return BloscCodec(cname=cname, clevel=BLOSC_LEVEL, shuffle="shuffle")
    if name == "gzip":
        return GzipCodec(level=GZIP_LEVEL)
    raise ValueError(f"unknown zarr compressor {name!r}; use 'lz4', 'zstd', 'gzip' or None")


# every chunk is written, even one of fill values: a missing chunk file is then damage
WRITE_EVERY_CHUNK: ArrayConfigParams = {"write_empty_chunks": True}
ALL_CHUNKS_KEY = "zarr_all_chunks"  # export.json: every chunk has its file (B7)


def zarr_store(url: str, strict: bool = False) -> Store:
    """A zarr store for a local path or an fsspec URL.

    ``strict`` (reading a published export): a chunk whose file is missing raises
    :class:`~guideloom.errors.CorruptExportError` instead of reading as the fill value.
    """
    import zarr.storage

    if strict:
        return _strict_store(url)
    if "://" not in url:
        return zarr.storage.LocalStore(url)
    return zarr.storage.FsspecStore.from_url(url)


def is_chunk_key(key: str) -> bool:
    """Whether a store key names a chunk (``alias/c/0/0``), not metadata (``zarr.json``)."""
    parts = key.split("/")
    return parts[-1] != "zarr.json" and "c" in parts[:-1]


def _strict_store(url: str) -> Store:
    """A store of the published export at ``url`` whose missing chunks are errors."""
    import zarr.storage

    base = zarr.storage.LocalStore if "://" not in url else zarr.storage.FsspecStore

    class StrictStore(base):  # type: ignore[misc, valid-type]
        async def get(self, key: str, prototype: BufferPrototype | None = None,
                      byte_range: ByteRequest | None = None) -> Buffer | None:
            value: Buffer | None = await super().get(key, prototype, byte_range)
            if value is None and is_chunk_key(key):
                fail(url, key, "the chunk file is missing")
            return value

    store: Store
    if base is zarr.storage.LocalStore:
        store = StrictStore(url)
        return store
    fs, path = _fs_of(url)
    store = StrictStore(fs=_async_fs(fs), path=path)
    return store


def _fs_of(url: str) -> tuple[Any, str]:
    import fsspec

    fs, path = fsspec.core.url_to_fs(url)
    return fs, str(path)


def _async_fs(fs: Any) -> Any:
    """An async view of ``fs`` (what FsspecStore needs)."""
    from fsspec.implementations.asyn_wrapper import AsyncFileSystemWrapper

    return fs if getattr(fs, "async_impl", False) else AsyncFileSystemWrapper(fs)


def expected_chunk_keys(arr: Any) -> set[str]:
    """The key (relative to the array) of every chunk of ``arr``."""
    import itertools
    import math

    grid = [math.ceil(s / c) if s else 0 for s, c in zip(arr.shape, arr.chunks, strict=True)]
    return {arr.metadata.encode_chunk_key(coords)
            for coords in itertools.product(*(range(g) for g in grid))}


def check_chunk_files(root: str, name: str, arr: Any) -> None:
    """Raise :class:`CorruptExportError` unless every chunk of array ``name`` has its file
    (one listing of the array's folder)."""
    fs, path = _fs_of(root)
    folder = f"{path.rstrip('/')}/{name}"
    present = {f[len(folder) + 1:] for f in fs.find(folder)}
    missing = sorted(expected_chunk_keys(arr) - present)
    if missing:
        fail(root, f"{name}/{missing[0]}", f"the chunk file is missing ({len(missing)} of "
                                           f"{arr.nchunks} chunks of {name!r} are)")


def rows_per_chunk(partition_size: int, row_bytes: int) -> int:
    """The largest divisor of ``partition_size`` whose chunk stays under the size bound, or 1
    for rows of :data:`ONE_ROW_CHUNK_BYTES` or more.

    Chunks then never straddle two partitions, so no two tasks write one chunk; and a chunk of
    one row moves into place by a rename when skipped rows are left out (no rewrite).
    """
    if row_bytes >= ONE_ROW_CHUNK_BYTES:
        return 1
    best = 1
    for d in range(1, partition_size + 1):
        if partition_size % d == 0 and d * max(row_bytes, 1) <= ZARR_CHUNK_BYTES:
            best = d
    return best


def dimension_names(alias: str, ndim: int) -> tuple[str, ...]:
    """``("sim_ids", "ALIAS_dim1", ...)``: rows are indexed by the ``sim_ids`` coordinate."""
    return (SIM_IDS_ARRAY, *(f"{alias}_dim{k}" for k in range(1, ndim)))


ZARR_GROUP_FILE = "zarr.json"
_ARRAY_ENTRY = re.compile(r"^(zarr\.json|c(/\d+)+)$")


ZARR_COMPRESSORS = ("lz4", "zstd", "gzip", "none")  # the default first


@dataclass(frozen=True)
class ZarrOptions:
    """Options of a ``zarr`` export."""

    compressor: str | None = option(DEFAULT_COMPRESSOR, enum=list(ZARR_COMPRESSORS),
                                    description="the chunks' codec (None or 'none': raw)")


class ZarrFormat(ExportFormat):
    """A zarr v3 group: one array per alias plus ``sim_ids``."""

    kind = "zarr"
    description = "a zarr v3 group, one array per field chunked along rows (local or fsspec URL)"
    local_only = False
    Options = ZarrOptions
    compressions = ZARR_COMPRESSORS  # [output] compression in a workflow file
    workflow_table = False
    skip_fault_points = ("compacted-chunk",)  # closing the gaps of skipped rows

    @classmethod
    def workflow_options(cls, output: Mapping[str, Any], context: Any) -> dict[str, Any]:
        compression = output.get("compression", cls.default_compression())
        return {"compressor": None if compression == "none" else compression}

    def _rows_url(self) -> str:
        return self.stage.url_of("rows")

    def allocate(self, n_rows: int, schema: Mapping[str, Schema], partition_size: int) -> None:
        import zarr

        try:
            group = zarr.open_group(zarr_store(self._rows_url()), mode="a")
            for alias in schema:
                if alias in group:
                    group[alias]  # resumed job: its metadata must read
        except ValueError:  # metadata a power loss cut short: no marker can need these rows
            if not self.stage.is_local:
                raise
            shutil.rmtree(self.stage.path("rows"))
            os.makedirs(self.stage.path("rows"))
            group = zarr.open_group(zarr_store(self._rows_url()), mode="a")
        compressor = zarr_compressor(self.options.get("compressor", DEFAULT_COMPRESSOR))
        for alias, fs in schema.items():
            check_output_name(alias, "zarr export")
            if alias in group:
                continue  # resumed job
            row_bytes = int(np.prod(fs.shape, dtype=np.int64)) * np.dtype(fs.dtype).itemsize
            rpc = rows_per_chunk(partition_size, row_bytes)
            group.create_array(
                alias, shape=(n_rows, *fs.shape), chunks=(rpc, *fs.shape),
                dtype=np.dtype(fs.dtype), compressors=compressor, fill_value=0,
                config=WRITE_EVERY_CHUNK, dimension_names=dimension_names(alias, 1 + len(fs.shape)),
            )
        if self.stage.is_local:  # the metadata outlives a power loss before the first marker
            fsync_tree(self.stage.path("rows"))

    def sink(self, part: Part, schema: Mapping[str, Schema] | None) -> PartitionSink:
        assert schema is not None
        return ZarrSink(self._rows_url(), part, schema,
                        self.stage.path("rows") if self.stage.is_local else None)

    def finalize(self, keep: np.ndarray | None) -> None:
        """Move each alias's rows into ``data/``; with skipped rows, close the gaps chunk by
        chunk (see :func:`compact_array`), resuming where an interrupted run stopped."""
        import zarr

        rows = zarr.open_group(zarr_store(self._rows_url()), mode="a", use_consolidated=False)
        data = zarr.open_group(zarr_store(self.stage.url_of("data")), mode="a",
                               use_consolidated=False)
        for alias in sorted(rows.array_keys()):
            if keep is None or keep.all():
                if alias in data:  # an older run's leftover: the rows here are the job's
                    del data[alias]
                self.stage.move(self.stage.path("rows", alias), self.stage.path("data", alias))
                continue
            compact_array(self.stage, alias, rows[alias], data, np.flatnonzero(keep))
            del rows[alias]  # compacted: the data array is complete

    def write_sim_ids(self, sim_ids: np.ndarray, summaries: Sequence[Mapping[str, Any]]) -> None:
        """Write ``sim_ids`` (the coordinate of every array's first dimension) and the
        group's consolidated metadata, so ``xarray.open_zarr`` sees named dimensions."""
        import zarr

        store = zarr_store(self.stage.url_of("data"))
        group = zarr.open_group(store, mode="a", use_consolidated=False)
        if SIM_IDS_ARRAY in group:
            del group[SIM_IDS_ARRAY]
        group.create_array(SIM_IDS_ARRAY, data=sim_ids, chunks=(max(1, len(sim_ids)),),
                           config=WRITE_EVERY_CHUNK, dimension_names=(SIM_IDS_ARRAY,))
        with warnings.catch_warnings():  # zarr: "not part of the v3 specification" (yet)
            warnings.simplefilter("ignore", UserWarning)
            zarr.consolidate_metadata(store)

    def manifest_extra(self) -> dict[str, Any]:
        return {ALL_CHUNKS_KEY: True}

    @classmethod
    def open_reader(cls, root: str, manifest: Mapping[str, Any],
                    trust: bool = False) -> FormatReader:
        return ZarrReader(root, manifest)  # nothing in it runs code: trust changes nothing

    @classmethod
    def check_published(cls, root: str, manifest: Mapping[str, Any]) -> None:
        group = open_group_checked(root)
        count = int(manifest["count"])
        for alias, schema in manifest["fields"].items():
            arr = array_checked(root, group, alias)
            if tuple(arr.shape) != (count, *schema["shape"]):
                fail(root, alias, f"shape {tuple(arr.shape)} but export.json records "
                                  f"{(count, *schema['shape'])}")
            if arr.dtype != np.dtype(schema["dtype"]):
                fail(root, alias, f"dtype {arr.dtype.str} but export.json records "
                                  f"{schema['dtype']}")
        array_checked(root, group, SIM_IDS_ARRAY)
        if manifest.get(ALL_CHUNKS_KEY):  # written with every chunk stored: list them
            for name in (*manifest["fields"], SIM_IDS_ARRAY):
                check_chunk_files(root, name, group[name])
        super().check_published(root, manifest)

    @classmethod
    def described_files(cls, manifest: Mapping[str, Any]) -> dict[str, str]:
        return {**{a: a for a in manifest["fields"]}, "sim_ids": SIM_IDS_ARRAY}

    @classmethod
    def foreign_entries(cls, fs: Any, root: str, manifest: Mapping[str, Any]) -> list[str]:
        """Anything but ``zarr.json``, the shared files and, inside each array's folder,
        ``zarr.json`` and numbered chunk files under ``c/``."""
        arrays = set(cls.described_files(manifest).values())
        foreign = []
        for name in super().foreign_entries(fs, root, manifest):
            if name == ZARR_GROUP_FILE:
                continue
            if name.rstrip("/") not in arrays or not name.endswith("/"):
                foreign.append(name)
                continue
            folder = posixpath.join(root, name)
            for path in fs.find(folder, withdirs=False):
                rel = posixpath.relpath(str(path), folder.rstrip("/"))
                if not _ARRAY_ENTRY.match(rel):
                    foreign.append(f"{name}{rel}")
        return sorted(foreign)

    @classmethod
    def unit_digests(cls, root: str, manifest: Mapping[str, Any], group: str,
                     n_units: int) -> Iterator[tuple[str, str, int]]:
        """Group ``{alias}``: one checksum per decoded row, read one chunk at a time."""
        import zarr

        if group not in manifest["fields"]:
            yield from super().unit_digests(root, manifest, group, n_units)
            return
        arr = zarr.open_group(zarr_store(root, strict=True), mode="r",
                              use_consolidated=False)[group]
        step = max(1, arr.chunks[0])
        for start in range(0, arr.shape[0], step):
            try:
                block = arr[start:start + step]
            except CorruptExportError:
                raise
            except PermissionError as exc:  # unreadable is not damaged
                raise permission_denied(exc) from exc
            except Exception as exc:  # noqa: BLE001 - a damaged chunk fails in the codec
                fail(root, group, f"rows {start}-{min(start + step, arr.shape[0]) - 1}: the "
                                  f"chunk cannot be decoded ({type(exc).__name__}: {exc})")
            for i in range(len(block)):
                yield group, digest(block[i]), block[i].nbytes


COMPACT_THREADS = max(1, min(8, os.cpu_count() or 1))  # chunks rewritten at once


def compact_array(stage: Any, alias: str, src: Any, data: Any, kept: np.ndarray) -> None:
    """Write ``data[alias]`` holding rows ``kept`` of ``src``, one destination chunk at a time.

    A destination chunk whose rows are exactly one whole source chunk (every chunk, for arrays
    of one row per chunk) is that chunk's file, renamed; the others are read and written by
    :data:`COMPACT_THREADS` threads at once, each reading the source rows of a run of
    destination chunks once (:data:`COMPACT_GROUP_BYTES`). A destination chunk whose file
    exists is done (zarr writes a chunk file under a temporary name, then renames it), so a
    rerun after an interrupt does only the chunks left.
    """
    if alias in data:
        try:
            dst = data[alias]
        except _UNREADABLE_METADATA:  # torn by a power loss: no chunk of it can be trusted
            del data[alias]
    if alias not in data:
        dst = data.create_array(alias, shape=(len(kept), *src.shape[1:]), chunks=src.chunks,
                                dtype=src.dtype, compressors=src.compressors, fill_value=0,
                                config=WRITE_EVERY_CHUNK,
                                dimension_names=src.metadata.dimension_names)
    dst = dst.with_config(WRITE_EVERY_CHUNK)
    fs, src_root = _fs_of(stage.url_of("rows", alias))
    dst_root = _fs_of(stage.url_of("data", alias))[1]
    _remove_partial_chunks(fs, dst_root)
    present = {f[len(dst_root) + 1:] for f in fs.find(dst_root)}
    step, n_src = src.chunks[0], src.shape[0]
    tail = (0,) * (src.ndim - 1)
    rewrite: list[tuple[int, np.ndarray]] = []
    for j, start in enumerate(range(0, len(kept), step)):
        key = dst.metadata.encode_chunk_key((j, *tail))
        if key in present:
            continue  # done by an interrupted run
        sel = kept[start:start + step]
        first = int(sel[0])
        whole = (first % step == 0 and int(sel[-1]) - first + 1 == len(sel)
                 and len(sel) == min(step, n_src - first)
                 and (len(sel) == step or start + len(sel) == len(kept)))
        if whole:
            old_key = src.metadata.encode_chunk_key((first // step, *tail))
            stage.move(f"{src_root}/{old_key}", _made_parent(fs, f"{dst_root}/{key}"))
            fault_point("compacted-chunk")
        else:
            rewrite.append((start, sel))
    if rewrite:
        from concurrent.futures import ThreadPoolExecutor

        row_bytes = max(1, int(np.prod(src.shape[1:], dtype=np.int64)) * src.dtype.itemsize)
        per_group = max(1, COMPACT_GROUP_BYTES // (row_bytes * step))
        groups = [rewrite[k:k + per_group] for k in range(0, len(rewrite), per_group)]

        def copy(group: list[tuple[int, np.ndarray]]) -> None:
            """One read of the source rows the group's chunks need, then each chunk written."""
            lo, hi = int(group[0][1][0]), int(group[-1][1][-1])
            block = src[lo:hi + 1]
            for start, sel in group:
                dst[start:start + len(sel)] = block[sel - lo]
                fault_point("compacted-chunk")

        pool = ThreadPoolExecutor(COMPACT_THREADS, thread_name_prefix="guideloom-compact")
        try:
            list(pool.map(copy, groups))
        finally:  # Ctrl-C: the chunks being written finish, the queued ones are dropped
            pool.shutdown(wait=True, cancel_futures=True)


def _made_parent(fs: Any, path: str) -> str:
    fs.makedirs(posixpath.dirname(path), exist_ok=True)
    return path


def _remove_partial_chunks(fs: Any, root: str) -> None:
    """Remove the temporary chunk files (``*.partial``) a write interrupted in ``root`` left."""
    for path in fs.find(root) if fs.exists(root) else []:
        if str(path).endswith(".partial"):
            fs.rm(path)


class ZarrSink(PartitionSink):
    """Copies each record into its chunk's buffer, then writes a chunk whole once all its rows
    are there. The copy is taken in :meth:`write`, so a transform may return (and reuse) one
    buffer for every record."""

    def __init__(self, url: str, part: Part, schema: Mapping[str, Schema],
                 local_dir: str | None = None):
        import zarr

        group = zarr.open_group(zarr_store(url), mode="r+")
        self._arrays = {a: group[a].with_config(WRITE_EVERY_CHUNK) for a in schema}
        self._part = part
        self._local_dir = local_dir  # the group's folder on a local disk: chunks are fsynced
        self._written: list[str] = []
        self._blocks: dict[int, dict[str, np.ndarray]] = {}  # chunk start -> alias -> rows
        self._present: dict[int, set[int]] = {}  # chunk start -> rows written into its block
        self._bytes = 0
        self._sums = RowDigests()

    def _chunk(self, row: int) -> tuple[int, int]:
        """``(start, stop)`` of the chunk holding ``row`` (all aliases chunk rows alike)."""
        rpc = next(iter(self._arrays.values())).chunks[0]
        start = (row // rpc) * rpc
        return start, min(start + rpc, self._part.stop)

    def write(self, row: int, sim_id: Any, arrays: Mapping[str, np.ndarray]) -> None:
        start, stop = self._chunk(row)
        block = self._blocks.get(start)
        if block is None:
            block = self._blocks[start] = {
                a: np.zeros((stop - start, *arr.shape[1:]), dtype=arr.dtype)
                for a, arr in self._arrays.items()}
            self._present[start] = set()
        for alias, values in arrays.items():
            block[alias][row - start] = values  # the copy: the caller may reuse its buffer
        self._present[start].add(row)
        rows = range(max(start, self._part.start), stop)
        if len(self._present[start]) == len(rows):
            self._flush(start)

    def _flush(self, start: int) -> None:
        """Write the chunk at ``start`` (rows never written, i.e. skipped, stay zero)."""
        block, present = self._blocks.pop(start), self._present.pop(start)
        for alias, arr in self._arrays.items():
            rows = block[alias]
            for r in sorted(present):
                self._sums.add(alias, r, rows[r - start])  # the row as stored
            arr[start:start + len(rows)] = rows
            self._bytes += rows.nbytes
            if self._local_dir is not None:
                coords = (start // arr.chunks[0],) + (0,) * (arr.ndim - 1)
                self._written.append(os.path.join(self._local_dir, alias,
                                                  arr.metadata.encode_chunk_key(coords)))

    def close(self) -> int:
        """Write the chunks left and make them durable (files, then their folders)."""
        for start in sorted(self._blocks):
            self._flush(start)
        if self._local_dir is not None:
            fsync_files(self._written, self._local_dir)
            self._written = []
        return self._bytes

    def extra_summary(self) -> dict[str, Any]:
        """The checksum of every row written (see :mod:`guideloom.formats.checksums`)."""
        return self._sums.summary()


_UNREADABLE_METADATA = (ValueError, TypeError)  # JSONDecodeError is a ValueError


def open_group_checked(root: str) -> Any:
    """The zarr group at ``root``, or :class:`CorruptExportError` naming its ``zarr.json``."""
    import zarr

    try:
        # each array's own metadata, not the consolidated copy (that one is for xarray)
        return zarr.open_group(zarr_store(root, strict=True), mode="r", use_consolidated=False)
    except FileNotFoundError:
        fail(root, "zarr.json", "missing")
    except _UNREADABLE_METADATA as exc:
        fail(root, "zarr.json", f"unreadable zarr metadata ({type(exc).__name__}: {exc})")


def array_checked(root: str, group: Any, name: str) -> Any:
    """``group[name]``, or :class:`CorruptExportError` naming ``name`` (missing) or
    ``name/zarr.json`` (unreadable)."""
    try:
        return group[name]
    except KeyError:
        fail(root, name, "missing")
    except _UNREADABLE_METADATA as exc:
        fail(root, f"{name}/zarr.json", f"unreadable zarr metadata ({type(exc).__name__}: {exc})")


class ZarrReader(FormatReader):
    """Rows read from the group's arrays, opened once (their metadata read at open)."""

    reads_lazily = True

    def __init__(self, root: str, manifest: Mapping[str, Any]):
        super().__init__(root, manifest)

        self._group = open_group_checked(root)
        self._arrays: dict[str, Any] = {}

    def _array(self, name: str) -> Any:
        arr = self._arrays.get(name)
        if arr is None:
            arr = self._arrays[name] = array_checked(self.root, self._group, name)
        return arr

    def sim_ids(self) -> np.ndarray:
        ids: np.ndarray = self._array(SIM_IDS_ARRAY)[...]
        return ids

    def row(self, i: int, fields: Sequence[str]) -> dict[str, np.ndarray]:
        return {f: np.asarray(self._array(f)[i]) for f in fields}

    def batch(self, idx: np.ndarray, fields: Sequence[str]) -> dict[str, np.ndarray]:
        return {f: take_rows(self._array(f), idx) for f in fields}


def take_rows(arr: Any, idx: np.ndarray) -> np.ndarray:
    """Rows ``idx`` of zarr array ``arr``, read through zarr's fast path, slices: one slice
    for a run of consecutive rows, else one slice per chunk touched (spanning the rows wanted
    there), so each chunk is decoded once; rows are reordered only when ``idx`` is not sorted
    and distinct. (zarr's orthogonal selection of integer rows is far slower on large rows.)"""
    n = len(idx)
    if n == 0:
        return np.empty((0, *arr.shape[1:]), dtype=arr.dtype)
    first, last = int(idx[0]), int(idx[-1])
    if last - first + 1 == n and (n == 1 or bool(np.all(np.diff(idx) == 1))):
        run: np.ndarray = arr[first:last + 1]
        return run
    if not bool(np.all(np.diff(idx) > 0)):
        unique, inverse = np.unique(idx, return_inverse=True)
        return take_rows(arr, unique)[inverse]
    out = np.empty((n, *arr.shape[1:]), dtype=arr.dtype)
    chunk = idx // max(1, arr.chunks[0])
    starts = [0, *(np.flatnonzero(np.diff(chunk)) + 1).tolist(), n]
    for a, b in zip(starts[:-1], starts[1:], strict=False):
        lo, hi = int(idx[a]), int(idx[b - 1])
        block = arr[lo:hi + 1]
        out[a:b] = block if hi - lo + 1 == b - a else block[idx[a:b] - lo]
    return out
