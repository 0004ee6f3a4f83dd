"""``zarr``: a zarr v3 group with one array per alias, chunked along records, plus ``sim_ids``.

Chunk boundaries lie on partition boundaries, so no two tasks write one chunk; a task buffers a
chunk's rows and writes it whole. The store is a local path or any fsspec URL the workers reach.

Skipped experiments leave no gap. Arrays of one row per chunk are written at the planned rows
and their chunks renamed into place at finalize. Arrays of several rows per chunk are written
where the rows belong whenever the partition can tell: once the partitions before it are
finished, their markers say where its first row goes (:class:`ZarrSink`), and its chunks go
straight into the final array. Only what no partition could place (partitions that finished
before an earlier one, and the partly filled chunks at their ends) is assembled at finalize
(:func:`place_rows`).
"""

from __future__ import annotations

import contextlib
import math
import os
import posixpath
import re
import shutil
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
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
    Stage,
    fail,
)
from guideloom.formats.checksums import RowDigests, digest
from guideloom.formats.durable import fsync_files, fsync_tree
from guideloom.formats.layout import SIM_IDS_ARRAY, check_output_name
from guideloom.formats.options import option

if TYPE_CHECKING:  # zarr is imported where it is used (import guideloom stays cheap)
    from zarr import Array, Group
    from zarr.abc.store import ByteRequest, Store
    from zarr.codecs import BloscCodec, GzipCodec
    from zarr.core.array_spec import ArrayConfigParams
    from zarr.core.buffer import Buffer, BufferPrototype

ZARR_CHUNK_BYTES = 16 << 20  # upper bound of one zarr chunk
ONE_ROW_CHUNK_BYTES = 512 << 10  # rows this large get a chunk each (compaction renames them)
SMALL_CHUNK_BYTES = 1 << 20  # chunks of a quarter partition are at least this large
COMPACT_GROUP_BYTES = 64 << 20  # source rows one compaction thread holds decoded at once
PIECES_DIR = "pieces"  # staging: raw rows of the partly filled chunks at placed partitions' ends
PLACED_KEY = "zarr_placed"  # a partition's summary: where its rows went (see ZarrSink)
CHECKED_KEY = "zarr_placement_checked"  # job.json: unclaimed chunk files were removed
FINALIZE_KEY = "zarr_finalize"  # export.json: how finalize completed the chunks (ChunkTally)
HOLD_BYTES = 256 << 20  # rows a sink holds until it knows where they go (more: planned rows)
MAX_WALK = 64  # earlier markers a sink reads to learn where its first row goes
MIN_WAIT_S, MAX_WAIT_S = 10.0, 60.0  # how long a sink waits for the partitions before it
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


def member_array(group: Group, name: str, root: str) -> Array[Any]:
    """``group[name]`` (the group at ``root``), which must be an array: a subgroup there is a
    :class:`CorruptExportError` naming its ``name/zarr.json``."""
    return _as_array(group[name], root, name)


