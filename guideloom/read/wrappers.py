"""Speed tricks as wrappers over any :class:`~guideloom.read.byte_source.ByteSource`.

- :class:`Prefetched`: bytes read earlier (a member's first bytes, fetched with its local
  header) served from memory, and how far the reads reached (:attr:`Prefetched.reach`), so the
  next member's first read can bring its data along.
- :class:`MetadataBlocks`: HDF5 metadata read in :data:`BLOCK`-sized blocks kept in a
  :class:`MemberMeta` (saved in the on-disk metadata cache by the HDF5 layer), and the data
  ranges h5py is about to read fetched beforehand in one ``read_many`` call.

Coalescing neighbouring ranges is :mod:`guideloom.read.ranges` (the network sources use it);
reading records ahead is :mod:`guideloom.read.readahead`.
"""

from __future__ import annotations

import base64
import bisect
import logging
from collections.abc import Sequence
from typing import Any

from guideloom.errors import ExperimentReadError
from guideloom.read.byte_source import ByteSource
from guideloom.read.types import SourceDefaults

logger = logging.getLogger(__name__)

__all__ = ["BLOCK", "RECORD_MAX", "MemberMeta", "MetadataBlocks", "Prefetched"]

BLOCK = 4 << 10  # granularity of HDF5 metadata reads (and of what the cache keeps)
RECORD_MAX = 4 * BLOCK  # a read this large during metadata is data: not kept


class Prefetched(SourceDefaults):
    """``source`` with the bytes ``blob`` (read earlier from ``start``) served from memory;
    :attr:`reach` is the end of the furthest byte asked for, relative to ``start``."""

    def __init__(self, source: ByteSource, start: int, blob: bytes):
        self.source, self.start, self.blob = source, start, blob
        self.name = source.name
        self.high_latency = source.high_latency
        self.reach = 0

    def size(self) -> int:
        return self.source.size()

    def _held(self, offset: int, size: int) -> bytes | None:
        rel = offset - self.start
        self.reach = max(self.reach, rel + size)
        if rel >= 0 and rel + size <= len(self.blob):
            return self.blob[rel:rel + size]
        return None

    def read(self, offset: int, size: int) -> bytes:
        held = self._held(offset, size)
        return held if held is not None else self.source.read(offset, size)

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        out: list[bytes | None] = [self._held(o, n) for o, n in ranges]
        todo = [i for i, b in enumerate(out) if b is None]
        if todo:
            for i, blob in zip(todo, self.source.read_ranges([ranges[i] for i in todo]),
                               strict=True):
                out[i] = blob
        return out  # type: ignore[return-value]

    read_many = read_ranges

    def close(self) -> None:
        self.source.close()


class MemberMeta:
    """What is known of one member's bytes: where its data starts and metadata blocks."""

    def __init__(self, data_start: int, blocks: dict[int, bytes] | None = None):
        self.data_start = data_start
        self.blocks: dict[int, bytes] = blocks or {}
        self.changed = False

    def to_json(self) -> dict[str, Any]:
        return {"data_start": self.data_start, "block": BLOCK,
                "blocks": {str(i): base64.b64encode(b).decode() for i, b in
                           sorted(self.blocks.items())}}

    @classmethod
    def from_json(cls, doc: Any, bounds: tuple[int, int], size: int, archive_size: int
                  ) -> MemberMeta | None:
        """The cached entry, if it fits a member of ``size`` bytes whose data starts within
        ``bounds`` of an archive of ``archive_size`` bytes (else ``None``: refetched)."""
        try:
            start = doc["data_start"]
            lowest, highest = bounds
            if (doc["block"] != BLOCK or type(start) is not int or not lowest <= start <= highest
                    or start + size > archive_size):
                return None
            blocks = {}
            for key, text in doc["blocks"].items():
                i = int(key)
                data = base64.b64decode(text, validate=True)
                if not 0 <= i * BLOCK < size or len(data) != min(BLOCK, size - i * BLOCK):
                    return None
                blocks[i] = data
            return cls(start, blocks)
        except (KeyError, TypeError, ValueError, AttributeError):
            return None

    def keep_first(self, have: bytes | memoryview, size: int) -> None:
        """Keep the complete blocks of ``have``, the member's first bytes."""
        for i in range(min(len(have), size) // BLOCK + 1):
            piece = have[i * BLOCK:(i + 1) * BLOCK]
            if i * BLOCK < size and len(piece) == min(BLOCK, size - i * BLOCK):
                self.blocks[i] = bytes(piece)
        self.changed = True


class MetadataBlocks(SourceDefaults):
    """The ``size`` bytes from ``meta.data_start`` of ``source``, read for h5py: metadata in
    blocks kept in ``meta`` (fetched and kept while :attr:`recording`), data from ranges
    fetched beforehand (:meth:`prefetch`) or, failing that, as asked. A failed fetch is kept
    in :attr:`failure` (HDF5 hides why a read failed), worded with ``sim_id`` and ``name``."""

    def __init__(self, source: ByteSource, meta: MemberMeta, size: int, name: str,
                 sim_id: Any):
        self.source, self.meta, self._size = source, meta, size
        self.name, self.sim_id = name, sim_id
        self.high_latency = source.high_latency
        self.recording = True
        self.failure: ExperimentReadError | None = None
        self._data: list[tuple[int, bytes]] = []
        self._starts: list[int] = []

    def size(self) -> int:
        return self.source.size()

    def _block_len(self, i: int) -> int:
        return min(BLOCK, self._size - i * BLOCK)

    def _fetch(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        base = self.meta.data_start
        try:
            return self.source.read_ranges([(base + o, n) for o, n in ranges])
        except (OSError, ValueError) as exc:
            self.failure = ExperimentReadError(
                f"experiment {self.sim_id}: {self.name}: reading from {self.source.name} "
                f"failed ({exc}); check the connection and run again",
                sim_id=self.sim_id, file=self.name)
            raise self.failure from exc

    def prefetch(self, ranges: list[tuple[int, int]]) -> None:
        """Fetch the member ranges ``(offset, size)`` h5py is about to read, in one call."""
        ranges = [(o, n) for o, n in ranges if n > 0 and o >= 0 and o + n <= self._size]
        if ranges:
            self._data = sorted(zip((o for o, _ in ranges), self._fetch(ranges), strict=True))
            self._starts = [o for o, _ in self._data]

    def read(self, offset: int, n: int) -> bytes:
        pos = offset - self.meta.data_start
        end = pos + n
        i = bisect.bisect_right(self._starts, pos) - 1
        if i >= 0:  # inside a prefetched data range?
            start, blob = self._data[i]
            if end <= start + len(blob):
                return blob[pos - start:end - start]
        first, last = pos // BLOCK, (end - 1) // BLOCK
        blocks = self.meta.blocks
        missing = [i for i in range(first, last + 1) if i not in blocks]
        if missing and (not self.recording or n > RECORD_MAX):
            return self._fetch([(pos, n)])[0]
        if missing:
            got = self._fetch([(i * BLOCK, self._block_len(i)) for i in missing])
            blocks.update(zip(missing, got, strict=True))
            self.meta.changed = True
        joined = b"".join(blocks[i] for i in range(first, last + 1))
        return joined[pos - first * BLOCK:end - first * BLOCK]

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        return [self.read(o, n) for o, n in ranges]

    read_many = read_ranges

    def close(self) -> None:
        self.source.close()
