"""What the operating system offers, and the fallback where it does not.

Linux has every call guideloom uses; macOS lacks ``posix_fallocate``, ``posix_fadvise`` and
``O_DIRECT``; Windows lacks ``fcntl``, ``os.pread`` and ``os.preadv`` too. Code that would call
one of them calls the function here instead, which uses the call where it exists and otherwise
does the same work another way (or, for hints such as read-ahead advice, nothing):

============================  ===========================================================
capability                    fallback
============================  ===========================================================
``os.preadv`` / ``os.pread``  ``os.pread``, else ``lseek`` + ``read`` under a lock
``os.pwrite``                 ``lseek`` + ``write`` under a lock
``os.copy_file_range``        ``pread`` + ``pwrite`` in blocks (also where a file system refuses)
``FICLONE`` (a reflink)       :func:`copy_range` (:func:`clone_file` falls back itself)
``O_DIRECT`` copies           ``copy_file_range`` (:func:`copy_direct` says it could not)
``os.posix_fallocate``        none: blocks are allocated as the rows are written
``os.posix_fadvise``          none (a hint)
``os.O_DIRECT``               ``0``: buffered writes
``fcntl.flock``               ``msvcrt.locking`` on Windows, else a ``<lock>.pid`` file
``renameat2(RENAME_EXCHANGE)``  none: :func:`exchange` says so, the caller renames twice
glibc's ``malloc_trim``       none: :func:`trim_heap` says so (freed pages stay with the
                              C allocator)
============================  ===========================================================

Capabilities are looked up once, when this module is imported.
"""

from __future__ import annotations

import contextlib
import errno
import os
import sys
import threading
from typing import Any

from guideloom.runtime import fallbacks

__all__ = [
    "HAS_FADVISE",
    "HAS_FALLOCATE",
    "HAS_PREAD",
    "HAS_PREADV",
    "LOCKING",
    "O_DIRECT",
    "advise",
    "allocate",
    "clone_file",
    "copy_direct",
    "copy_range",
    "exchange",
    "is_locked",
    "pread",
    "preadinto",
    "pwrite",
    "trim_heap",
    "try_lock",
    "unlock",
]


try:
    import fcntl as _fcntl
except ImportError:  # Windows
    _fcntl = None  # type: ignore[assignment]
_msvcrt: Any = None
if _fcntl is None:
    try:
        import msvcrt as _msvcrt  # type: ignore[no-redef]
    except ImportError:
        _msvcrt = None
_preadv = getattr(os, "preadv", None)
_pread = getattr(os, "pread", None)
_pwrite = getattr(os, "pwrite", None)
_fallocate = getattr(os, "posix_fallocate", None)
_fadvise = getattr(os, "posix_fadvise", None)

HAS_PREADV = _preadv is not None
HAS_PREAD = _pread is not None
HAS_FALLOCATE = _fallocate is not None
HAS_FADVISE = _fadvise is not None and hasattr(os, "POSIX_FADV_RANDOM")
#: ``os.O_DIRECT`` where the platform has it, else ``0`` (no direct I/O).
O_DIRECT: int = getattr(os, "O_DIRECT", 0)
#: How :func:`try_lock` locks: ``"flock"``, ``"msvcrt"`` or ``"pidfile"``.
LOCKING = "flock" if _fcntl is not None else "msvcrt" if _msvcrt is not None else "pidfile"

_LOCK_BYTE = 1 << 30  # msvcrt locks bytes (mandatorily): one far past what a lock file holds
_seek_lock = threading.Lock()  # the lseek fallback moves the descriptor's shared position