def _as_array(node: Array[Any] | Group, root: str, name: str) -> Array[Any]:
    import zarr

    if not isinstance(node, zarr.Array):
        fail(root, f"{name}/zarr.json", "the metadata of a zarr group where an array belongs")
    return node


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
    for rows of :data:`ONE_ROW_CHUNK_BYTES` or more; a quarter of the partition or less when
    such a chunk still holds :data:`SMALL_CHUNK_BYTES`.

    Chunks then never straddle two partitions, so no two tasks write one chunk; and a chunk of
    one row moves into place by a rename when skipped rows are left out (no rewrite). After a
    skip, a partition's first and last chunks are shared with its neighbours (their rows go
    through a piece, see :class:`ZarrSink`): chunks of a quarter partition keep that small.
    """
    if row_bytes >= ONE_ROW_CHUNK_BYTES:
        return 1
    fits = [d for d in range(1, partition_size + 1)
            if partition_size % d == 0 and d * max(row_bytes, 1) <= ZARR_CHUNK_BYTES]
    quarter = [d for d in fits if 4 * d <= partition_size and d * row_bytes >= SMALL_CHUNK_BYTES]
    return max(quarter or fits or [1])


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
    #: Called as ``(chunks done, chunks in all)`` while :meth:`finalize` completes the arrays
    #: (the run's monitor sets it: the finalize phase's progress on the page and terminal).
    finalize_progress: Callable[[int, int], None] | None = None
    tally: ChunkTally | None = None

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
        data = zarr.open_group(zarr_store(self.stage.url_of("data")), mode="a",
                               use_consolidated=False)
        for alias, fs in schema.items():
            check_output_name(alias, "zarr export")
            if alias in group:
                continue  # resumed job
            row_bytes = int(np.prod(fs.shape, dtype=np.int64)) * np.dtype(fs.dtype).itemsize
            rpc = rows_per_chunk(partition_size, row_bytes)
            for where in (group, *((data,) if rpc > 1 else ())):  # data: rows placed there
                if alias in where:
                    continue
                where.create_array(
                    alias, shape=(n_rows, *fs.shape), chunks=(rpc, *fs.shape),
                    dtype=np.dtype(fs.dtype), compressors=compressor, fill_value=0,
                    config=WRITE_EVERY_CHUNK,
                    dimension_names=dimension_names(alias, 1 + len(fs.shape)),
                )
        if self.stage.is_local:  # the metadata outlives a power loss before the first marker
            fsync_tree(self.stage.path("rows"))
            fsync_tree(self.stage.path("data"))

    def sink(self, part: Part, schema: Mapping[str, Schema] | None) -> PartitionSink:
        assert schema is not None
        return ZarrSink(self.stage, part, schema)

    def finalize(self, keep: np.ndarray | None) -> None:
        """Complete each alias's array in ``data/``: rows the partitions placed stay, the
        others are moved or assembled chunk by chunk (see :func:`place_rows`), resuming where
        an interrupted run stopped. Without skips or placed rows the planned array is renamed.
        """
        import zarr

        rows = zarr.open_group(zarr_store(self._rows_url()), mode="a", use_consolidated=False)
        data = zarr.open_group(zarr_store(self.stage.url_of("data")), mode="a",
                               use_consolidated=False)
        markers = _stage_markers(self.stage)
        aliases = sorted(rows.array_keys())
        planned = {a: member_array(rows, a, self._rows_url()) for a in aliases}
        n_kept = (int(keep.sum()) if keep is not None
                  else planned[aliases[0]].shape[0] if aliases else 0)
        tally = self.tally = ChunkTally(
            sum(math.ceil(n_kept / planned[a].chunks[0]) for a in aliases),
            self.finalize_progress)
        _check_placements(self.stage, markers)
        placed = {a: {i: m[PLACED_KEY] for i, m in markers.items()
                      if a in m.get(PLACED_KEY, {}).get("chunks", {})} for a in aliases}
        job = _read_job(self.stage)
        if not job.get(CHECKED_KEY):  # once: chunk files no marker claims are from killed tasks
            for alias in aliases:
                if alias in data:
                    _remove_unclaimed(self.stage, alias, data, placed[alias])
            _update_job(self.stage, **{CHECKED_KEY: True})
        for alias in aliases:
            if not placed[alias] and (keep is None or keep.all()):
                if alias in data:  # unused (nothing placed), or an older run's leftover
                    del data[alias]
                n_chunks = math.ceil(n_kept / planned[alias].chunks[0])
                self.stage.move(self.stage.path("rows", alias), self.stage.path("data", alias))
                tally.add("moved", n_chunks)
                continue
            kept = np.arange(planned[alias].shape[0]) if keep is None else np.flatnonzero(keep)
            place_rows(self.stage, alias, planned[alias], data, kept, markers, placed[alias],
                       tally)
            del rows[alias]  # complete in data/: the planned rows are no longer needed

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
        extra: dict[str, Any] = {ALL_CHUNKS_KEY: True}
        if self.tally is not None:  # how finalize found and completed the chunks
            extra[FINALIZE_KEY] = dict(self.tally.counts)
        return extra

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
        arr = member_array(zarr.open_group(zarr_store(root, strict=True), mode="r",
                                           use_consolidated=False), group, root)
        step = max(1, arr.chunks[0])
        for start in range(0, arr.shape[0], step):
            try:
                block = np.asarray(arr[start:start + step])
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


def _check_placements(stage: Any, markers: Mapping[int, Mapping[str, Any]]) -> None:
    """Refuse to finalize when a partition placed its rows somewhere other than where the
    finished partitions before it end (a partition run again that read a different number of
    experiments than the run the later partitions counted on): publishing would leave rows
    overwritten or zero."""
    end = 0
    for index in sorted(markers):
        marker = markers[index]
        n = len(marker.get("written", ()))
        placed = marker.get(PLACED_KEY)
        if placed is not None and (int(placed["start"]), int(placed["stop"])) != (end, end + n):
            raise CorruptExportError(
                f"{stage.url_of('data')}: partition {index} placed its {n} rows at "
                f"{placed['start']}..{placed['stop']}, but the partitions before it end at row "
                f"{end} (a partition run again read a different number of experiments); "
                "remove the staging directory and export again")
        end += n


def _stage_markers(stage: Any) -> dict[int, dict[str, Any]]:
    """The finished partitions' summaries (a staging area without markers: none)."""
    markers = getattr(stage, "markers", None)
    return dict(markers()) if markers is not None else {}


