"""The one file-object adaptor h5py's ``fileobj`` driver reads: a span of any byte source.

:class:`SpanFile` is ``size`` bytes from ``base`` of a :class:`~guideloom.read.byte_source.
ByteSource`, seekable and read-only: a loose file, a stored zip member read in place (local,
by ``pread`` on the archive's descriptor; remote, through the metadata-block wrapper of
:mod:`guideloom.read.wrappers`), or an inflated member held in memory (:class:`MemorySource`).
Closing it closes its source (which releases a leased archive descriptor).
"""

from __future__ import annotations

import io
import logging
from collections.abc import Sequence
from typing import Any

from guideloom.read.byte_source import ByteSource, LocalFileSource
from guideloom.read.handles import ArchiveLease
from guideloom.read.types import SourceDefaults

logger = logging.getLogger(__name__)

__all__ = ["ByteRangeFile", "MemoryFile", "MemorySource", "SeekableReader", "SpanFile"]


class SeekableReader(io.RawIOBase):
    """A read-only, seekable file object of ``_size`` bytes; subclasses supply ``readinto``."""

    _size: int
    _pos: int = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        if whence == io.SEEK_CUR:
            offset += self._pos
        elif whence == io.SEEK_END:
            offset += self._size
        self._pos = offset if offset > 0 else 0
        return self._pos


class SpanFile(SeekableReader):
    """``[base, base + size)`` of ``source`` as a file object; :meth:`close` closes the source
    when ``owns`` (default). Read through the source's ``readinto(buffer, offset)``: a local
    file straight into h5py's buffer (``pread``), any other through its ``read``."""

    def __init__(self, source: ByteSource, base: int, size: int, name: str = "", *,
                 owns: bool = True):
        super().__init__()
        self.source, self._base, self._size, self._pos = source, base, size, 0
        self.name = name or source.name
        self._owns = owns

    def close(self) -> None:
        if self.closed:
            return
        try:
            super().close()
        finally:
            if self._owns:
                self.source.close()

    def readinto(self, buffer: Any) -> int:
        want = min(len(buffer), self._size - self._pos)
        if want <= 0:
            return 0
        view = memoryview(buffer).cast("B")[:want]
        got = self.source.readinto(view, self._base + self._pos)
        self._pos += got
        return int(got)


class ByteRangeFile(SpanFile):
    """A read-only file object over ``[start, start + size)`` of an open descriptor (a
    :class:`SpanFile` of a :class:`~guideloom.read.byte_source.LocalFileSource` that does not
    own ``fd``). Closing it releases ``lease`` (the archive descriptor's use), if given."""

    def __init__(self, fd: int, start: int, size: int, name: str = "",
                 lease: ArchiveLease | None = None):
        super().__init__(LocalFileSource(fd=fd, owned=False, size=start + size, lease=lease,
                                         name=name), start, size, name)


class MemorySource(SourceDefaults):
    """Bytes in memory as a byte source (an inflated zip member); nothing to close."""

    high_latency = False

    def __init__(self, view: memoryview, name: str):
        self._view, self._name = view, name

    @property
    def name(self) -> str:
        return self._name

    def size(self) -> int:
        return len(self._view)

    def read(self, offset: int, size: int) -> bytes:
        if offset < 0 or offset + size > len(self._view):
            raise OSError(f"{self._name}: {size} bytes at offset {offset} are past its end")
        return bytes(self._view[offset:offset + size])

    def readinto(self, buffer: Any, offset: int) -> int:
        n = max(0, min(len(buffer), len(self._view) - offset))
        memoryview(buffer).cast("B")[:n] = self._view[offset:offset + n]
        return n

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        return [self.read(o, s) for o, s in ranges]

    read_many = read_ranges

    def close(self) -> None:
        """Nothing to release (the buffer goes with the last reference)."""


class MemoryFile(SpanFile):
    """A read-only, seekable file object over a buffer (no copy, unlike ``io.BytesIO``)."""

    def __init__(self, view: memoryview, name: str = ""):
        super().__init__(MemorySource(view, name), 0, len(view), name)