# --------------------------------------------------------------------------- positional reads
def preadinto(fd: int, buffer: Any, offset: int) -> int:
    """Read into ``buffer`` from ``offset`` of ``fd`` without moving its position (as far as
    the platform allows); return the bytes read (fewer at the end of the file)."""
    if _preadv is not None:
        return _preadv(fd, [buffer], offset)
    view = memoryview(buffer).cast("B")
    if _pread is not None:
        data = _pread(fd, len(view), offset)
        view[: len(data)] = data
        return len(data)
    with _seek_lock:
        os.lseek(fd, offset, os.SEEK_SET)
        done = 0
        while done < len(view):
            data = os.read(fd, len(view) - done)
            if not data:
                break
            view[done : done + len(data)] = data
            done += len(data)
        return done


def pread(fd: int, nbytes: int, offset: int) -> bytes:
    """``os.pread(fd, nbytes, offset)``, or its fallback (fewer bytes at the end of the file)."""
    if _pread is not None:
        return _pread(fd, nbytes, offset)
    buffer = bytearray(nbytes)
    return bytes(buffer[: preadinto(fd, buffer, offset)])


def pwrite(fd: int, data: Any, offset: int) -> int:
    """``os.pwrite(fd, data, offset)``, or ``lseek`` + ``write``; return the bytes written."""
    if _pwrite is not None:
        return _pwrite(fd, data, offset)
    with _seek_lock:
        os.lseek(fd, offset, os.SEEK_SET)
        return os.write(fd, data)


COPY_BLOCK_BYTES = 64 << 20  # bytes copied per step where the kernel cannot copy (bounded memory)
_copy_file_range = getattr(os, "copy_file_range", None)
_COPY_REFUSED = (errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP)


def copy_range(src_fd: int, dst_fd: int, size: int, src_offset: int, dst_offset: int,
               fallback: str = "os:copy_file_range_refused") -> None:
    """Copy ``size`` bytes between descriptors at the given offsets (neither descriptor's
    position moves): ``copy_file_range`` (in the kernel, extents shared where the file system
    can), else ``pread``/``pwrite`` in blocks where the platform or the file systems have
    none (counted as fallback ``fallback``, see :mod:`guideloom.runtime.fallbacks`).

    Raises:
        OSError: The copy failed, or the source ended early (``EIO``).
    """
    done = 0
    kernel = _copy_file_range is not None
    while done < size:
        if kernel:
            assert _copy_file_range is not None
            try:
                n = _copy_file_range(src_fd, dst_fd, size - done, src_offset + done,
                                     dst_offset + done)
            except OSError as exc:
                if exc.errno not in _COPY_REFUSED:
                    raise
                fallbacks.count(fallback)
                kernel = False
                continue
        else:
            block = pread(src_fd, min(COPY_BLOCK_BYTES, size - done), src_offset + done)
            n = pwrite(dst_fd, block, dst_offset + done) if block else 0
        if n == 0:
            raise OSError(errno.EIO, f"the source ended {size - done} bytes early")
        done += n


_FICLONE = 0x40049409  # linux/fs.h: _IOW(0x94, 9, int) (fcntl.FICLONE from Python 3.12)


def clone_file(src_fd: int, dst_fd: int, fallback: str = "os:ficlone_refused") -> bool:
    """Make the empty file ``dst_fd`` a copy of the whole file ``src_fd``: a reflink
    (``FICLONE``: extents shared, no byte copied) where the platform and file system have
    it, else :func:`copy_range` (counted as fallback ``fallback``). Return whether it was a
    reflink.

    Raises:
        OSError: The copy failed.
    """
    if _fcntl is not None and sys.platform.startswith("linux"):
        try:
            _fcntl.ioctl(dst_fd, getattr(_fcntl, "FICLONE", _FICLONE), src_fd)
            return True
        except OSError as exc:
            if exc.errno not in (*_COPY_REFUSED, errno.ENOTTY, errno.EBADF, errno.EPERM):
                raise
            fallbacks.count(fallback)
    copy_range(src_fd, dst_fd, os.fstat(src_fd).st_size, 0, 0)
    return False


