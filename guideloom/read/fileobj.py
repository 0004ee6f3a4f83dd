"""The one file-object adaptor h5py's ``fileobj`` driver reads: a span of any byte source.

:class:`SpanFile` is ``size`` bytes from ``base`` of a :class:`~guideloom.read.byte_source.
ByteSource`, seekable and read-only: a loose file, a stored zip member read in place (local,
by ``pread`` on the archive's descriptor; remote, through the metadata-block wrapper of
:mod:`guideloom.read.wrappers`), or bytes held in memory
(:class:`~guideloom.read.byte_source.MemorySource`: an inflated member, an input read once
for its content digest).
Closing it closes its source (which releases a leased archive descriptor).
"""

from __future__ import annotations

import io
import logging
from typing import Any

from guideloom.read.byte_source import ByteSource, LocalFileSource, MemorySource
from guideloom.read.handles import ArchiveLease

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


class MemoryFile(SpanFile):
    """A read-only, seekable file object over a buffer (no copy, unlike ``io.BytesIO``)."""

    def __init__(self, view: memoryview, name: str = ""):
        super().__init__(MemorySource(view, name), 0, len(view), name)
