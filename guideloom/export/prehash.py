"""The sha256 of row files hashed while their partitions are still being written (in-process).

``croissant.json`` records the sha256 of every published file up to a size limit, which costs
a full read of the export at finalize (0.1 s for 64 MB, a tenth of a small export). Rows of a
partition never change once its task has returned, so the file's bytes become final from the
front as partitions finish: :class:`PrefixHashes` hashes each row file's final prefix on a
helper thread while the next partitions run (``pread`` and ``hashlib`` both release the GIL),
and :meth:`PrefixHashes.finish` hashes what is left. Only where the tasks write in this process
(in-process placement), so that every byte hashed is one this process wrote.

A digest is handed out only for the very file that was hashed (the same inode, renamed into
``data/``; a compacted copy is a new file) at the size it had when the hashing ended; anything
else, or any read error, leaves that file to be hashed at finalize as before.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from guideloom.runtime.os_support import preadinto

BLOCK_BYTES = 8 << 20  # bytes read (and hashed) per step
INLINE_BYTES = 1 << 20  # a step this small is hashed by the caller: cheaper than a thread start


@dataclass
class _File:
    fd: int
    data_offset: int  # where row 0 starts
    row_bytes: int
    digest: hashlib._Hash
    hashed: int = 0  # bytes hashed so far, from the start of the file


class PrefixHashes:
    """sha256 of row files, hashed from the front as their rows become final.

    Args:
        files: Published name -> ``(path while staged, offset of row 0, bytes per row)``.
    """

    def __init__(self, files: Mapping[str, tuple[str, int, int]]):
        self._files: dict[str, _File] = {}
        self._done: dict[int, int] = {}  # first row -> rows, of finished partitions
        self._frontier = 0  # rows [0, frontier) are final in every file
        self._failed = False
        self._last: Future[None] | None = None
        self._buffer: memoryview | None = None
        flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
        try:
            for name, (path, offset, row_bytes) in files.items():
                self._files[name] = _File(os.open(path, flags), offset, row_bytes,
                                          hashlib.sha256())
        except OSError:
            self._failed = True
        self._pool: ThreadPoolExecutor | None = None  # started by the first large step

    def rows_final(self, start: int, count: int) -> None:
        """Rows ``[start, start + count)`` are written and will not change; hash every prefix
        that is now final on the helper thread."""
        if self._failed or count <= 0:
            return
        self._done[start] = count
        frontier = self._frontier
        while frontier in self._done:
            frontier += self._done.pop(frontier)
        if frontier != self._frontier:
            step = sum(f.data_offset + frontier * f.row_bytes - f.hashed
                       for f in self._files.values())
            self._frontier = frontier
            if step <= INLINE_BYTES and self._pool is None:  # nothing in flight before it
                try:
                    self._hash_upto(frontier)
                except OSError:
                    self._failed = True
                return
            if self._pool is None:
                self._pool = ThreadPoolExecutor(1, thread_name_prefix="guideloom-hash")
            self._last = self._pool.submit(self._hash_upto, frontier)

    def finish(self, data_dir: str) -> dict[str, str]:
        """The sha256 of each file, hashed to its end, once finalize has moved it to
        ``data_dir``: ``{absolute path: hex digest}`` of the files there that are still the
        files hashed."""
        try:
            self._wait()
            if self._failed:
                return {}
            out = {}
            for name, f in self._files.items():
                path = os.path.join(data_dir, name)
                try:
                    hashed, there = os.fstat(f.fd), os.stat(path)
                    if (there.st_ino, there.st_dev) != (hashed.st_ino, hashed.st_dev):
                        continue  # replaced (compacted): not the bytes hashed
                    if (not self._read(f, hashed.st_size)
                            or os.fstat(f.fd).st_size != hashed.st_size):
                        continue
                except OSError:
                    continue  # hashed again at finalize, which words any error
                out[os.path.abspath(path)] = f.digest.hexdigest()
            return out
        finally:
            self.close()

    def close(self) -> None:
        """Stop the helper thread (after the step it is in) and close the files."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        for f in self._files.values():
            if f.fd >= 0:
                os.close(f.fd)
                f.fd = -1

    def _wait(self) -> None:
        if self._last is not None:
            try:
                self._last.result()
            except OSError:
                self._failed = True

    def _hash_upto(self, rows: int) -> None:
        for f in self._files.values():
            if not self._read(f, f.data_offset + rows * f.row_bytes):
                self._failed = True

    def _read(self, f: _File, end: int) -> bool:
        """Hash ``f`` from where it stopped to byte ``end``; False on a short read."""
        while f.hashed < end:
            if self._buffer is None:
                self._buffer = memoryview(bytearray(BLOCK_BYTES))
            view = self._buffer[:min(BLOCK_BYTES, end - f.hashed)]
            got = preadinto(f.fd, view, f.hashed)
            if got <= 0:
                return False
            f.digest.update(view[:got])
            f.hashed += got
        return True
