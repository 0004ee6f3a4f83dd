"""The partition writer: each record into its chunk's buffer, chunks written whole, at their
final rows when the partitions before are finished, else at the planned rows."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from guideloom.formats.base import Part, PartitionSink, Schema
from guideloom.formats.carry import PreviousRows
from guideloom.formats.checksums import RowDigests
from guideloom.formats.durable import fsync_files
from guideloom.formats.zarr.carry import CARRIED_KEY, ChunkCarrier, WholeChunk
from guideloom.formats.zarr.chunking import WRITE_EVERY_CHUNK, chunk_key
from guideloom.formats.zarr.final_rows import FinalRows
from guideloom.formats.zarr.pieces import load_piece
from guideloom.formats.zarr.placement import PLACED_KEY, final_start, wait_for, wake
from guideloom.formats.zarr.store import member_array, zarr_store

HOLD_BYTES = 256 << 20  # rows a sink holds until it knows where they go (more: planned rows)
MIN_WAIT_S, MAX_WAIT_S = 10.0, 60.0  # how long a sink waits for the partitions before it


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
        self._carried: list[str] = []  # chunk files carried from a previous generation
        # (chunk start, alias) -> the planned chunk's rows, and the rows written into it
        self._blocks: dict[tuple[int, str], np.ndarray] = {}
        self._present: dict[tuple[int, str], set[int]] = {}
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
        self._placing: dict[str, FinalRows] | None = None
        self._start: int | None = None
        self._carrier: ChunkCarrier | None = None
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
            if not wait_for(self._stage, waiting_on, deadline - time.monotonic()):
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
            self._placing[alias] = FinalRows(self._stage, alias, arr, start, carry)
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

    def carry(self, row: int, old_row: int, count: int, previous: PreviousRows) -> None:
        """Carry the previous generation's rows ``old_row ..`` to ``row ..``: each chunk they
        fill exactly (see :mod:`guideloom.formats.zarr.carry`) as its file, linked or copied,
        with its recorded checksums; the other rows read back and written like new ones."""
        carrier = self._carrier
        if carrier is None or carrier.previous is not previous:
            carrier = self._carrier = ChunkCarrier(previous, self._local_dir is not None)
        self._resolve_held()
        self._n_rows += count
        ends = row + count >= next(iter(self._arrays.values())).shape[0]
        plans: dict[str, tuple[dict[int, WholeChunk], np.ndarray, int]] = {}
        for alias in self._arrays:
            dst, first = self._destination(alias, row)
            chunks = carrier.chunks_of(alias, dst, first, old_row, count, ends, self._sums.on)
            covered = np.zeros(count, dtype=bool)
            for chunk in chunks:
                covered[chunk.offset:chunk.offset + chunk.rows] = True
            plans[alias] = ({c.offset: c for c in chunks}, covered, first)
        for k in range(count):
            values: dict[str, np.ndarray] = {}
            for alias, (starts, covered, first) in plans.items():
                whole = starts.get(k)
                if whole is not None:
                    self._put_chunk(alias, whole, row + k, first + k, carrier)
                elif not covered[k]:
                    values[alias] = carrier.row(alias, old_row + k)
            if values:
                self._put_rows(row + k, values)

    def _destination(self, alias: str, row: int) -> tuple[Any, int]:
        """The array ``row`` of ``alias`` goes to and where in it: the final array when this
        partition writes where rows belong, else the planned rows."""
        if self._placing is not None and alias in self._placing:
            rows = self._placing[alias]
            return rows.arr, rows.start + rows.added
        return self._arrays[alias], row

    def _put_chunk(self, alias: str, chunk: WholeChunk, row: int, at: int,
                   carrier: ChunkCarrier) -> None:
        """Store the previous generation's ``chunk`` at row ``at`` of its destination (the
        chunk of planned row ``row``), with its recorded checksums."""
        arr = self._arrays[alias]
        nbytes = chunk.rows * int(np.prod(arr.shape[1:], dtype=np.int64)) * arr.dtype.itemsize
        j = at // arr.chunks[0]
        if self._placing is not None and alias in self._placing:
            final = self._placing[alias]
            key = carrier.put(alias, chunk, self._stage.url_of("data", alias), final.arr, j)
            final.carried(j, chunk.rows, nbytes)
            self._carried.append(os.path.join("data", alias, key))
        else:
            key = carrier.put(alias, chunk, self._stage.url_of("rows", alias), arr, j)
            self._carried.append(os.path.join("rows", alias, key))
            self._bytes += nbytes
        for i, value in enumerate(chunk.digests):
            self._sums.add_known(alias, row + i, value)

    def _put_rows(self, row: int, values: Mapping[str, np.ndarray]) -> None:
        """Write carried ``row`` of the aliases in ``values`` like a new one (nothing is held
        while rows are carried)."""
        planned = [a for a in values if a not in self._final_arrays]
        if planned:
            self._write_planned(row, values, planned)
        for alias in values:
            if alias not in self._final_arrays:
                continue
            value = np.array(values[alias], dtype=self._arrays[alias].dtype, copy=True)
            self._sums.add(alias, row, value)
            if self._placing is not None:
                self._placing[alias].add(value)
            else:
                self._write_planned(row, {alias: value}, [alias], digest=False)

    def _resolve_held(self) -> None:
        """Send the rows held so far where they go, before rows are carried (carried chunks
        are never held): where they belong if the partitions before have said by now, else
        to their planned rows."""
        if self._held is None:
            return
        held, self._held = self._held, None
        placed = self._place()
        for r, values in held:
            if placed and self._placing is not None:
                for alias, value in values.items():
                    self._placing[alias].add(value)
            else:
                self._write_planned(r, values, list(self._final_arrays), digest=False)

    def _write_planned(self, row: int, arrays: Mapping[str, np.ndarray],
                       aliases: Sequence[str], digest: bool = True) -> None:
        """Copy ``row`` of each of ``aliases`` into its planned chunk's block (one block per
        chunk and alias), writing a block once it holds all its rows of this partition."""
        for alias in aliases:
            start, stop = self._chunk(row, self._arrays[alias].chunks[0])
            key = (start, alias)
            block = self._blocks.get(key)
            if block is None:
                block = self._blocks[key] = np.zeros(
                    (stop - start, *self._arrays[alias].shape[1:]), dtype=self._arrays[alias].dtype)
                self._present[key] = set()
            block[row - start] = arrays[alias]  # the copy: the caller may reuse it
            self._present[key].add(row)
            if len(self._present[key]) == stop - max(start, self._part.start):
                self._flush(key, digest)

    def _flush(self, key: tuple[int, str], digest: bool = True) -> None:
        """Write the planned chunk ``key`` (rows never written, i.e. skipped, stay zero)."""
        start, alias = key
        rows, present = self._blocks.pop(key), self._present.pop(key)
        arr = self._arrays[alias]
        if digest:
            for r in sorted(present):
                self._sums.add(alias, r, rows[r - start])  # the row as stored
        arr[start:start + len(rows)] = rows
        self._bytes += rows.nbytes
        chunk = chunk_key(arr, start // arr.chunks[0])
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
            self._flush(key, digest=key[1] not in self._final_arrays)
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
        if self._local_dir is not None:  # carried chunk files are durable: their folders
            top = self._local_dir
            fsync_files([p if os.path.isabs(p) else os.path.join(top, p) for p in self._written],
                        top, [os.path.join(top, p) for p in self._carried])
            self._written, self._carried = [], []
        return self._bytes

    def _note(self, n: int, tails: Mapping[str, list[int] | None]) -> None:
        """Tell the next partitions where this one's rows end (and its last, partly filled
        chunk), before its chunks are written."""
        self._noted = True
        note = getattr(self._stage, "write_note", None)
        if note is not None and self._start is not None:
            note(self._part.index, {"start": self._start, "stop": self._start + n,
                                    "pieces": {a: [t] for a, t in tails.items() if t}})
            wake(self._stage, self._part.index)

    def _note_planned(self) -> None:
        """Tell the next partitions how many rows this one (at its planned rows) wrote."""
        note = getattr(self._stage, "write_note", None)
        if note is not None and not getattr(self, "_noted", False):
            self._noted = True
            note(self._part.index, {"written": self._n_rows})
            wake(self._stage, self._part.index)

    def extra_summary(self) -> dict[str, Any]:
        """The checksum of every row written (see :mod:`guideloom.formats.checksums`) and,
        for rows written where they belong, where (``zarr_placed``: final rows, chunks and
        pieces per alias)."""
        extra = self._sums.summary()
        if self._carrier is not None:
            extra[CARRIED_KEY] = self._carrier.counts()
        if self._placing is not None and self._start is not None:
            added = next(iter(self._placing.values())).added
            extra[PLACED_KEY] = {
                "start": self._start,
                "stop": self._start + added,
                "chunks": {a: r.chunks for a, r in self._placing.items()},
                "pieces": {a: r.pieces for a, r in self._placing.items()},
            }
        return extra
