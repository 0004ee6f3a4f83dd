"""File-reading backends for GuideLoom storages.

* :class:`SeekIO` (default): buffered-free ``seek`` + ``readinto``, one file handle per thread.
* :class:`MmapIO`: maps each shard; a read is one memory copy.
* :class:`PosixPreadIO`: ``os.preadv``; no shared file position, so threads never wait on a lock.

Each has ``is_supported()``. Add a backend (for example HTTP range reads) by subclassing
:class:`guideloom.storage.types.ReadInterface` and :class:`guideloom.storage.types.FileReader`.
"""

from __future__ import annotations

import mmap
import os
import threading
from typing import Any

from guideloom.storage.abstract import IOReaderAbstract
from guideloom.storage.types import FileReader, ReadInterface

__all__ = ["MmapIO", "PosixPreadIO", "SeekIO", "resolve_read_interface"]


def _short_read(path: str, offset: int, wanted: int, got: int) -> EOFError:
    return EOFError(f"{path}: wanted {wanted} bytes at offset {offset}, the file ends after {got}")


def _whole(file: FileReader, offset: int, nbytes: int, data: bytes) -> bytes:
    """``data`` if it is all ``nbytes``; else the range again through ``readinto`` (which reads
    on after a short read, or raises ``EOFError``)."""
    if len(data) == nbytes:
        return data
    buffer = bytearray(nbytes)
    file.readinto(offset, buffer)
    return bytes(buffer)


class _SeekFile(FileReader):
    def __init__(self, path: str) -> None:
        self._path = path
        first = open(path, "rb", buffering=0)  # noqa: SIM115 - closed in close()
        stat = os.fstat(first.fileno())
        self._identity = (stat.st_dev, stat.st_ino)
        self._size = stat.st_size
        self._handles = [first]
        self._lock = threading.Lock()
        self._local = threading.local()
        self._local.handle = first

    def _handle(self) -> Any:
        handle = getattr(self._local, "handle", None)
        if handle is None:
            handle = open(self._path, "rb", buffering=0)  # noqa: SIM115 - closed in close()
            stat = os.fstat(handle.fileno())
            if (stat.st_dev, stat.st_ino) != self._identity:
                handle.close()
                raise OSError(f"{self._path} was replaced while a reader had it open")
            with self._lock:
                self._handles.append(handle)
            self._local.handle = handle
        return handle

    def size(self) -> int:
        return self._size

    def readinto(self, offset: int, buffer: Any) -> None:
        handle = self._handle()
        handle.seek(offset)
        view = memoryview(buffer).cast("B")
        wanted = len(view)
        done = handle.readinto(view)
        while done < wanted:
            more = handle.readinto(view[done:])
            if not more:
                raise _short_read(self._path, offset, wanted, done)
            done += more

    def read(self, offset: int, nbytes: int) -> bytes:
        handle = self._handle()
        handle.seek(offset)
        return _whole(self, offset, nbytes, handle.read(nbytes))

    def close(self) -> None:
        with self._lock:
            handles, self._handles = self._handles, []
        for handle in handles:
            handle.close()
        self._local = threading.local()


class SeekIO(ReadInterface):
    """Reads with ``seek`` + ``readinto`` on unbuffered handles, one handle per thread."""

    def open(self, path: str | os.PathLike[str]) -> FileReader:
        """Open ``path``."""
        return _SeekFile(os.fspath(path))

    def __repr__(self) -> str:
        return "SeekIO()"


class _PreadFile(FileReader):
    def __init__(self, path: str, advice: bool = False) -> None:
        self._path = path
        self._fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            self._size = os.fstat(self._fd).st_size
            if advice:  # tell the kernel reads are random: no read-ahead
                os.posix_fadvise(self._fd, 0, 0, os.POSIX_FADV_RANDOM)
        except BaseException:
            os.close(self._fd)
            raise

    def size(self) -> int:
        return self._size

    def readinto(self, offset: int, buffer: Any) -> None:
        view = memoryview(buffer).cast("B")
        wanted = len(view)
        done = os.preadv(self._fd, [view], offset)
        while done < wanted:
            more = os.preadv(self._fd, [view[done:]], offset + done)
            if not more:
                raise _short_read(self._path, offset, wanted, done)
            done += more

    def read(self, offset: int, nbytes: int) -> bytes:
        return _whole(self, offset, nbytes, os.pread(self._fd, nbytes, offset))

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _has_fadvise() -> bool:
    return hasattr(os, "posix_fadvise") and hasattr(os, "POSIX_FADV_RANDOM")


