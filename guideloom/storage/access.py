"""One async core per storage reader, and how the sync readers run it.

Each reader (stream, stream-with-meta, document) is written once, as coroutines that read file
ranges through an :class:`Access`. The asyncio readers await the core with :data:`CONCURRENT`:
ranges go through :meth:`FileReader.areadinto` (a worker thread for local files, a
non-blocking request over HTTP) and several are awaited at once. The sync readers are façades
that run the same coroutine with :data:`BLOCKING`: ranges are read with the files' blocking
``readinto``/``read`` (keeping, for example, the HTTP read-ahead of sync reads) one after the
other, so the coroutine never suspends and :func:`run` takes it to its end with one
``send(None)``, with no event loop.

zarr-python runs its sync API by handing each coroutine to an event-loop thread
(``zarr.core.sync.sync``). Here the sync calls are window reads of a few microseconds, and a
hand-off to a loop thread costs about 25 µs each (measured on the 2-core build machine), so
:func:`run` drives the coroutine in the caller's thread instead; it refuses one that suspends.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Coroutine
from typing import Any, Protocol, TypeVar, cast

from guideloom.storage.types import FileReader

__all__ = ["BLOCKING", "CONCURRENT", "Access", "run"]

T = TypeVar("T")


class Access(Protocol):
    """How a reader's core reads byte ranges of its shard files."""

    def readinto(self, file: FileReader, offset: int, buffer: Any) -> Awaitable[None]:
        """Fill ``buffer`` with the bytes at ``offset`` of ``file`` (awaited; the blocking access
        has filled it before it returns)."""
        ...

    async def read(self, file: FileReader, offset: int, nbytes: int) -> bytes:
        """Return ``nbytes`` bytes at ``offset`` of ``file``."""

    async def gather(self, *reads: Awaitable[Any]) -> list[Any]:
        """Await ``reads`` (concurrently where the access allows) and return their results."""


class _Done(tuple[()]):
    """An awaitable that has completed: awaiting it returns ``None`` at once, in C (a tuple's
    iterator), so a blocking read costs no coroutine object."""

    __slots__ = ()
    __await__ = tuple.__iter__


# typeshed gives ``tuple.__iter__`` an Iterator, not the Generator ``Awaitable.__await__`` names;
# an empty tuple's iterator stops at once, which is all ``await`` asks of it
_DONE = cast("Awaitable[None]", _Done())


class _Blocking:
    """The files' blocking calls; ``gather`` awaits one read after the other."""

    def readinto(self, file: FileReader, offset: int, buffer: Any) -> Awaitable[None]:
        file.readinto(offset, buffer)
        return _DONE

    async def read(self, file: FileReader, offset: int, nbytes: int) -> bytes:
        return file.read(offset, nbytes)

    async def gather(self, *reads: Awaitable[Any]) -> list[Any]:
        results: list[Any] = []
        try:
            for read in reads:
                results.append(await read)
        finally:
            for read in reads[len(results) + 1 :]:  # never started: close without a warning
                if isinstance(read, Coroutine):
                    read.close()
        return results

    def __repr__(self) -> str:
        return "BLOCKING"


class _Concurrent:
    """``areadinto`` of the files; ``gather`` is :func:`asyncio.gather`."""

    async def readinto(self, file: FileReader, offset: int, buffer: Any) -> None:
        await file.areadinto(offset, buffer)

    async def read(self, file: FileReader, offset: int, nbytes: int) -> bytes:
        buffer = bytearray(nbytes)
        if nbytes:
            await file.areadinto(offset, buffer)
        return bytes(buffer)

    async def gather(self, *reads: Awaitable[Any]) -> list[Any]:
        return list(await asyncio.gather(*reads))

    def __repr__(self) -> str:
        return "CONCURRENT"


#: Blocking reads, in order: what the sync readers run their core with.
BLOCKING: Access = _Blocking()
#: Awaited reads, concurrent: what the asyncio readers run their core with.
CONCURRENT: Access = _Concurrent()


def run(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a reader core's ``coroutine`` (started with :data:`BLOCKING`) to its end; return
    its result.

    Raises:
        RuntimeError: The coroutine suspended (it awaited something that is not a blocking
            read); it is closed first.
    """
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError(
        f"{coroutine!r} suspended, but a sync storage reader runs its core without an event "
        "loop: a blocking read must complete without awaiting anything"
    )
