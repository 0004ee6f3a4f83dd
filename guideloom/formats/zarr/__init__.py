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

Modules, one job each:

- ``format``: the format plugin (``ZarrFormat``) and its options.
- ``compression``: the chunks' codecs.
- ``chunking``: rows per chunk, dimension names, chunk keys.
- ``store``: zarr stores for paths and fsspec URLs, array access.
- ``sink``: the partition writer (``ZarrSink``).
- ``placement``: where a partition's rows go, waiting for the partitions before it.
- ``final_rows``: rows written straight into the final arrays.
- ``pieces``: the raw rows of shared chunks.
- ``finalize``: finalize: moving or assembling the chunks (``place_rows``).
- ``carry``: an update's unchanged rows, whole chunks carried as files (``ChunkCarrier``).
- ``tally``: finalize's progress and ``export.json`` counts (``ChunkTally``).
- ``reader``: reading a published export (``ZarrReader``).
- ``checks``: open-time and verify checks.
"""

from __future__ import annotations

from guideloom.formats.zarr.checks import (
    ALL_CHUNKS_KEY,
    ZARR_GROUP_FILE,
    array_checked,
    check_chunk_files,
    expected_chunk_keys,
    open_group_checked,
)
from guideloom.formats.zarr.chunking import (
    ONE_ROW_CHUNK_BYTES,
    SMALL_CHUNK_BYTES,
    WRITE_EVERY_CHUNK,
    ZARR_CHUNK_BYTES,
    dimension_names,
    rows_per_chunk,
)
from guideloom.formats.zarr.compression import (
    BLOSC_LEVEL,
    DEFAULT_COMPRESSOR,
    GZIP_LEVEL,
    ZARR_COMPRESSORS,
    zarr_compressor,
)
from guideloom.formats.zarr.finalize import (
    CHECKED_KEY,
    COMPACT_GROUP_BYTES,
    COMPACT_THREADS,
    place_rows,
)
from guideloom.formats.zarr.format import ZarrFormat, ZarrOptions
from guideloom.formats.zarr.pieces import PIECES_DIR, load_piece, save_piece
from guideloom.formats.zarr.placement import MAX_WALK, PLACED_KEY, final_start
from guideloom.formats.zarr.reader import ZarrReader, take_rows
from guideloom.formats.zarr.sink import HOLD_BYTES, MAX_WAIT_S, MIN_WAIT_S, ZarrSink
from guideloom.formats.zarr.store import is_chunk_key, member_array, zarr_store
from guideloom.formats.zarr.tally import FINALIZE_KEY, ChunkTally

# the public names of guideloom.formats.zarr when it was one module
__all__ = [
    "ALL_CHUNKS_KEY",
    "BLOSC_LEVEL",
    "CHECKED_KEY",
    "COMPACT_GROUP_BYTES",
    "COMPACT_THREADS",
    "DEFAULT_COMPRESSOR",
    "FINALIZE_KEY",
    "GZIP_LEVEL",
    "HOLD_BYTES",
    "MAX_WAIT_S",
    "MAX_WALK",
    "MIN_WAIT_S",
    "ONE_ROW_CHUNK_BYTES",
    "PIECES_DIR",
    "PLACED_KEY",
    "SMALL_CHUNK_BYTES",
    "WRITE_EVERY_CHUNK",
    "ZARR_CHUNK_BYTES",
    "ZARR_COMPRESSORS",
    "ZARR_GROUP_FILE",
    "ChunkTally",
    "ZarrFormat",
    "ZarrOptions",
    "ZarrReader",
    "ZarrSink",
    "array_checked",
    "check_chunk_files",
    "dimension_names",
    "expected_chunk_keys",
    "final_start",
    "is_chunk_key",
    "load_piece",
    "member_array",
    "open_group_checked",
    "place_rows",
    "rows_per_chunk",
    "save_piece",
    "take_rows",
    "zarr_compressor",
    "zarr_store",
]
