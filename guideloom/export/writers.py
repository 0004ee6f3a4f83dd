"""Output writers: allocate on the driver, write a partition on a worker, finalize on the driver.

Every write is idempotent (a task re-run by Dask after a worker died writes the same bytes to the
same place), and a task owns its rows: npy rows by offset, npz files by name, zarr chunks whole.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from guideloom.export.spec import FieldSchema, Partition
from guideloom.export.staging import Staging

COPY_BLOCK_BYTES = 64 << 20  # rows copied per step when compacting (bounded memory)
ZARR_CHUNK_BYTES = 16 << 20  # upper bound of one zarr chunk
WRITEBACK_BYTES = 4 << 20  # rows at least this large start their disk writeback at once


class Writer:
    """Base class: one output kind."""

    kind = ""
    needs_schema = True
    allow_text = False
    raw_records = False

    def __init__(self, staging: Staging, options: Mapping[str, Any]):
        self.staging = staging
        self.options = dict(options)

    def allocate(self, n_rows: int, schema: Mapping[str, FieldSchema], partition_size: int) -> None:
        """Create the row arrays (driver). Must not destroy rows of a resumed job."""

    def sink(self, part: Partition, schema: Mapping[str, FieldSchema] | None) -> PartitionSink:
        """Open the writer of one partition (worker)."""
        raise NotImplementedError

    def finalize(self, keep: np.ndarray | None) -> None:
        """Move the rows into ``data/``, leaving out rows where ``keep`` is False (driver)."""

    def fields(self, seen: dict[str, Any]) -> dict[str, Any]:
        """The fields a reader of this output sees (default: what the records held)."""
        return seen

    def manifest_extra(self) -> dict[str, Any]:
        """Writer-specific entries of ``export.json``."""
        return {}


class PartitionSink:
    """Writes one partition's records."""

    def write(self, row: int, sim_id: Any, arrays: Mapping[str, np.ndarray]) -> None:
        """Write one record at global ``row``."""
        raise NotImplementedError

    def close(self) -> int:
        """Make the data durable; return bytes written."""
        return 0

    def abort(self) -> None:
        """Release resources after a failure."""
        self.close()

    def extra_summary(self) -> dict[str, Any]:
        """Facts the finalize step needs beyond the written ids (e.g. record lengths)."""
        return {}


# --- .npy memmaps --------------------------------------------------------------------------


def _npy_data_offset(path: str) -> int:
    with open(path, "rb") as fh:
        major, _ = np.lib.format.read_magic(fh)
        if major == 1:
            np.lib.format.read_array_header_1_0(fh)
        else:
            np.lib.format.read_array_header_2_0(fh)
        return fh.tell()


class NpyWriter(Writer):
    """One ``.npy`` per alias of shape ``(n_rows, *field_shape)``, rows written with pwrite."""

    kind = "npy"

    def rows_path(self, alias: str) -> str:
        return self.staging.path("rows", f"{alias}.npy")

    def allocate(self, n_rows: int, schema: Mapping[str, FieldSchema], partition_size: int) -> None:
        for alias, fs in schema.items():
            path = self.rows_path(alias)
            if os.path.exists(path):
                continue  # resumed job: keep the rows already written
            tmp = f"{path}.alloc"
            arr = np.lib.format.open_memmap(tmp, mode="w+", dtype=np.dtype(fs.dtype),
                                            shape=(n_rows, *fs.shape))
            del arr  # header written; the data region is still a hole
            _reserve(tmp)
            os.replace(tmp, path)

    def sink(self, part: Partition, schema: Mapping[str, FieldSchema] | None) -> PartitionSink:
        assert schema is not None
        return _NpySink({a: self.rows_path(a) for a in schema}, schema)

    def finalize(self, keep: np.ndarray | None) -> None:
        for name in sorted(os.listdir(self.staging.path("rows"))):
            if not name.endswith(".npy"):
                continue
            src = self.staging.path("rows", name)
            dst = self.staging.path("data", name)
            if os.path.exists(dst) and not os.path.exists(src):
                continue  # finalized by an earlier, interrupted run
            if keep is None or keep.all():
                os.replace(src, dst)
            else:
                _compact_npy(src, dst, keep)
                os.unlink(src)


