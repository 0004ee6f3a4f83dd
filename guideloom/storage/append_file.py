"""A file written front to back through one aligned buffer, its whole blocks with direct I/O.

A shard writer appends records in small pieces. Gathered in a page-aligned buffer of
:data:`CAPACITY` bytes, every whole 4 KiB block of it is written with ``O_DIRECT`` (a second
descriptor of the same file) by a helper thread while the writer fills a second buffer: the
bytes go from the buffer to the disk with no copy into the page cache and nothing left dirty,
so the fsync of the commit has only the last partial block and the metadata to write.
Measured here (160 MB over 4 files): direct writes about 1.5 GB/s, buffered writes and their
fsync 0.4 to 0.7 GB/s.

The partial block at the end is written through the ordinary descriptor when the file is
flushed, and kept in the buffer: the next whole-block write starts at that block again (an
aligned offset), so the file can be flushed in the middle (before a kernel copy appended to
it) and written directly afterwards. Where ``O_DIRECT`` is missing or refused (macOS, tmpfs,
some network file systems), every byte goes through the ordinary descriptor, with the
write-back of what was written started every :data:`WRITEBACK_EVERY` bytes (fallback
``storage:o_direct_refused``).
"""

from __future__ import annotations

import errno
import logging
import mmap
import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from guideloom.runtime import fallbacks
from guideloom.runtime.os_support import O_DIRECT, pread, pwrite

logger = logging.getLogger(__name__)

BLOCK = 4096  # the alignment of direct writes: offset, length and memory
CAPACITY = 1 << 20  # bytes per buffer (two per shard being written, as the 1 MiB write and
# gather buffers before; 1 MiB and 4 MiB direct writes ran at the same rate here)
WRITEBACK_EVERY = 1 << 25  # buffered bytes after which the kernel starts writing them back


