"""Copying records of published shards into a shard being written, without decoding them.

A writer's :meth:`copy_records` (stream, document and stream-with-meta writers) appends
records of another storage's shard as the bytes they are in that shard (the format is never
called): an update of a storage export carries unchanged records this way. :func:`list_shards`
reads the shards' footers once (validated as a reader validates them); :class:`ShardSource`
holds one shard file open for the copies; :func:`link_shard` publishes a whole shard as the
same file under another name (a hard link, a copy where the file system has none).
"""

from __future__ import annotations

import logging
import os
import stat
import uuid
from bisect import bisect_right
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from guideloom.errors import StorageError, UpdateRefusedError
from guideloom.runtime.os_support import copy_range, pread
from guideloom.storage.shards import (
    INDEX_DTYPE,
    check_offsets,
    close_shards,
    fsync_directory,
    open_shards,
    shard_name,
)

__all__ = ["ShardFiles", "ShardSource", "link_shard", "list_shards"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ShardFiles:
    """The shards of a published storage: each one's path and footer, and its first record.

    Attributes:
        paths: Shard ``k``'s file.
        footers: Shard ``k``'s footer (counts and sections).
        starts: Global record number of each shard's first record, then the total.
    """

    paths: tuple[str, ...]
    footers: tuple[dict[str, Any], ...]
    starts: tuple[int, ...]

    @property
    def total(self) -> int:
        """Records of all shards."""
        return self.starts[-1]

    def records(self, shard: int) -> int:
        """Records of ``shard``."""
        return self.starts[shard + 1] - self.starts[shard]

    def locate(self, record: int) -> tuple[int, int]:
        """``(shard, record within it)`` of global record ``record`` (empty shards skipped).

        Raises:
            IndexError: No such record.
        """
        if not 0 <= record < self.total:
            raise IndexError(f"record {record} is not one of the {self.total} records")
        shard = bisect_right(self.starts, record) - 1
        return shard, record - self.starts[shard]


def list_shards(storage: Any, kind: str, dtype: np.dtype | None,
                sections: tuple[str, ...]) -> ShardFiles:
    """Open and validate every shard of ``storage`` (a local one), keep their footers, close
    them again.

    Raises:
        StorageError: As a reader of the storage would raise (no shards, a gap, a damaged or
            mismatched shard).
    """
    opened = open_shards(storage.directory, kind, storage.read_interface, dtype, sections)
    try:
        paths = tuple(str(shard.path) for shard in opened)
        footers = tuple(dict(shard.footer) for shard in opened)
    finally:
        close_shards(opened)
    starts = [0]
    for footer in footers:
        starts.append(starts[-1] + int(footer["records"]))
    return ShardFiles(paths, footers, tuple(starts))


class ShardSource:
    """One published shard file, open for copying its records' bytes.

    Args:
        path: The shard file.
        footer: Its footer (from :func:`list_shards`).
    """

    def __init__(self, path: str, footer: dict[str, Any]) -> None:
        self.path, self.footer = path, footer
        self.fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        self._indexes: dict[str, np.ndarray] = {}

    @property
    def records(self) -> int:
        """Records of the shard."""
        return int(self.footer["records"])

    def section(self, name: str) -> tuple[int, int]:
        """``(offset, nbytes)`` of section ``name``."""
        offset, nbytes = self.footer["sections"][name]
        return int(offset), int(nbytes)

    def index(self, name: str) -> np.ndarray:
        """The ``int64`` index section ``name`` (read once)."""
        found = self._indexes.get(name)
        if found is None:
            offset, nbytes = self.section(name)
            raw = pread(self.fd, nbytes, offset)
            if len(raw) != nbytes or nbytes % INDEX_DTYPE.itemsize:
                raise StorageError(f"{self.path}: section {name!r} is truncated")
            found = np.frombuffer(raw, dtype=INDEX_DTYPE).astype(np.int64)
            self._indexes[name] = found
        return found

    def record_offsets(self, end: int) -> np.ndarray:
        """The shard's ``record_offsets`` (``records + 1`` entries from 0 to ``end``), checked."""
        offsets = self.index("record_offsets")
        check_offsets(Path(self.path), "record_offsets", offsets, self.records, end)
        return offsets

    def copy_to(self, fd: int, offset: int, nbytes: int, dst_offset: int) -> None:
        """Copy ``nbytes`` of this shard from ``offset`` into ``fd`` at ``dst_offset``."""
        copy_range(self.fd, fd, nbytes, offset, dst_offset,
                   fallback="storage:copy_file_range_refused")

    def close(self) -> None:
        """Close the file."""
        os.close(self.fd)


def link_shard(source: str, directory: Path, shard: int) -> None:
    """Publish the shard file ``source`` as shard ``shard`` of ``directory``: a hard link under
    a temporary name renamed over the final one (a copy, fsynced, where the file system has no
    links), then the directory entry made durable."""
    final = directory / shard_name(shard)
    temp = directory / f".{shard_name(shard)}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
    try:
        try:
            os.link(source, temp, follow_symlinks=False)  # a link is linked, never followed
            if stat.S_ISLNK(os.lstat(temp).st_mode):
                raise UpdateRefusedError(f"cannot update: the previous shard {source} is a "
                                         "symbolic link; an update never follows one: remove "
                                         "it, or export again with overwrite=True")
        except UpdateRefusedError:
            raise
        except OSError as exc:
            logger.debug("guideloom: cannot link %s (%s): copying it", source, exc)
            _copy_file(source, temp)
        os.replace(temp, final)
    except BaseException:
        if os.path.lexists(temp):
            os.unlink(temp)
        raise
    fsync_directory(directory)


def _copy_file(source: str, target: Path) -> None:
    src = os.open(source, os.O_RDONLY | getattr(os, "O_BINARY", 0)
                  | getattr(os, "O_NOFOLLOW", 0))
    try:
        dst = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0),
                      0o666)
        try:
            copy_range(src, dst, os.fstat(src).st_size, 0, 0,
                       fallback="storage:copy_file_range_refused")
            os.fsync(dst)
        finally:
            os.close(dst)
    finally:
        os.close(src)