def _reserve(path: str) -> None:
    """Allocate the file's blocks now: a full disk fails here, not hours into the export, and
    workers then write into allocated blocks (several times faster than filling a hole)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.posix_fallocate(fd, 0, os.fstat(fd).st_size)
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            raise
    finally:
        os.close(fd)


class _NpySink(PartitionSink):
    def __init__(self, paths: Mapping[str, str], schema: Mapping[str, FieldSchema]):
        self._fds = {a: os.open(p, os.O_WRONLY) for a, p in paths.items()}
        self._offsets = {a: _npy_data_offset(p) for a, p in paths.items()}
        self._row_bytes = {
            a: int(np.prod(fs.shape, dtype=np.int64)) * np.dtype(fs.dtype).itemsize
            for a, fs in schema.items()
        }
        self._bytes = 0

    def write(self, row: int, sim_id: Any, arrays: Mapping[str, np.ndarray]) -> None:
        for alias, arr in arrays.items():
            buf = np.ascontiguousarray(arr).tobytes() if arr.ndim == 0 else \
                memoryview(np.ascontiguousarray(arr)).cast("B")
            offset = self._offsets[alias] + row * self._row_bytes[alias]
            written = 0
            while written < len(buf):
                written += os.pwrite(self._fds[alias], buf[written:], offset + written)
            self._bytes += written
            if written >= WRITEBACK_BYTES:
                # start writing this record to disk now, overlapped with reading the next one,
                # so the fsync at the end of the partition has little left to wait for
                os.posix_fadvise(self._fds[alias], offset, written, os.POSIX_FADV_DONTNEED)

    def close(self) -> int:
        for fd in self._fds.values():
            os.fsync(fd)
            os.close(fd)
        self._fds = {}
        return self._bytes


def _compact_npy(src: str, dst: str, keep: np.ndarray) -> None:
    rows = np.load(src, mmap_mode="r")
    tmp = f"{dst}.tmp"
    out = np.lib.format.open_memmap(tmp, mode="w+", dtype=rows.dtype,
                                    shape=(int(keep.sum()), *rows.shape[1:]))
    row_bytes = max(1, rows[0:1].nbytes)
    step = max(1, COPY_BLOCK_BYTES // row_bytes)
    kept = np.flatnonzero(keep)
    for start in range(0, len(kept), step):
        sel = kept[start:start + step]
        out[start:start + len(sel)] = rows[sel]
    out.flush()
    del out, rows
    os.replace(tmp, dst)


# --- one .npz per experiment ---------------------------------------------------------------


class NpzWriter(Writer):
    """One ``<id>.npz`` per experiment, written under a temporary name and renamed."""

    kind = "npz"
    needs_schema = False
    allow_text = True

    def sink(self, part: Partition, schema: Mapping[str, FieldSchema] | None) -> PartitionSink:
        return _NpzSink(self.staging.path("data"), bool(self.options.get("compressed", False)))


class _NpzSink(PartitionSink):
    def __init__(self, folder: str, compressed: bool):
        self._folder, self._compressed, self._bytes = folder, compressed, 0

    def write(self, row: int, sim_id: Any, arrays: Mapping[str, np.ndarray]) -> None:
        final = os.path.join(self._folder, f"{sim_id}.npz")
        tmp = os.path.join(self._folder, f".{sim_id}.npz.tmp-{os.getpid()}")
        save = np.savez_compressed if self._compressed else np.savez
        with open(tmp, "wb") as fh:
            save(fh, **arrays)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, final)
        self._bytes += os.path.getsize(final)

    def close(self) -> int:
        return self._bytes


# --- zarr v3 ---------------------------------------------------------------------------------


def zarr_compressor(name: str | None):
    """A zarr v3 codec for ``"lz4"`` (default), ``"zstd"``, ``"gzip"`` or ``None``."""
    from zarr.codecs import BloscCodec, GzipCodec

    if name is None or name == "none":
        return None
    if name in ("lz4", "zstd"):
        return BloscCodec(cname=name, clevel=5, shuffle="shuffle")
    if name == "gzip":
        return GzipCodec(level=4)
    raise ValueError(f"unknown zarr compressor {name!r}; use 'lz4', 'zstd', 'gzip' or None")


def zarr_store(url: str):
    """A zarr store for a local path or an fsspec URL."""
    import zarr.storage

    if "://" not in url:
        return zarr.storage.LocalStore(url)
    return zarr.storage.FsspecStore.from_url(url)


def rows_per_chunk(partition_size: int, row_bytes: int) -> int:
    """The largest divisor of ``partition_size`` whose chunk stays under the size bound.

    Chunks then never straddle two partitions, so no two tasks write one chunk.
    """
    best = 1
    for d in range(1, partition_size + 1):
        if partition_size % d == 0 and d * max(row_bytes, 1) <= ZARR_CHUNK_BYTES:
            best = d
    return best


class ZarrWriter(Writer):
    """A zarr v3 group with one array per alias, chunked along records, plus ``sim_ids``."""

    kind = "zarr"

    def _rows_url(self) -> str:
        return self.staging.url_of("rows")

    def allocate(self, n_rows: int, schema: Mapping[str, FieldSchema], partition_size: int) -> None:
        import zarr

        store = zarr_store(self._rows_url())
        group = zarr.open_group(store, mode="a")
        compressor = zarr_compressor(self.options.get("compressor", "lz4"))
        for alias, fs in schema.items():
            if alias in group:
                continue  # resumed job
            row_bytes = int(np.prod(fs.shape, dtype=np.int64)) * np.dtype(fs.dtype).itemsize
            rpc = rows_per_chunk(partition_size, row_bytes)
            group.create_array(
                alias, shape=(n_rows, *fs.shape), chunks=(rpc, *fs.shape),
                dtype=np.dtype(fs.dtype), compressors=compressor, fill_value=0,
            )

    def sink(self, part: Partition, schema: Mapping[str, FieldSchema] | None) -> PartitionSink:
        assert schema is not None
        return _ZarrSink(self._rows_url(), part, schema)

    def finalize(self, keep: np.ndarray | None) -> None:
        import zarr

        rows = zarr.open_group(zarr_store(self._rows_url()), mode="r")
        data = zarr.open_group(zarr_store(self.staging.url_of("data")), mode="a")
        for alias in sorted(rows.array_keys()):
            if alias in data:
                continue
            src = rows[alias]
            if keep is None or keep.all():
                self.staging._move(self.staging.path("rows", alias),
                                   self.staging.path("data", alias))
                continue
            kept = np.flatnonzero(keep)
            dst = data.create_array(alias, shape=(len(kept), *src.shape[1:]), chunks=src.chunks,
                                    dtype=src.dtype, compressors=src.compressors, fill_value=0)
            step = src.chunks[0]
            for start in range(0, len(kept), step):
                sel = kept[start:start + step]
                dst[start:start + len(sel)] = src.get_orthogonal_selection(sel)


class _ZarrSink(PartitionSink):
    """Buffers one chunk of rows, then writes it whole."""

    def __init__(self, url: str, part: Partition, schema: Mapping[str, FieldSchema]):
        import zarr

        group = zarr.open_group(zarr_store(url), mode="r+")
        self._arrays = {a: group[a] for a in schema}
        self._schema = schema
        self._part = part
        self._pending: dict[int, Mapping[str, np.ndarray]] = {}
        self._bytes = 0

    def write(self, row: int, sim_id: Any, arrays: Mapping[str, np.ndarray]) -> None:
        self._pending[row] = arrays
        self._flush_full_chunks()

    def _flush_full_chunks(self, final: bool = False) -> None:
        for alias, arr in self._arrays.items():
            rpc = arr.chunks[0]
            first = min(self._pending, default=None)
            while first is not None:
                chunk_start = (first // rpc) * rpc
                chunk_stop = min(chunk_start + rpc, self._part.stop)
                rows = range(max(chunk_start, self._part.start), chunk_stop)
                if not final and any(r not in self._pending for r in rows):
                    break
                block = np.zeros((chunk_stop - chunk_start, *arr.shape[1:]), dtype=arr.dtype)
                for r in rows:
                    if r in self._pending:
                        block[r - chunk_start] = self._pending[r][alias]
                arr[chunk_start:chunk_stop] = block
                self._bytes += block.nbytes
                if alias == list(self._arrays)[-1]:
                    for r in rows:
                        self._pending.pop(r, None)
                first = next((r for r in sorted(self._pending) if r >= chunk_stop), None)

    def close(self) -> int:
        self._flush_full_chunks(final=True)
        self._pending.clear()
        return self._bytes


def make_writer(kind: str, staging: Staging, options: Mapping[str, Any]) -> Writer:
    """The writer for an output kind."""
    writers: dict[str, type[Writer]] = {"npy": NpyWriter, "npz": NpzWriter, "zarr": ZarrWriter}
    if kind == "storage":
        from guideloom.export.storage_writer import StorageWriter

        writers["storage"] = StorageWriter
    if kind not in writers:
        raise ValueError(f"unknown output kind {kind!r}; use one of {', '.join(writers)}")
    if kind in ("npy", "npz") and not staging.is_local:
        raise ValueError(f"{kind} exports need a local (or shared) filesystem path, not "
                         f"{staging.url}; use export_to_zarr for fsspec URLs")
    return writers[kind](staging, options)