def _read_job(stage: Any) -> dict[str, Any]:
    read = getattr(stage, "read_job", None)
    return dict((read() if read is not None else None) or {})


def _update_job(stage: Any, **changes: Any) -> None:
    update = getattr(stage, "update_job", None)
    if update is not None:
        update(**changes)


class ChunkTally:
    """How the final arrays' chunks were completed at finalize (``placed``: by the
    partitions; ``done_before``: by an interrupted finalize; ``moved``: renamed from the
    planned rows; ``assembled``: written from planned rows and pieces), reported as they go."""

    def __init__(self, total: int, report: Callable[[int, int], None] | None = None):
        import threading

        self.counts = {"chunks": total, "placed": 0, "done_before": 0, "moved": 0,
                       "assembled": 0}
        self.done = 0
        self._report = report
        self._lock = threading.Lock()
        if report is not None:
            report(0, total)

    def add(self, kind: str, n: int = 1) -> None:
        with self._lock:
            self.counts[kind] += n
            self.done += n
            if self._report is not None:
                self._report(self.done, self.counts["chunks"])


def _chunk_key(arr: Any, j: int) -> str:
    key: str = arr.metadata.encode_chunk_key((j,) + (0,) * (arr.ndim - 1))
    return key


def _piece_url(stage: Stage, alias: str, lo: int, hi: int) -> str:
    return stage.url_of(PIECES_DIR, alias, f"{lo}-{hi}.npy")


def save_piece(stage: Any, alias: str, lo: int, rows: np.ndarray) -> tuple[str, list[int]]:
    """Store final rows ``lo…lo+len(rows)-1`` of ``alias`` raw (a chunk they only partly fill,
    finished by the next partition or at finalize); return the file and ``[lo, hi]``."""
    import io

    hi = lo + len(rows)
    url = _piece_url(stage, alias, lo, hi)
    fs, path = _fs_of(url)
    fs.makedirs(posixpath.dirname(path), exist_ok=True)
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(rows), allow_pickle=False)
    tmp = f"{path}.partial"
    fs.pipe_file(tmp, buf.getvalue())
    stage.move(tmp, path)
    return path, [lo, hi]


def load_piece(stage: Any, alias: str, lo: int, hi: int) -> np.ndarray:
    import io

    fs, path = _fs_of(_piece_url(stage, alias, lo, hi))
    piece: np.ndarray = np.load(io.BytesIO(fs.cat_file(path)), allow_pickle=False)
    return piece


def final_start(stage: Any, index: int) -> tuple[int | None, Mapping[str, Any] | None, int]:
    """Where partition ``index``'s first written row goes in the published arrays, the
    placement of the partition before it, and the partition the answer waits for (``None``
    as the first: an earlier partition has not said yet).

    The markers say it, or the notes partitions write as soon as they know (see
    :meth:`ZarrSink.close`): a placed partition records where its rows end; for the others
    their written rows are counted back to one that was placed (at most :data:`MAX_WALK`).
    """
    if index == 0:
        return 0, None, -1
    count, previous = 0, None
    for q in range(index - 1, max(-1, index - 1 - MAX_WALK), -1):
        marker = stage.marker(q)
        if marker is not None:
            placed, written = marker.get(PLACED_KEY), len(marker["written"])
        else:  # unfinished, but it may have said where its rows end
            note = stage.note(q) if hasattr(stage, "note") else None
            if note is None:
                return None, None, q
            placed = note if "stop" in note else None
            written = int(note.get("written", 0))
        if q == index - 1:
            previous = placed
        if placed is not None:
            return count + int(placed["stop"]), previous, -1
        count += written
        if q == 0:
            return count, previous, -1
    return None, None, -1