class PosixPreadIO(ReadInterface):
    """Reads with ``os.preadv``/``os.pread``: thread-safe without locks (POSIX only).

    Args:
        advice: Call ``posix_fadvise(POSIX_FADV_RANDOM)`` on each file when it is opened (no
            kernel read-ahead; helps shuffled reads of large shards on some file systems).

    Raises:
        OSError: ``advice=True`` on a platform without ``posix_fadvise``.
    """

    def __init__(self, *, advice: bool = False) -> None:
        if advice and not _has_fadvise():
            raise OSError("PosixPreadIO(advice=True) needs os.posix_fadvise, which this platform "
                          "lacks; use PosixPreadIO() or another read interface")
        self.advice = bool(advice)

    @classmethod
    def is_supported(cls, *, advice: bool = False) -> bool:
        """Return whether ``os.preadv`` and ``os.pread`` (and with ``advice``, fadvise) exist."""
        ok = hasattr(os, "preadv") and hasattr(os, "pread")
        return ok and (_has_fadvise() or not advice)

    def open(self, path: str | os.PathLike[str]) -> FileReader:
        """Open ``path``."""
        if not self.is_supported():
            raise OSError("PosixPreadIO needs os.preadv, which this platform lacks")
        return _PreadFile(os.fspath(path), self.advice)

    def __repr__(self) -> str:
        return "PosixPreadIO(advice=True)" if self.advice else "PosixPreadIO()"


class _MmapFile(FileReader):
    def __init__(self, path: str) -> None:
        self._path = path
        with open(path, "rb") as handle:
            self._size = os.fstat(handle.fileno()).st_size
            if self._size == 0:
                self._map = None
                self._view = memoryview(b"")
            else:
                self._map = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
                self._view = memoryview(self._map)

    def size(self) -> int:
        return self._size

    def readinto(self, offset: int, buffer: Any) -> None:
        view = memoryview(buffer).cast("B")
        wanted = len(view)
        end = offset + wanted
        if end > self._size:
            raise _short_read(self._path, offset, wanted, max(0, self._size - offset))
        view[:] = self._view[offset:end]

    def read(self, offset: int, nbytes: int) -> bytes:
        end = offset + nbytes
        if end > self._size:
            raise _short_read(self._path, offset, nbytes, max(0, self._size - offset))
        return bytes(self._view[offset:end])

    async def areadinto(self, offset: int, buffer: Any) -> None:
        self.readinto(offset, buffer)

    def close(self) -> None:
        self._view.release()
        if self._map is not None:
            self._map.close()
            self._map = None


class MmapIO(ReadInterface):
    """Maps each shard file; reads are memory copies from the page cache."""

    @classmethod
    def is_supported(cls) -> bool:
        """Return whether :mod:`mmap` works here."""
        return hasattr(mmap, "mmap")

    def open(self, path: str | os.PathLike[str]) -> FileReader:
        """Open and map ``path``."""
        return _MmapFile(os.fspath(path))

    def __repr__(self) -> str:
        return "MmapIO()"


def resolve_read_interface(
    read_interface: ReadInterface | type[ReadInterface] | None,
) -> ReadInterface:
    """Return a :class:`ReadInterface` instance (``None`` means :class:`SeekIO`).

    A GuideLoom 1.1 backend (an instance of :class:`guideloom.types.IOReaderAbstract`) is
    wrapped in :class:`guideloom.storage.io_compat.LegacyReadInterface`.

    Raises:
        TypeError: ``read_interface`` is not a read interface.
        OSError: The interface is not supported on this platform.
    """
    if read_interface is None:
        return SeekIO()
    if isinstance(read_interface, type) and issubclass(read_interface, ReadInterface):
        read_interface = read_interface()
    if not isinstance(read_interface, ReadInterface) and isinstance(
        read_interface, IOReaderAbstract
    ):  # a backend written for GuideLoom 1.1
        from guideloom.storage.io_compat import LegacyReadInterface

        read_interface = LegacyReadInterface(read_interface)
    if not isinstance(read_interface, ReadInterface):
        raise TypeError(
            "read_interface must be a guideloom.storage.types.ReadInterface, "
            f"got {read_interface!r}"
        )
    if not read_interface.is_supported():
        raise OSError(f"{type(read_interface).__name__} is not supported on this platform")
    return read_interface


# SeekIO() etc. answer isinstance(..., IOReaderAbstract); ABCMeta.register is typed for concrete
# classes only (python/mypy#4717), and ReadInterface is abstract
IOReaderAbstract.register(ReadInterface)  # type: ignore[type-abstract]
