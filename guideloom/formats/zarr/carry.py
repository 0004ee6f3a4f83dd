"""An update's unchanged rows, carried chunk by chunk from the previous generation.

A chunk of the new arrays whose rows are exactly one chunk of the previous generation's array
(same rows per chunk, row shape, dtype, codecs and fill value; the old chunk's rows land at
the start of a new chunk) is that chunk's file: hard-linked, or its encoded bytes copied where
the stores cannot share a file, and never decoded. Its rows keep the checksums the previous
``checksums.json`` records. The other carried rows (a chunk shared with new or changed rows,
rows moved by a removal or reordering) are read back, one decode per old chunk, and written
like new ones.

A hard link is safe because no writer changes a chunk file in place: zarr's local store writes
a chunk under a temporary name and renames it over the old one, finalize renames, and a chunk
is linked only into a local staging area read through that store. Elsewhere the bytes are
copied.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from guideloom.formats.base import fail
from guideloom.formats.carry import PreviousRows
from guideloom.formats.own_files import link_file
from guideloom.formats.zarr.chunking import chunk_key
from guideloom.formats.zarr.store import fs_of

logger = logging.getLogger(__name__)

CARRIED_KEY = "zarr_carried"  # a partition's summary, export.json: chunks carried as files
LINK_SUFFIX = ".carried.partial"  # a chunk being linked (finalize removes *.partial files)


@dataclass(frozen=True)
class WholeChunk:
    """One chunk of a carried run that is a whole chunk of the previous generation.

    Attributes:
        offset: Its first row, counted from the run's first row.
        old_chunk: The previous generation's chunk number.
        rows: Its rows (the chunk's rows per chunk, or fewer for the arrays' last chunk).
        digests: The recorded checksum of each of its rows.
    """

    offset: int
    old_chunk: int
    rows: int
    digests: tuple[str, ...]


def same_layout(new: Any, old: Any) -> bool:
    """Whether a chunk file of array ``old`` decodes, in array ``new``, to the same rows:
    equal rows per chunk, row shape, dtype, codecs, fill value and chunk key encoding."""
    a, b = new.metadata, old.metadata
    return (tuple(new.chunks) == tuple(old.chunks) and tuple(new.shape[1:]) == tuple(old.shape[1:])
            and new.dtype == old.dtype and a.codecs == b.codecs
            and bool(np.all(np.asarray(a.fill_value) == np.asarray(b.fill_value)))
            and a.chunk_key_encoding == b.chunk_key_encoding)


def whole_chunks(first: int, old_first: int, count: int, rpc: int, n_old: int,
                 ends_array: bool) -> Iterator[tuple[int, int, int]]:
    """``(offset, old chunk, rows)`` of each chunk that rows ``old_first ..`` (``count`` of
    them) of the previous generation fill exactly when they go to rows ``first ..`` of an
    array of ``rpc`` rows per chunk.

    Both ends must lie on chunk boundaries; the previous generation's last chunk, partly
    filled, only when it is the new array's last too (``ends_array``: the run ends the new
    array), so that neither holds rows past the other's end.
    """
    if rpc < 1 or (first - old_first) % rpc:
        return
    k = (-first) % rpc
    while k < count:
        old = old_first + k
        rows = min(rpc, n_old - old)
        if rows <= 0 or k + rows > count:
            return
        if rows < rpc and not (ends_array and k + rows == count):
            return
        yield k, old // rpc, rows
        k += rpc


class ChunkCarrier:
    """The previous generation's arrays as one partition's sink carries their chunks.

    Attributes:
        linked: Chunk files hard-linked, per alias.
        copied: Chunk files whose encoded bytes were copied, per alias.
    """

    def __init__(self, previous: PreviousRows, local: bool):
        self.previous = previous
        self._link = local and "://" not in previous.root
        self._old: dict[str, Any] = {}
        self.linked: dict[str, int] = {}
        self.copied: dict[str, int] = {}
        self._decoded: dict[str, tuple[int, np.ndarray]] = {}  # alias -> (chunk, its rows)

    def old_array(self, alias: str) -> Any:
        """The previous generation's array ``alias``."""
        arr = self._old.get(alias)
        if arr is None:
            arr = self._old[alias] = self.previous.reader.array(alias)
        return arr

    def chunks_of(self, alias: str, new: Any, first: int, old_first: int, count: int,
                  ends_array: bool, digests: bool) -> list[WholeChunk]:
        """The chunks of the run ``old_first .. old_first+count-1`` → ``first ..`` of array
        ``new`` that can be carried as files; with ``digests`` (the sink takes checksums)
        only those whose rows' checksums the previous generation records."""
        old = self.old_array(alias)
        if not same_layout(new, old):
            return []
        found = []
        for offset, j, rows in whole_chunks(first, old_first, count, int(new.chunks[0]),
                                            int(old.shape[0]), ends_array):
            start = j * int(old.chunks[0])
            known = tuple(self.previous.digest(alias, start + i) if digests else ""
                          for i in range(rows))
            if any(d is None for d in known):
                continue  # no recorded checksum to carry: its rows are read and hashed
            found.append(WholeChunk(offset, j, rows, tuple(str(d) for d in known)))
        return found

    def put(self, alias: str, chunk: WholeChunk, dst_root: str, dst: Any, j: int) -> str:
        """Store the previous generation's chunk ``chunk`` as chunk ``j`` of array ``dst``
        (whose folder is ``dst_root``); return its key."""
        old = self.old_array(alias)
        key = chunk_key(old, chunk.old_chunk)
        src = f"{self.previous.root.rstrip('/')}/{alias}/{key}"
        new_key = chunk_key(dst, j)
        target = f"{dst_root.rstrip('/')}/{new_key}"
        if self._link and "://" not in dst_root:
            linked = self._hard_link(f"{alias}/{key}", target, key)
        else:
            self._copy_bytes(src, target, key)
            linked = False
        counts = self.linked if linked else self.copied
        counts[alias] = counts.get(alias, 0) + 1
        return new_key

    def _hard_link(self, rel: str, target: str, key: str) -> bool:
        """Link the previous generation's file ``rel`` as ``target`` (True), or where no link
        can be made copy it, fsynced (False); never through a link
        (:func:`~guideloom.formats.own_files.link_file`: a chunk or an array folder that is a
        link is refused)."""
        os.makedirs(os.path.dirname(target), exist_ok=True)
        tmp = f"{target}{LINK_SUFFIX}"
        if os.path.lexists(tmp):  # left by a killed run of this partition
            os.unlink(tmp)
        try:
            linked = link_file(self.previous.root, rel, tmp)
        except FileNotFoundError:
            fail(self.previous.root, key, "the chunk file is missing")
        os.replace(tmp, target)
        return linked

    def _copy_bytes(self, src: str, target: str, key: str) -> None:
        src_fs, src_path = fs_of(src)
        fs, path = fs_of(target)
        try:
            blob = src_fs.cat_file(src_path)
        except FileNotFoundError:
            fail(self.previous.root, key, "the chunk file is missing")
        fs.makedirs(os.path.dirname(path), exist_ok=True)
        fs.pipe_file(path, blob)

    def row(self, alias: str, old_row: int) -> np.ndarray:
        """Row ``old_row`` of the previous generation's array ``alias``, its chunk decoded
        once for the rows after it."""
        old = self.old_array(alias)
        rpc = int(old.chunks[0])
        j = old_row // rpc
        held = self._decoded.get(alias)
        if held is None or held[0] != j:
            block = np.asarray(old[j * rpc:min((j + 1) * rpc, int(old.shape[0]))])
            held = self._decoded[alias] = (j, block)
        value: np.ndarray = held[1][old_row - j * rpc]
        return value

    def counts(self) -> dict[str, dict[str, int]]:
        """``{"linked": {alias: n}, "copied": {alias: n}}`` (a partition's summary)."""
        return {"linked": dict(self.linked), "copied": dict(self.copied)}