def _event_name(stage: Any, index: int) -> str:
    """The ``distributed.Event`` set when partition ``index`` of this staging area has noted."""
    import hashlib

    digest = hashlib.sha256(str(stage.url_of()).encode()).hexdigest()[:16]
    return f"guideloom-zarr-note-{digest}-{index}"


def _in_worker() -> bool:
    try:
        from distributed import get_worker

        get_worker()
    except (ImportError, ValueError):
        return False
    return True


def _wake(stage: Any, index: int) -> None:
    """Wake the partitions waiting for partition ``index``'s note (on a Dask worker)."""
    if _in_worker():
        from distributed import Event

        with contextlib.suppress(Exception):  # a lost wake-up costs a wait, not the export
            Event(_event_name(stage, index)).set()


def _wait_for(stage: Any, index: int, seconds: float) -> bool:
    """Wait (out of the worker's thread pool) up to ``seconds`` for partition ``index``'s
    note; False when not on a Dask worker or it did not come."""
    if not _in_worker() or seconds <= 0:
        return False
    from distributed import Event, rejoin, secede

    secede()  # the worker runs other tasks meanwhile (the one waited for, perhaps)
    try:
        return bool(Event(_event_name(stage, index)).wait(seconds))
    except Exception:  # noqa: BLE001 - no answer: the rows go to their planned places
        return False
    finally:
        rejoin()


class _FinalRows:
    """One alias's rows written where they belong, from final row ``start`` on: whole chunks
    into the final array, a chunk the partition only partly fills as a piece (raw rows)."""

    def __init__(self, stage: Any, alias: str, arr: Any, start: int,
                 carry: np.ndarray | None):
        self.stage, self.alias, self.arr = stage, alias, arr
        self.rpc = arr.chunks[0]
        self.start = start
        self.chunk_start = start - start % self.rpc
        # rows held for the chunk being filled, from final row self.first on
        self.first = self.chunk_start if carry is not None else start
        self.held: list[np.ndarray] = [] if carry is None else list(carry)
        self.chunks: list[int] = []
        self.pieces: list[list[int]] = []
        self.files: list[str] = []  # local files written (fsynced at close)
        self.bytes = 0
        self.added = 0  # rows of this partition

    def add(self, row: np.ndarray) -> None:
        self.held.append(row)
        self.added += 1
        if self.first + len(self.held) == self.chunk_start + self.rpc:
            self._flush()

    def _flush(self) -> None:
        block = np.stack(self.held)
        if self.first == self.chunk_start:  # the whole chunk is here
            j = self.chunk_start // self.rpc
            self.arr[self.chunk_start:self.chunk_start + len(block)] = block
            self.chunks.append(j)
            self.files.append(_chunk_key(self.arr, j))
            self.bytes += block.nbytes
        else:  # its first rows are an earlier partition's, not placed: finalize joins them
            path, span = save_piece(self.stage, self.alias, self.first, block)
            self.pieces.append(span)
            self.files.append(path)
        self.chunk_start += self.rpc
        self.first = self.chunk_start
        self.held = []

    def save_tail(self, rows: Sequence[np.ndarray]) -> list[int] | None:
        """Before ``rows`` (all of them) are added: store the chunk they end in partly filled,
        so the next partition can complete it while these rows are still being written."""
        end = self.start + len(rows)
        if end % self.rpc == 0:
            return None
        lo = max(self.first, end - end % self.rpc)
        if lo >= end:
            return None
        block = np.stack([*self.held, *rows][lo - self.first:])
        path, span = save_piece(self.stage, self.alias, lo, block)
        self.pieces.append(span)
        self.files.append(path)
        self.tail = span
        return span

    def close(self, last: bool = False) -> None:
        """Store the rows left; ``last``: no partition comes after this one, so a chunk this
        partition holds from its first row is the array's last, written as it is."""
        if self.held and last and self.first == self.chunk_start:
            j = self.chunk_start // self.rpc
            block = np.stack(self.held)
            self.arr[self.chunk_start:self.chunk_start + len(block)] = block  # zero-padded
            self.chunks.append(j)
            self.files.append(_chunk_key(self.arr, j))
            self.bytes += block.nbytes
            self.held = []
        if self.held:  # the last chunk: the next partition, or finalize, completes it
            span = [self.first, self.first + len(self.held)]
            if getattr(self, "tail", None) != span:
                path, span = save_piece(self.stage, self.alias, self.first,
                                        np.stack(self.held))
                self.pieces.append(span)
                self.files.append(path)
            self.held = []


