"""The sync and asyncio façades every storage reader is made of.

A reader's work is done by its *core* (see :mod:`guideloom.storage.access`): an object that
opens and validates the shards, knows their sizes, and reads through coroutines. The two façades
here give the core the GuideLoom 1.1 reader interface: :class:`SyncReader` (``with``, blocking
calls) and :class:`AsyncReader` (``async with``, awaited calls). A storage's readers subclass
them and add only their read methods, each one line that runs the core.
"""

from __future__ import annotations

from typing import Any, Protocol, Self

from guideloom.storage.abstract import Closed

__all__ = ["AsyncClosing", "AsyncReader", "ReaderCore", "SyncClosing", "SyncReader"]


class ReaderCore(Protocol):
    """What the façades need of a core."""

    total: int

    @property
    def num_shards(self) -> int:
        """Number of shards."""

    def length(self, shard: Any) -> int:
        """Elements (documents) of ``shard``; ``IndexError`` outside ``range(num_shards)``."""

    def close(self) -> None:
        """Close the shard files."""


class _Sized:
    """Sizes of the storage, as both façades report them."""

    _core: ReaderCore

    def __init__(self, core: ReaderCore) -> None:
        self._core = core

    @property
    def num_shards(self) -> int:
        """Number of shards."""
        return self._core.num_shards

    @property
    def total_length(self) -> int:
        """Number of elements (documents for a document storage), GuideLoom 1.1's name."""
        return self._core.total

    def __len__(self) -> int:
        return self._core.total

    def length(self, shard: int) -> int:
        """Return the number of elements (documents) in ``shard``.

        Raises:
            IndexError: ``shard`` is not in ``range(num_shards)``.
        """
        return self._core.length(shard)


class SyncClosing:
    """``open()`` (a no-op), ``close()`` and ``with``, for blocking code."""

    def _close(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def open(self) -> None:
        """Nothing to do: the reader opened its storage when it was created (1.1 calls this)."""

    def close(self) -> None:
        """Close the shard files the reader opened."""
        self._close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClosing:
    """``await open()`` (a no-op), ``close()`` (optionally awaited), ``aclose()`` and
    ``async with``, for asyncio code."""

    def _close(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    async def open(self) -> None:
        """Nothing to do: the reader opened its storage when it was created."""

    def close(self) -> Closed:
        """Close the shard files (awaiting the result, as 1.1 code does, is optional)."""
        self._close()
        return Closed()

    async def aclose(self) -> None:
        """Close the shard files."""
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class SyncReader(_Sized, SyncClosing):
    """A reader for blocking code; a context manager that closes the shard files on exit."""

    def _close(self) -> None:
        self._core.close()


class AsyncReader(_Sized, AsyncClosing):
    """A reader for asyncio code; an async context manager that closes the files on exit."""

    def _close(self) -> None:
        self._core.close()