DIRECT_COPY_BLOCK = 32 << 20  # bytes per step of a direct copy (measured here: 32 MiB steps
# copy a cold 3 GiB file at 809 MB/s, 8 MiB steps at 603 MB/s, copy_file_range at 142 MB/s)
_DIRECT_ALIGN = 4096


def copy_direct(src_path: str, dst_fd: int, size: int, src_offset: int,
                dst_offset: int) -> bool:
    """Copy ``size`` bytes from the file ``src_path`` into ``dst_fd`` (a descriptor opened with
    ``O_DIRECT``) with direct I/O on both sides: read and written in large aligned blocks,
    past the page cache (a copy of gigabytes through the cache runs at a fraction of the
    disk's rate, and evicts what training reads). ``False``, nothing copied, where it cannot
    be done: no ``O_DIRECT``, offsets or size not page-aligned, or the file system refuses
    direct I/O (counted as a fallback); the caller copies with :func:`copy_range` then.

    Raises:
        OSError: The copy failed, or the source ended early (``EIO``).
    """
    if not O_DIRECT or (src_offset | dst_offset | size) % _DIRECT_ALIGN:
        return False
    import mmap

    try:
        src_fd = os.open(src_path, os.O_RDONLY | O_DIRECT)
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
        fallbacks.count("os:direct_copy_refused")
        return False
    buf = mmap.mmap(-1, min(DIRECT_COPY_BLOCK, size) or _DIRECT_ALIGN)  # page-aligned
    try:
        view = memoryview(buf)
        done = 0
        while done < size:
            want = min(len(buf), size - done)
            try:
                n = preadinto(src_fd, view[:want], src_offset + done)
                if n == 0:
                    raise OSError(errno.EIO, f"{src_path} ended {size - done} bytes early")
                written = 0
                while written < n:
                    written += os.pwrite(dst_fd, view[written:n], dst_offset + done + written)
            except OSError as exc:
                if exc.errno != errno.EINVAL or done:
                    raise
                fallbacks.count("os:direct_copy_refused")  # the first step: nothing copied
                return False
            done += n
        return True
    finally:
        view.release()
        buf.close()
        os.close(src_fd)


# --------------------------------------------------------------------------- allocation, hints
_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100
_renameat2: Any = None
_libc: Any = None
if os.name == "posix":
    try:
        import ctypes

        _libc = ctypes.CDLL(None, use_errno=True)
        _renameat2 = getattr(_libc, "renameat2", None)  # glibc 2.28+, musl 1.2.3+
        if _renameat2 is not None:
            _renameat2.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                                   ctypes.c_uint)
            _renameat2.restype = ctypes.c_int
    except (OSError, AttributeError):  # no C library to ask
        _libc = _renameat2 = None


def exchange(a: str, b: str) -> bool:
    """Swap two existing paths in one atomic step (Linux ``renameat2`` with
    ``RENAME_EXCHANGE``): no moment where either name is missing. ``False`` where the platform
    or the file system cannot (counted as a fallback): the caller renames twice instead."""
    if _renameat2 is None:
        fallbacks.count("os:rename_exchange_missing")
        return False
    import ctypes

    if _renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EXDEV):
        fallbacks.count("os:rename_exchange_refused")
        return False
    raise OSError(err, f"cannot exchange {a} and {b}: {os.strerror(err)}")


def _glibc_trim() -> Any:
    """glibc's ``malloc_trim``, or ``None`` (another C library, or none to ask)."""
    try:
        glibc = os.confstr("CS_GNU_LIBC_VERSION") is not None
    except (AttributeError, ValueError, OSError):  # no confstr, or no such name here
        glibc = False
    return getattr(_libc, "malloc_trim", None) if glibc and _libc is not None else None


_malloc_trim = _glibc_trim()


def trim_heap() -> bool:
    """Give the pages of the C allocator's free heap memory back to the operating system
    (glibc's ``malloc_trim(0)``: free pages anywhere in the heap, not only at its top; a few
    milliseconds); whether it could (``False`` where the C library is not glibc)."""
    if _malloc_trim is None:
        return False
    _malloc_trim(0)
    return True


