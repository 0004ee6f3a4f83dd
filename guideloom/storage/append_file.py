"""A file written front to back through aligned buffers, their whole blocks with direct I/O.

A shard writer appends records in small pieces. Gathered in a page-aligned buffer of
:data:`CAPACITY` bytes, every whole 4 KiB block of it is written with ``O_DIRECT`` (a second
descriptor of the same file) by a helper thread while the writer fills the next buffer: the
bytes go from the buffer to the disk with no copy into the page cache and nothing left dirty,
so the fsync of the commit has only the last partial block and the metadata to write.
Measured here (160 MB over 4 files): direct writes about 1.5 GB/s, buffered writes and their
fsync 0.4 to 0.7 GB/s.

Up to :data:`IN_FLIGHT` direct writes of one file run at once (on as many helper threads),
and the writer never waits for a write while a buffer is free: a full buffer is handed to the
helpers and the writer goes on in another one, made (up to :data:`MAX_BUFFERS`) when every
buffer is still being written. A file whose writes keep up with its writer (many shards
filled in turn) keeps its two first buffers. The first direct write of a file runs alone (a
file system that accepts ``O_DIRECT`` at open and refuses it at the first write is found
with no other write under way); buffered writes run one at a time.

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
import threading
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from guideloom.runtime import fallbacks
from guideloom.runtime.os_support import O_DIRECT, pread, pwrite

logger = logging.getLogger(__name__)

BLOCK = 4096  # the alignment of direct writes: offset, length and memory
CAPACITY = 1 << 20  # bytes per buffer (1 MiB and 4 MiB direct writes ran at the same rate here)
IN_FLIGHT = 2  # direct writes of one file under way at once (helper threads per file)
MAX_BUFFERS = 4  # buffers of one file: one filling, the others written or waiting to be
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
        # page-aligned buffers (as direct writes need): one fills while the others are
        # written by the helper threads (a write releases the GIL); more are made on demand
        self._buffers = [mmap.mmap(-1, CAPACITY), mmap.mmap(-1, CAPACITY)]
        self._views = [memoryview(b) for b in self._buffers]
        self._view = self._views[0]
        self._free = [self._views[1]]  # buffers no write holds
        self._pool: ThreadPoolExecutor | None = None
        self._pending: deque[tuple[Future[None], memoryview]] = deque()  # oldest first
        self._proven = False  # a direct write of this file succeeded
        self._lock = threading.Lock()  # the direct descriptor's fallback
        self._refused: list[int] = []  # direct descriptors given up, closed with the file
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
        """Start writing the buffer's whole blocks (all of it without direct I/O) on a
        helper thread and go on filling a free buffer, the partial block at its front.
        A write is waited for (its error raised here) only when no buffer is free, when the
        file's first direct write is still under way, or before a buffered write."""
        whole = self._fill if self._direct is None else self._fill // BLOCK * BLOCK
        if not whole:
            return
        if self._direct is None or not self._proven:
            self._wait()  # one at a time until direct writes are known to work here
        if self._pool is None:
            self._pool = ThreadPoolExecutor(IN_FLIGHT, thread_name_prefix="guideloom-shard-write")
        full, offset = self._view, self._base
        other = self._free_buffer()
        rest = self._fill - whole
        if rest:
            other[:rest] = full[whole:self._fill]  # read beside the write: both only read it
        self._pending.append((self._pool.submit(self._write_out, full[:whole], offset), full))
        self._view, self._base, self._fill = other, self._base + whole, rest

    def _free_buffer(self) -> memoryview:
        """A buffer no write holds: a free one, a new one (up to :data:`MAX_BUFFERS`), or
        the oldest write's once it is done."""
        while self._pending and self._pending[0][0].done():
            self._retire()
        if self._free:
            return self._free.pop()
        if len(self._buffers) < MAX_BUFFERS:
            buffer = mmap.mmap(-1, CAPACITY)
            self._buffers.append(buffer)
            self._views.append(memoryview(buffer))
            return self._views[-1]
        self._retire()
        return self._free.pop()

    def _retire(self) -> None:
        """Wait for the oldest write under way (raising its error); its buffer is free."""
        future, view = self._pending.popleft()
        try:
            future.result()
        finally:
            self._free.append(view)

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
            self._pool.shutdown(wait=True)  # the writes under way end first
            self._pool = None
        self._pending.clear()
        for fd in (self._direct, *self._refused, self._fd):
            if fd is not None:
                os.close(fd)
        self._direct, self._refused = None, []
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
        """Wait for every write under way (raising the first error, after all ended)."""
        error: BaseException | None = None
        while self._pending:
            try:
                self._retire()
            except BaseException as exc:  # raised below, once every write ended
                error = error or exc
        if error is not None:
            raise error

    def _write_out(self, view: memoryview, offset: int) -> None:
        """Write ``view`` at ``offset`` (on a helper thread; direct writes of disjoint
        blocks may run at once, buffered ones run alone)."""
        direct = self._direct
        if direct is not None:
            try:
                _write_all(direct, view, offset)
                self._proven = True
                return
            except OSError as exc:  # opened, but refused at the first write
                if exc.errno != errno.EINVAL:
                    raise
                with self._lock:  # the descriptor stays open (closed with the file): a
                    if self._direct == direct:  # write beside this one may still use it
                        self._direct = None
                        self._refused.append(direct)
                        self._no_direct(exc)
        _write_all(self._fd, view, offset)
        with self._lock:
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
