"""Open zip archive descriptors kept across records and shared by the threads of a process.

A record of a zip member reads through a lease of its archive's descriptor
(:meth:`ArchiveHandles.lease`); the descriptor closes once it has left the cache and its last
lease is released, so replacing or evicting an archive never closes a file still being read.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from typing import Any

from guideloom.read.access import open_fd
from guideloom.runtime.caches import BoundedCache, cache

logger = logging.getLogger(__name__)


class _ArchiveFd:
    """One open archive descriptor and the open files reading through it: closed once it has
    left its cache (:meth:`retire`) and the last of them is done (:meth:`release`)."""

    __slots__ = ("_lock", "closed", "fd", "retired", "size", "users")

    def __init__(self, path: str) -> None:
        self.fd = open_fd(path)
        try:
            self.size = os.fstat(self.fd).st_size  # once per open, not per record
        except BaseException:
            os.close(self.fd)
            raise
        self._lock = threading.Lock()
        self.users = 0
        self.retired = self.closed = False

    def acquire(self) -> bool:
        """Count one more user; ``False`` when the descriptor has left its cache."""
        with self._lock:
            if self.retired:
                return False
            self.users += 1
            return True

    def release(self) -> None:
        """One user is done (the descriptor closes if it is retired and was the last)."""
        with self._lock:
            self.users -= 1
            last = self.retired and self.users <= 0 and not self.closed
            self.closed = self.closed or last
        if last:
            os.close(self.fd)

    def retire(self) -> None:
        """The descriptor left its cache: close it now, or when its last user is done."""
        with self._lock:
            self.retired = True
            now = self.users <= 0 and not self.closed
            self.closed = self.closed or now
        if now:
            os.close(self.fd)

    def forget_after_fork(self) -> None:
        """In a forked child: close this process's copy when no inherited file uses it (the
        parent's descriptor is its own and stays open)."""
        self._lock = threading.Lock()
        self.retire()


class ArchiveLease:
    """The use of one archive descriptor by one open file; :meth:`release` once (idempotent)."""

    __slots__ = ("_entry", "fd", "size")

    def __init__(self, entry: _ArchiveFd) -> None:
        self._entry: _ArchiveFd | None = entry
        self.fd = entry.fd
        self.size = entry.size  # the archive's size when its descriptor was opened

    def release(self) -> None:
        entry, self._entry = self._entry, None
        if entry is not None:
            entry.release()


class ArchiveHandles:
    """Open archive descriptors, kept across records and shared by threads of one process.

    At most ``GUIDELOOM_CACHE_ARCHIVE_FDS_ENTRIES`` (see :mod:`guideloom.runtime.caches`) stay open;
    the least recently used is closed once the files reading through it are closed.

    Args:
        private: A set of its own (the default), bounded as ``archive_fds``; ``False`` for the
            registered process-wide one (``handles.process_handles()``, which
            :func:`guideloom.clear_caches` empties).
    """

    def __init__(self, *, private: bool = True) -> None:
        make = cache if not private else _private_cache
        self._fds: BoundedCache[str, _ArchiveFd] = make(
            "archive_fds", close=_ArchiveFd.retire, fork=_ArchiveFd.forget_after_fork)

    def lease(self, path: str) -> ArchiveLease:
        """An open read-only descriptor for ``path``, kept open until the lease is released."""
        while True:
            entry = self._fds.get_or_create(path, lambda: _ArchiveFd(path))
            if entry.acquire():
                return ArchiveLease(entry)

    def fd(self, path: str) -> int:
        """An open read-only descriptor for ``path``, valid while it stays in the cache (use
        :meth:`lease` to keep it open for as long as it is read)."""
        lease = self.lease(path)
        lease.release()
        return lease.fd

    def retire(self, path: str) -> None:
        """Stop handing out the descriptor of ``path`` (the file was replaced); the next
        :meth:`lease` opens the new file. The old descriptor closes when the files still
        reading through it are closed."""
        self._fds.pop(path)

    def __len__(self) -> int:
        return len(self._fds)

    def close(self) -> None:
        """Close every descriptor (those still read through: when their files close)."""
        self._fds.clear()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


def _private_cache(name: str, **hooks: Any) -> BoundedCache[Any, Any]:
    return BoundedCache(name, **hooks)


_PROCESS_HANDLES = ArchiveHandles(private=False)


def process_handles() -> ArchiveHandles:
    """The process-wide archive descriptors (which :func:`guideloom.clear_caches` empties)."""
    return _PROCESS_HANDLES