class AppendFile:
    """Append-only writes of one new file at ``path`` (created or truncated).

    Args:
        path: The file to write.
        direct: Write whole blocks with ``O_DIRECT`` where the file system allows it.
    """

    def __init__(self, path: str | os.PathLike[str], direct: bool = True) -> None:
        self.path = os.fspath(path)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o666)
        self._direct: int | None = None
        if direct and O_DIRECT:
            try:
                self._direct = os.open(self.path, os.O_WRONLY | O_DIRECT)
            except OSError as exc:
                self._no_direct(exc)
        # two page-aligned buffers (as direct writes need): one fills while the other is
        # written by a helper thread (the write releases the GIL)
        self._buffers = [mmap.mmap(-1, CAPACITY), mmap.mmap(-1, CAPACITY)]
        self._views = [memoryview(b) for b in self._buffers]
        self._view = self._views[0]
        self._pool: ThreadPoolExecutor | None = None
        self._pending: Future[None] | None = None
        self._base = 0  # file offset of the buffer's first byte (a block boundary)
        self._fill = 0  # bytes in the buffer
        self._durable_from = 0  # written back up to here (buffered writes)

    # --- what a writer asks -------------------------------------------------------------
    @property
    def position(self) -> int:
        """Bytes appended so far."""
        return self._base + self._fill

    def fileno(self) -> int:
        """The ordinary descriptor (for ``fsync`` and kernel copies)."""
        return self._fd

    def space(self) -> memoryview:
        """The free part of the buffer; fill its front, then :meth:`advance` by what was
        filled. Empty when the buffer is full (:meth:`drain` makes room)."""
        return self._view[self._fill:]

    def advance(self, nbytes: int) -> None:
        """Count ``nbytes`` filled into :meth:`space` as appended."""
        if not 0 <= nbytes <= CAPACITY - self._fill:
            raise ValueError(f"{self.path}: {nbytes} bytes do not fit the buffer")
        self._fill += nbytes
        if self._fill == CAPACITY:
            self.drain()

    def write(self, data: Any) -> None:
        """Append the bytes of ``data`` (any C-contiguous buffer)."""
        view = memoryview(data).cast("B")
        while len(view):
            take = min(len(view), CAPACITY - self._fill)
            self._view[self._fill:self._fill + take] = view[:take]
            view = view[take:]
            self.advance(take)

    # --- writing ----------------------------------------------------------------------
    def drain(self) -> None:
        """Start writing the buffer's whole blocks (all of it without direct I/O) on the
        helper thread and go on filling the other buffer, the partial block at its front.
        The write before is waited for first (its error raised here)."""
        whole = self._fill if self._direct is None else self._fill // BLOCK * BLOCK
        if not whole:
            return
        self._wait()
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="guideloom-shard-write")
        full, offset = self._view, self._base
        self._pending = self._pool.submit(self._write_out, full[:whole], offset)
        other = self._views[1] if full is self._views[0] else self._views[0]
        rest = self._fill - whole
        if rest:
            other[:rest] = full[whole:self._fill]
        self._view, self._base, self._fill = other, self._base + whole, rest

    def flush(self) -> None:
        """Put every appended byte into the file (the last partial block buffered, and kept
        in the buffer to be written directly with the block's later bytes)."""
        self.drain()
        self._wait()
        if self._fill:
            _write_all(self._fd, self._view[:self._fill], self._base)

    def appended_by_kernel(self, nbytes: int) -> None:
        """Count ``nbytes`` appended to the file behind the buffer's back (a kernel copy
        after :meth:`flush`); the buffer then holds the new partial block, read back."""
        end = self.position + nbytes
        self._base, self._fill = end // BLOCK * BLOCK, 0
        if self._direct is None:
            self._base = end
            return
        tail = end - self._base
        if tail:
            self._view[:tail] = pread(self._fd, tail, self._base)
            self._fill = tail

    def sync(self) -> None:
        """Flush and wait until the file is on disk."""
        self.flush()
        os.fsync(self._fd)

    def close(self) -> None:
        """Close the descriptors and free the buffers (nothing more is written; a write
        under way is waited for, its error dropped: :meth:`sync` is what reports)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)  # the write under way ends first
            self._pool, self._pending = None, None
        for fd in (self._direct, self._fd):
            if fd is not None:
                os.close(fd)
        self._direct = None
        self._fd = -1
        try:
            for view, buffer in zip(self._views, self._buffers, strict=True):
                view.release()
                buffer.close()
        except BufferError:  # an array packed into one is still referenced (a traceback's):
            pass  # the memory goes with the last reference

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` ran."""
        return self._fd < 0

    # --- inside -----------------------------------------------------------------------
    def _wait(self) -> None:
        """Wait for the write under way (raising its error)."""
        pending, self._pending = self._pending, None
        if pending is not None:
            pending.result()

    def _write_out(self, view: memoryview, offset: int) -> None:
        """Write ``view`` at ``offset`` (on the helper thread; one at a time)."""
        direct = self._direct
        if direct is not None:
            try:
                _write_all(direct, view, offset)
                return
            except OSError as exc:  # opened, but refused at the first write
                if exc.errno != errno.EINVAL:
                    raise
                self._direct = None
                os.close(direct)
                self._no_direct(exc)
        _write_all(self._fd, view, offset)
        self._start_writeback(offset + len(view))

    def _start_writeback(self, end: int) -> None:
        """Buffered bytes: let the disk start on them while the writer goes on."""
        if end - self._durable_from < WRITEBACK_EVERY:
            return
        # Linux only; elsewhere the fsync does it all (typeshed's os stub has neither name)
        sync_file_range = getattr(os, "sync_file_range", None)
        write = getattr(os, "SYNC_FILE_RANGE_WRITE", None)
        if sync_file_range is not None and write is not None:
            sync_file_range(self._fd, self._durable_from, end - self._durable_from, write)
        self._durable_from = end

    def _no_direct(self, exc: OSError) -> None:
        logger.debug("O_DIRECT refused for %s (%s): buffered writes", self.path, exc)
        fallbacks.count("storage:o_direct_refused")


def _write_all(fd: int, view: memoryview, offset: int) -> None:
    """``pwrite`` all of ``view`` at ``offset`` (a short write goes on where it stopped)."""
    while len(view):
        done = pwrite(fd, view, offset)
        view, offset = view[done:], offset + done
