"""GuideLoom 1.1's per-file reader objects over a guideloom read interface.

``SeekIO().sync_reader()`` returns ``functools.partial(SyncFile, interface)``: called with a
path, it gives a reader with ``open()``, ``filesize()``, ``read(offset, size) -> bytearray`` and
``close()``, as GuideLoom 1.1's backends do.
"""

from __future__ import annotations

import asyncio
from typing import Any

from guideloom.storage.abstract import IOAsyncReaderAbstract, IOSyncReaderAbstract

__all__ = ["AsyncFile", "SyncFile"]


def _check_offset(offset: int) -> None:
    if offset < 0:
        raise IndexError(f"cannot have negative offset: got {offset}")


class SyncFile(IOSyncReaderAbstract):
    """One file of a guideloom read interface, read the GuideLoom 1.1 way."""

    def __init__(self, interface: Any, path: Any) -> None:
        self._interface = interface
        self._path = path
        self._file: Any = None

    def open(self) -> None:
        """Open the file (``FileNotFoundError`` if it does not exist)."""
        if self._file is None:
            self._file = self._interface.open(self._path)

    def _opened(self) -> Any:
        if self._file is None:
            raise OSError(f"{self._path} is not open: call open() first")
        return self._file

    def filesize(self) -> int:
        """Return the file size in bytes."""
        return self._opened().size()

    def read(self, offset: int, size: int) -> bytearray:
        """Return ``size`` bytes at ``offset``.

        Raises:
            IndexError: ``offset`` is negative or the file ends before ``size`` bytes.
        """
        _check_offset(offset)
        buffer = bytearray(size)
        if size:
            try:
                self._opened().readinto(offset, buffer)
            except EOFError as error:
                raise IndexError(f"the read is shorter than requested size ({error})") from None
        return buffer

    def close(self) -> None:
        """Close the file (again is a no-op)."""
        file, self._file = self._file, None
        if file is not None:
            file.close()

    def __enter__(self) -> SyncFile:
        self.open()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncFile(IOAsyncReaderAbstract):
    """The asyncio form of :class:`SyncFile`."""

    def __init__(self, interface: Any, path: Any) -> None:
        self._sync = SyncFile(interface, path)

    async def open(self) -> None:
        """Open the file."""
        await asyncio.to_thread(self._sync.open)

    async def filesize(self) -> int:
        """Return the file size in bytes."""
        return self._sync.filesize()

    async def read(self, offset: int, size: int) -> bytearray:
        """Return ``size`` bytes at ``offset`` (``IndexError`` as :meth:`SyncFile.read`)."""
        _check_offset(offset)
        buffer = bytearray(size)
        if size:
            try:
                await self._sync._opened().areadinto(offset, buffer)
            except EOFError as error:
                raise IndexError(f"the read is shorter than requested size ({error})") from None
        return buffer

    async def close(self) -> None:
        """Close the file."""
        self._sync.close()

    def close_sync(self) -> None:
        """Close the file without an event loop."""
        self._sync.close()

    async def __aenter__(self) -> AsyncFile:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
