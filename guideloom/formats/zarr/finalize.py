"""Finalize's completion of the arrays: placements checked, unclaimed chunk files removed,
the other chunks moved from the planned rows or assembled from them and the pieces."""

from __future__ import annotations

import math
import os
import posixpath
from collections.abc import Mapping
from typing import Any

import numpy as np

from guideloom.errors import CorruptExportError
from guideloom.formats.zarr.chunking import WRITE_EVERY_CHUNK, chunk_key
from guideloom.formats.zarr.pieces import load_piece
from guideloom.formats.zarr.placement import PLACED_KEY
from guideloom.formats.zarr.store import UNREADABLE_METADATA, fs_of
from guideloom.formats.zarr.tally import ChunkTally
from guideloom.runtime.faults import fault_point

COMPACT_GROUP_BYTES = 64 << 20  # source rows one compaction thread holds decoded at once
CHECKED_KEY = "zarr_placement_checked"  # job.json: unclaimed chunk files were removed
COMPACT_THREADS = max(1, min(8, os.cpu_count() or 1))  # chunks rewritten at once


def check_placements(stage: Any, markers: Mapping[int, Mapping[str, Any]]) -> None:
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


def stage_markers(stage: Any) -> dict[int, dict[str, Any]]:
    """The finished partitions' summaries (a staging area without markers: none)."""
    markers = getattr(stage, "markers", None)
    return dict(markers()) if markers is not None else {}


def read_job(stage: Any) -> dict[str, Any]:
    read = getattr(stage, "read_job", None)
    return dict((read() if read is not None else None) or {})


def update_job(stage: Any, **changes: Any) -> None:
    update = getattr(stage, "update_job", None)
    if update is not None:
        update(**changes)


def remove_unclaimed(stage: Any, alias: str, data: Any, placed: Mapping[int, Any]) -> None:
    """Remove the chunk files of ``data/alias`` that no finished partition claims (written by a
    task that was killed, or whose rows were then written elsewhere)."""
    try:
        arr = data[alias]
    except UNREADABLE_METADATA:
        return  # place_rows writes its metadata again
    claimed = {chunk_key(arr, int(j)) for p in placed.values()
               for j in p["chunks"].get(alias, [])}
    fs, root = fs_of(stage.url_of("data", alias))
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
        except UNREADABLE_METADATA:  # torn by a power loss: its chunks are still good
            fs, root = fs_of(stage.url_of("data", alias))
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
    fs, src_root = fs_of(stage.url_of("rows", alias))
    dst_root = fs_of(stage.url_of("data", alias))[1]
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
    claimed = {chunk_key(dst, int(j)) for p in placed.values() for j in p["chunks"][alias]}
    rewrite: list[tuple[int, np.ndarray]] = []
    for j, start in enumerate(range(0, n, step)):
        key = chunk_key(dst, j)
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
            old_key = chunk_key(src, first // step)
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