class ZarrSink(PartitionSink):
    """Copies each record into its chunk's buffer, then writes a chunk whole once all its rows
    are there. The copy is taken in :meth:`write`, so a transform may return (and reuse) one
    buffer for every record.

    Arrays of several rows per chunk are written where the rows belong when the partitions
    before this one are finished (:func:`final_start`): then straight away, else the rows are
    held (up to :data:`HOLD_BYTES`) and the question asked again at :meth:`close`. Only when it
    is still open there are they written at their planned rows, for finalize to move.
    """

    def __init__(self, stage: Any, part: Part, schema: Mapping[str, Schema]):
        import zarr

        group = zarr.open_group(zarr_store(stage.url_of("rows")), mode="r+")
        rows_url = stage.url_of("rows")
        self._arrays = {a: member_array(group, a, rows_url).with_config(WRITE_EVERY_CHUNK)
                        for a in schema}
        self._stage = stage
        self._part = part
        self._local_dir = stage.path() if stage.is_local else None  # files there are fsynced
        self._written: list[str] = []
        # (chunk start, aliases) -> alias -> rows, and the rows written into that block
        self._blocks: dict[tuple[int, tuple[str, ...]], dict[str, np.ndarray]] = {}
        self._present: dict[tuple[int, tuple[str, ...]], set[int]] = {}
        self._bytes = 0
        self._sums = RowDigests()
        self._final_arrays: dict[str, Any] = {}
        if any(arr.chunks[0] > 1 for arr in self._arrays.values()):
            data = zarr.open_group(zarr_store(stage.url_of("data")), mode="r+",
                                   use_consolidated=False)
            data_url = stage.url_of("data")
            self._final_arrays = {a: member_array(data, a, data_url).with_config(WRITE_EVERY_CHUNK)
                                  for a, arr in self._arrays.items()
                                  if arr.chunks[0] > 1 and a in data}
        self._planned = [a for a in self._arrays if a not in self._final_arrays]
        self._held: list[tuple[int, dict[str, np.ndarray]]] | None = None
        self._held_bytes = 0
        self._n_rows = 0  # records written
        self._opened = time.monotonic()
        self._placing: dict[str, _FinalRows] | None = None
        self._start: int | None = None
        if self._final_arrays and not self._place():
            self._held = []

    def _place(self, wait: bool = False) -> bool:
        """Start writing rows where they belong, if this partition can know where; ``wait``:
        for the partitions before it to say, up to four times as long as this one took to
        read (within :data:`MIN_WAIT_S` and :data:`MAX_WAIT_S`)."""
        start, previous, waiting_on = final_start(self._stage, self._part.index)
        took = time.monotonic() - self._opened
        deadline = time.monotonic() + min(MAX_WAIT_S, max(MIN_WAIT_S, 4 * took))
        while start is None and wait and waiting_on >= 0:
            if not _wait_for(self._stage, waiting_on, deadline - time.monotonic()):
                return False
            before = waiting_on
            start, previous, waiting_on = final_start(self._stage, self._part.index)
            if start is None and waiting_on == before:
                return False  # woken by an earlier run's note: nothing new
        if start is None:
            return False
        self._start = start
        self._placing = {}
        for alias, arr in self._final_arrays.items():
            carry = None
            span = [start - start % arr.chunks[0], start]
            if span[0] < span[1] and previous is not None and span in (
                    previous.get("pieces", {}).get(alias) or []):
                carry = load_piece(self._stage, alias, *span)
            self._placing[alias] = _FinalRows(self._stage, alias, arr, start, carry)
        return True

    def _chunk(self, row: int, rpc: int) -> tuple[int, int]:
        """``(start, stop)`` of the planned chunk of ``rpc`` rows holding ``row``."""
        start = (row // rpc) * rpc
        return start, min(start + rpc, self._part.stop)

    def write(self, row: int, sim_id: Any, arrays: Mapping[str, np.ndarray]) -> None:
        self._n_rows += 1
        if self._planned:
            self._write_planned(row, {a: arrays[a] for a in self._planned if a in arrays},
                                self._planned)
        if not self._final_arrays:
            return
        rows = {}
        for alias in self._final_arrays:  # the copy: the caller may reuse its buffer
            rows[alias] = np.array(arrays[alias], dtype=self._arrays[alias].dtype, copy=True)
            self._sums.add(alias, row, rows[alias])
        if self._placing is not None:
            for alias, value in rows.items():
                self._placing[alias].add(value)
            return
        if self._held is not None:
            self._held.append((row, rows))
            self._held_bytes += sum(v.nbytes for v in rows.values())
            if self._held_bytes <= HOLD_BYTES:
                return
            held, self._held = self._held, None  # too much to hold: the planned rows
            for r, values in held:
                self._write_planned(r, values, list(self._final_arrays), digest=False)
            return
        self._write_planned(row, rows, list(self._final_arrays), digest=False)

    def _write_planned(self, row: int, arrays: Mapping[str, np.ndarray],
                       aliases: Sequence[str], digest: bool = True) -> None:
        rpc = self._arrays[aliases[0]].chunks[0]
        start, stop = self._chunk(row, rpc)
        key = (start, tuple(aliases))
        block = self._blocks.get(key)
        if block is None:
            block = self._blocks[key] = {
                a: np.zeros((stop - start, *self._arrays[a].shape[1:]),
                            dtype=self._arrays[a].dtype) for a in aliases}
            self._present[key] = set()
        for alias in aliases:
            block[alias][row - start] = arrays[alias]  # the copy: the caller may reuse it
        self._present[key].add(row)
        if len(self._present[key]) == stop - max(start, self._part.start):
            self._flush(key, digest)

    def _flush(self, key: tuple[int, tuple[str, ...]], digest: bool = True) -> None:
        """Write the planned chunk ``key`` (rows never written, i.e. skipped, stay zero)."""
        start, aliases = key
        block, present = self._blocks.pop(key), self._present.pop(key)
        for alias in aliases:
            arr, rows = self._arrays[alias], block[alias]
            if digest:
                for r in sorted(present):
                    self._sums.add(alias, r, rows[r - start])  # the row as stored
            arr[start:start + len(rows)] = rows
            self._bytes += rows.nbytes
            chunk = _chunk_key(arr, start // arr.chunks[0])
            self._written.append(os.path.join("rows", alias, chunk))

    def close(self) -> int:
        """Write the chunks left and make them durable (files, then their folders)."""
        if self._held is not None:  # still undecided: the earlier partitions may be done now
            held, self._held = self._held, None
            placed = self._place(wait=True)
            if placed and self._placing:  # the next partition may go on from here at once
                tails = {a: w.save_tail([v[a] for _, v in held])
                         for a, w in self._placing.items()}
                self._note(len(held), tails)
            for r, values in held:
                if placed:
                    for alias, value in values.items():
                        self._placing[alias].add(value)  # type: ignore[index]
                else:
                    self._write_planned(r, values, list(self._final_arrays), digest=False)
        for key in sorted(self._blocks):
            self._flush(key, digest=key[1] == tuple(self._planned))
        if self._final_arrays and self._placing is None:  # planned: the next ones count on
            self._note_planned()
        last = self._part.stop >= next(iter(self._arrays.values())).shape[0]
        if self._placing and not getattr(self, "_noted", False):
            for w in self._placing.values():
                w.close(last)  # the tail piece first: the note below offers it
            self._note(next(iter(self._placing.values())).added,
                       {a: getattr(w, "tail", None) or (w.pieces[-1] if w.pieces else None)
                        for a, w in self._placing.items()})
        for alias, rows in (self._placing or {}).items():
            rows.close(last)
            self._bytes += rows.bytes
            self._written += [f if f.startswith("/") or "://" in f
                              else os.path.join("data", alias, f) for f in rows.files]
        if self._local_dir is not None:
            fsync_files([p if os.path.isabs(p) else os.path.join(self._local_dir, p)
                         for p in self._written], self._local_dir)
            self._written = []
        return self._bytes

    def _note(self, n: int, tails: Mapping[str, list[int] | None]) -> None:
        """Tell the next partitions where this one's rows end (and its last, partly filled
        chunk), before its chunks are written."""
        self._noted = True
        note = getattr(self._stage, "write_note", None)
        if note is not None and self._start is not None:
            note(self._part.index, {"start": self._start, "stop": self._start + n,
                                    "pieces": {a: [t] for a, t in tails.items() if t}})
            _wake(self._stage, self._part.index)

    def _note_planned(self) -> None:
        """Tell the next partitions how many rows this one (at its planned rows) wrote."""
        note = getattr(self._stage, "write_note", None)
        if note is not None and not getattr(self, "_noted", False):
            self._noted = True
            note(self._part.index, {"written": self._n_rows})
            _wake(self._stage, self._part.index)

    def extra_summary(self) -> dict[str, Any]:
        """The checksum of every row written (see :mod:`guideloom.formats.checksums`) and,
        for rows written where they belong, where (``zarr_placed``: final rows, chunks and
        pieces per alias)."""
        extra = self._sums.summary()
        if self._placing is not None and self._start is not None:
            added = next(iter(self._placing.values())).added
            extra[PLACED_KEY] = {
                "start": self._start,
                "stop": self._start + added,
                "chunks": {a: r.chunks for a, r in self._placing.items()},
                "pieces": {a: r.pieces for a, r in self._placing.items()},
            }
        return extra



def _remove_unclaimed(stage: Any, alias: str, data: Any, placed: Mapping[int, Any]) -> None:
    """Remove the chunk files of ``data/alias`` that no finished partition claims (written by a
    task that was killed, or whose rows were then written elsewhere)."""
    try:
        arr = data[alias]
    except _UNREADABLE_METADATA:
        return  # place_rows writes its metadata again
    claimed = {_chunk_key(arr, int(j)) for p in placed.values()
               for j in p["chunks"].get(alias, [])}
    fs, root = _fs_of(stage.url_of("data", alias))
    for path in fs.find(root):
        rel = str(path)[len(root.rstrip("/")) + 1:]
        if rel != "zarr.json" and rel not in claimed:
            fs.rm(path)


def _final_array(stage: Any, data: Any, alias: str, src: Any, n: int) -> Any:
    """``data[alias]`` shaped for the ``n`` published rows (made, or resized: the chunks
    past the end go)."""
    dst = None
    if alias in data:
        try:
            dst = data[alias]
        except _UNREADABLE_METADATA:  # torn by a power loss: its chunks are still good
            fs, root = _fs_of(stage.url_of("data", alias))
            fs.rm(f"{root.rstrip('/')}/zarr.json")
    if dst is None:
        dst = data.create_array(alias, shape=(n, *src.shape[1:]), chunks=src.chunks,
                                dtype=src.dtype, compressors=src.compressors, fill_value=0,
                                config=WRITE_EVERY_CHUNK,
                                dimension_names=src.metadata.dimension_names)
    elif dst.shape[0] != n:
        dst.resize((n, *src.shape[1:]))
    return dst.with_config(WRITE_EVERY_CHUNK)


def place_rows(stage: Any, alias: str, src: Any, data: Any, kept: np.ndarray,
               markers: Mapping[int, Mapping[str, Any]],
               placed: Mapping[int, Mapping[str, Any]], tally: ChunkTally | None = None) -> None:
    """Complete ``data[alias]`` holding rows ``kept`` (planned rows) of the job, one chunk at a
    time.

    A chunk whose file exists is done: written where it belongs by a partition (``placed``,
    their markers claim it) or by an interrupted finalize (zarr writes a chunk file under a
    temporary name, then renames it), so a rerun does only the chunks left. Of the others, a
    chunk whose rows are exactly one whole chunk of the planned rows ``src`` (every chunk, for
    arrays of one row per chunk) is that chunk's file, renamed; the rest are assembled from the
    planned rows and the placed partitions' pieces by :data:`COMPACT_THREADS` threads, each
    reading the planned rows of a run of chunks once (:data:`COMPACT_GROUP_BYTES`).
    """
    n = len(kept)
    dst = _final_array(stage, data, alias, src, n)
    fs, src_root = _fs_of(stage.url_of("rows", alias))
    dst_root = _fs_of(stage.url_of("data", alias))[1]
    _remove_partial_chunks(fs, dst_root)
    present = {f[len(dst_root) + 1:] for f in fs.find(dst_root)}
    step, n_src = src.chunks[0], src.shape[0]
    in_pieces = np.zeros(n_src, dtype=bool)  # planned rows a partition placed
    for index in placed:
        m = markers[index]
        start = int(m["start"])
        in_pieces[start:start + len(m["written"]) + len(m["skipped"])] = True
    spans = sorted({tuple(int(v) for v in span) for p in placed.values()
                    for span in p.get("pieces", {}).get(alias, [])})
    tally = tally if tally is not None else ChunkTally(math.ceil(n / step))
    claimed = {_chunk_key(dst, int(j)) for p in placed.values() for j in p["chunks"][alias]}
    rewrite: list[tuple[int, np.ndarray]] = []
    for j, start in enumerate(range(0, n, step)):
        key = _chunk_key(dst, j)
        if key in present:  # placed by a partition, or done by an interrupted run
            tally.add("placed" if key in claimed else "done_before")
            continue
        sel = kept[start:start + step]
        first = int(sel[0])
        whole = (not in_pieces[sel].any() and first % step == 0
                 and int(sel[-1]) - first + 1 == len(sel)
                 and len(sel) == min(step, n_src - first)
                 and (len(sel) == step or start + len(sel) == n))
        if whole:
            old_key = _chunk_key(src, first // step)
            stage.move(f"{src_root}/{old_key}", _made_parent(fs, f"{dst_root}/{key}"))
            tally.add("moved")
            fault_point("compacted-chunk")
        else:
            rewrite.append((start, sel))
    if not rewrite:
        return
    from concurrent.futures import ThreadPoolExecutor

    loaded: dict[tuple[int, int], np.ndarray] = {}

    def piece_row(f: int) -> np.ndarray:
        """Final row ``f`` from a piece holding it."""
        for lo, hi in spans:
            if lo <= f < hi:
                if (lo, hi) not in loaded:
                    loaded[(lo, hi)] = load_piece(stage, alias, lo, hi)
                row: np.ndarray = loaded[(lo, hi)][f - lo]
                return row
        raise CorruptExportError(f"{stage.url_of('data', alias)}: row {f} was placed by a "
                                 "partition but no piece holds it; remove the staging "
                                 "directory and export again")

    row_bytes = max(1, int(np.prod(src.shape[1:], dtype=np.int64)) * src.dtype.itemsize)
    per_group = max(1, COMPACT_GROUP_BYTES // (row_bytes * step))
    groups = [rewrite[k:k + per_group] for k in range(0, len(rewrite), per_group)]

    def copy(group: list[tuple[int, np.ndarray]]) -> None:
        """One read of the planned rows the group's chunks need, then each chunk written."""
        wanted = np.concatenate([sel[~in_pieces[sel]] for _, sel in group])
        lo = int(wanted.min()) if len(wanted) else 0
        block = src[lo:int(wanted.max()) + 1] if len(wanted) else None
        for start, sel in group:
            out = np.empty((len(sel), *src.shape[1:]), dtype=src.dtype)
            mine = in_pieces[sel]
            if block is not None and not mine.all():
                out[~mine] = block[sel[~mine] - lo]
            for k in np.flatnonzero(mine):
                out[k] = piece_row(start + int(k))
            dst[start:start + len(sel)] = out
            tally.add("assembled")
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


_UNREADABLE_METADATA = (ValueError, TypeError)  # JSONDecodeError is a ValueError


def open_group_checked(root: str) -> Group:
    """The zarr group at ``root``, or :class:`CorruptExportError` naming its ``zarr.json``."""
    import zarr

    try:
        # each array's own metadata, not the consolidated copy (that one is for xarray)
        return zarr.open_group(zarr_store(root, strict=True), mode="r", use_consolidated=False)
    except FileNotFoundError:
        fail(root, "zarr.json", "missing")
    except _UNREADABLE_METADATA as exc:
        fail(root, "zarr.json", f"unreadable zarr metadata ({type(exc).__name__}: {exc})")


def array_checked(root: str, group: Group, name: str) -> Array[Any]:
    """``group[name]``, or :class:`CorruptExportError` naming ``name`` (missing) or
    ``name/zarr.json`` (unreadable, or a group's)."""
    try:
        node = group[name]
    except KeyError:
        fail(root, name, "missing")
    except _UNREADABLE_METADATA as exc:
        fail(root, f"{name}/zarr.json", f"unreadable zarr metadata ({type(exc).__name__}: {exc})")
    return _as_array(node, root, name)


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
