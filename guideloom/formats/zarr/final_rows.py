"""One alias's rows written where they belong: whole chunks into the final array, a chunk
only partly filled as a piece."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from guideloom.formats.zarr.chunking import chunk_key
from guideloom.formats.zarr.pieces import save_piece


class FinalRows:
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

    def carried(self, j: int, rows: int, nbytes: int) -> None:
        """Chunk ``j`` (the next, from its first row) was stored whole as a file carried from
        the previous generation (see :mod:`guideloom.formats.zarr.carry`), ``rows`` rows."""
        if self.held or self.first != self.chunk_start or j * self.rpc != self.chunk_start:
            raise AssertionError(f"chunk {j} of {self.alias} carried while rows "
                                 f"{self.first}..{self.first + len(self.held)} are held")
        self.chunks.append(j)
        self.bytes += nbytes
        self.added += rows
        self.chunk_start += self.rpc
        self.first = self.chunk_start

    def _flush(self) -> None:
        block = np.stack(self.held)
        if self.first == self.chunk_start:  # the whole chunk is here
            j = self.chunk_start // self.rpc
            self.arr[self.chunk_start:self.chunk_start + len(block)] = block
            self.chunks.append(j)
            self.files.append(chunk_key(self.arr, j))
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
            self.files.append(chunk_key(self.arr, j))
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
