"""Carrying rows of a storage export's previous generation into a shard being written.

An update of a ``storage`` export (see :mod:`guideloom.export.update`) writes each partition's
shard again: records of added or changed experiments are packed by the format, and the
records of unchanged ones are copied from the previous generation's shards as the bytes they
are there (a record's extent comes from that shard's own index; the transform, the decode and
the format's ``pack`` never run for them). A shard that holds exactly the rows of one previous
shard, nothing else, is not copied at all: the previous file is linked in under the new
number (:func:`~guideloom.storage.copying.link_shard`), which a shard's bytes allow (a footer
names no shard number). Files of the previous generation are only read, never changed, so a
reader opened on it keeps reading its records.
"""

from __future__ import annotations

import itertools
import logging
import threading
from pathlib import Path
from typing import Any

from guideloom.formats.carry import PreviousRows
from guideloom.formats.layout import EXPORT_MANIFEST, fail
from guideloom.storage.copying import ShardFiles, ShardSource, link_shard

logger = logging.getLogger(__name__)

_cache: dict[tuple[str, str], ShardFiles] = {}
_lock = threading.Lock()


def previous_shards(writer: Any, previous: PreviousRows) -> ShardFiles:
    """The shards of the previous generation (their footers read once per process and
    generation)."""
    key = (previous.root, str(previous.manifest.get("export_id", "")))
    with _lock:
        cached = _cache.get(key)
    if cached is not None:
        return cached
    found: ShardFiles = writer.published_shards(previous.root)
    listed = previous.manifest.get("n_partitions")
    if isinstance(listed, int) and len(found.paths) != listed:
        fail(previous.root, EXPORT_MANIFEST, f"lists {listed} shards, the storage has "
                                             f"{len(found.paths)}")
    if found.total != int(previous.manifest["count"]):
        fail(previous.root, EXPORT_MANIFEST, f"records {previous.manifest['count']} rows, "
                                             f"its shards hold {found.total} records")
    with _lock:
        _cache.clear()  # one generation at a time per process
        _cache[key] = found
    return found


class ShardCarrier:
    """Copies previous rows into shard ``shard`` of ``writer``, or links a whole previous
    shard.

    Attributes:
        whole: The previous shard carried whole as this shard's first rows and not copied
            (yet): linked at the end unless anything else follows it (:meth:`settle`).
    """

    def __init__(self, writer: Any, shard: int, previous: PreviousRows) -> None:
        self._writer, self._shard, self.previous = writer, shard, previous
        self.files = previous_shards(writer, previous)
        self._sources: dict[int, ShardSource] = {}
        self.whole: int | None = None

    def source(self, shard: int) -> ShardSource:
        """Previous shard ``shard``, open for copying."""
        found = self._sources.get(shard)
        if found is None:
            found = self._sources[shard] = ShardSource(self.files.paths[shard],
                                                       self.files.footers[shard])
        return found

    def carry(self, old_row: int, count: int, fresh: bool) -> list[int]:
        """Carry previous rows ``old_row ..`` (``count`` of them) to the end of the shard;
        ``fresh``: nothing was written to it before. Returns each row's element count."""
        lengths: list[int] = []
        done = 0
        while done < count:
            shard, local = self.files.locate(old_row + done)
            n = min(count - done, self.files.records(shard) - local)
            if fresh and not lengths and local == 0 and n == self.files.records(shard):
                self.whole = shard  # maybe the shard is all of it: decided at the end
                lengths.extend(self._lengths(shard))
            else:
                self.settle()
                lengths.extend(self._writer.copy_records(self._shard, self.source(shard),
                                                         local, n))
            done += n
        return lengths

    def _lengths(self, shard: int) -> list[int]:
        source = self.source(shard)
        if self._writer.element_dtype() is None:
            return [1] * source.records  # documents: one element each
        offsets = source.record_offsets(int(source.footer["elements"]))
        return [int(b - a) for a, b in itertools.pairwise(offsets)]

    def settle(self) -> None:
        """Copy the whole shard held back for linking: other rows follow it."""
        if self.whole is not None:
            shard, self.whole = self.whole, None
            self._writer.copy_records(self._shard, self.source(shard), 0,
                                      self.files.records(shard))

    def link(self, directory: Path) -> int:
        """Publish the shard held back as this shard (:attr:`whole` must be set); return its
        previous number."""
        assert self.whole is not None
        link_shard(self.files.paths[self.whole], directory, self._shard)
        logger.debug("guideloom: shard %d is previous shard %d, linked", self._shard,
                     self.whole)
        return self.whole

    def close(self) -> None:
        """Close the previous shards opened."""
        for source in self._sources.values():
            source.close()
        self._sources.clear()
