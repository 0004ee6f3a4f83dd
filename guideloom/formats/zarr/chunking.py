"""The arrays' layout: rows per chunk, dimension names, chunk keys, every chunk written."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from guideloom.formats.layout import SIM_IDS_ARRAY

if TYPE_CHECKING:  # zarr is imported where it is used (import guideloom stays cheap)
    from zarr.core.array_spec import ArrayConfigParams


ZARR_CHUNK_BYTES = 16 << 20  # upper bound of one zarr chunk
ONE_ROW_CHUNK_BYTES = 512 << 10  # rows this large get a chunk each (compaction renames them)
SMALL_CHUNK_BYTES = 1 << 20  # chunks of a quarter partition are at least this large

# every chunk is written, even one of fill values: a missing chunk file is then damage
WRITE_EVERY_CHUNK: ArrayConfigParams = {"write_empty_chunks": True}


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


def chunk_key(arr: Any, j: int) -> str:
    key: str = arr.metadata.encode_chunk_key((j,) + (0,) * (arr.ndim - 1))
    return key