def allocate(fd: int, offset: int, length: int) -> bool:
    """Reserve the blocks of ``[offset, offset + length)``; return whether they were reserved
    (``False`` where the platform or the file system cannot; other errors raise)."""
    if _fallocate is None:
        return False
    try:
        _fallocate(fd, offset, length)
    except OSError as exc:
        if exc.errno in (errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
            return False
        raise
    return True


def advise(fd: int, offset: int, length: int, advice: str) -> bool:
    """``posix_fadvise`` with ``POSIX_FADV_<advice>`` (``"RANDOM"``, ``"DONTNEED"``...) where
    the platform has it; return whether the hint was given."""
    value = getattr(os, f"POSIX_FADV_{advice}", None)
    if _fadvise is None or value is None:
        return False
    _fadvise(fd, offset, length, value)
    return True


# --------------------------------------------------------------------------- advisory locks
def try_lock(fd: int, path: str, *, shared: bool = False) -> bool:
    """Lock the open file ``fd`` (at ``path``) without waiting; return whether it was locked.

    ``flock`` where there is ``fcntl``; ``msvcrt.locking`` of one byte past the file's contents
    on Windows (always exclusive); elsewhere ``<path>.pid`` created exclusively, naming this
    process (a file whose process has ended is taken over). The lock ends with :func:`unlock`,
    or when the process dies (with ``flock``/``msvcrt``).
    """
    if _fcntl is not None:
        try:
            _fcntl.flock(fd, (_fcntl.LOCK_SH if shared else _fcntl.LOCK_EX) | _fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True
    if _msvcrt is not None:
        return _msvcrt_locking(fd, _msvcrt.LK_NBLCK)
    return _pidfile_lock(path, shared)


def unlock(fd: int, path: str) -> None:
    """Release a lock taken by :func:`try_lock` (closing ``fd`` also does, but for a pid file)."""
    if _fcntl is not None:
        _fcntl.flock(fd, _fcntl.LOCK_UN)
    elif _msvcrt is not None:
        _msvcrt_locking(fd, _msvcrt.LK_UNLCK)
    elif _pidfile_owner(path) == os.getpid():
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{path}.pid")


def is_locked(fd: int, path: str) -> bool:
    """Whether another process holds the lock of ``fd`` (at ``path``) now."""
    if LOCKING == "pidfile":
        owner = _pidfile_owner(path)
        return owner is not None and owner != os.getpid() and _alive(owner)
    if not try_lock(fd, path, shared=True):
        return True
    unlock(fd, path)
    return False


def _msvcrt_locking(fd: int, mode: int) -> bool:
    """``msvcrt.locking`` of the lock byte; return whether it succeeded."""
    with _seek_lock:
        os.lseek(fd, _LOCK_BYTE, os.SEEK_SET)
        try:
            _msvcrt.locking(fd, mode, 1)
        except OSError:
            return False
    return True


def _pidfile_owner(path: str) -> int | None:
    try:
        with open(f"{path}.pid", encoding="ascii") as handle:
            return int(handle.read().strip() or 0) or None
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    import psutil

    return psutil.pid_exists(pid)


def _pidfile_lock(path: str, shared: bool) -> bool:
    owner = _pidfile_owner(path)
    if owner is not None and owner != os.getpid() and _alive(owner):
        return False
    if shared:
        return True  # nobody holds it; a shared "lock" of a pid file needs no file
    marker = f"{path}.pid"
    if owner is not None:  # its process ended: take the lock over
        with contextlib.suppress(FileNotFoundError):
            os.unlink(marker)
    try:
        fd = os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return False  # another process took it over first
    try:
        os.write(fd, str(os.getpid()).encode())
    finally:
        os.close(fd)
    return True
