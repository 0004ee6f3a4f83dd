"""Reading the next records of a remote release while the current one is used.

Each remote record costs one or two round trips (local header and metadata, then chunks);
read one after another, a partition waits ``latency`` per request. :class:`ReadAhead` keeps up
to ``depth`` records of the list it was given in flight on a small thread pool, so the
latencies overlap. Records come back in the same order, each exactly as
:meth:`RecordReader.read <guideloom.read.records.RecordReader.read>` returns it (its errors raised
when that record is asked for). Local records are read directly. An export whose partitions run
one after another in one process (``client="sync"``) reads all of them through one
:class:`ReadAhead` (:func:`guideloom.export.partition.job_readahead`), so the next
partition's records are fetched while one is written.

``$GUIDELOOM_REMOTE_READAHEAD`` sets ``depth`` (default 8; 0 turns read-ahead off).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import numpy as np

from guideloom.read.byte_source import slow_location

if TYPE_CHECKING:
    from guideloom.read.records import OnField

DEPTH_ENV = "GUIDELOOM_REMOTE_READAHEAD"
DEFAULT_DEPTH = 8


def readahead_depth() -> int:
    """Records kept in flight (configuration ``remote_readahead``,
    ``$GUIDELOOM_REMOTE_READAHEAD``; default 8)."""
    from guideloom import config

    return int(config.get("remote_readahead"))


class ReadAhead:
    """``read(loc, row, into)`` of ``reader`` for ``locations`` asked in their order, the next
    ``depth`` remote ones already being fetched. Use as a context manager (or :meth:`close`)."""

    def __init__(self, reader: Any, locations: Sequence[Any], rows: Sequence[Any],
                 depth: int | None = None):
        self.reader = reader
        self.items = list(zip(locations, rows, strict=True))
        self.depth = readahead_depth() if depth is None else depth
        self._pos = 0
        self._next = 0
        self._futures: dict[int, Future[dict[str, Any]]] = {}
        active = self.depth > 0 and any(slow_location(loc) for loc, _ in self.items)
        self._pool = ThreadPoolExecutor(self.depth, thread_name_prefix="guideloom-readahead") \
            if active and len(self.items) > 1 else None

    def __getattr__(self, name: str) -> Any:  # the reader's other attributes
        return getattr(self.reader, name)

    def _fill(self, upto: int) -> None:
        assert self._pool is not None
        while self._next < min(len(self.items), upto):
            loc, row = self.items[self._next]
            if slow_location(loc):
                self._futures[self._next] = self._pool.submit(self._direct, loc, row)
            self._next += 1

    def _direct(self, loc: Any, row: Mapping[str, Any],
                into: Mapping[str, np.ndarray] | None = None,
                on_field: OnField | None = None) -> dict[str, Any]:
        """The reader's own read of ``loc`` (no read-ahead)."""
        record: dict[str, Any] = self.reader.read(loc, row, into, on_field)
        return record

    def read(self, loc: Any, row: Mapping[str, Any],
             into: Mapping[str, np.ndarray] | None = None,
             on_field: OnField | None = None) -> dict[str, Any]:
        """The record of ``loc`` (fetched ahead when it is the next one of the list; a
        record fetched ahead has arrays of its own: ``into`` and ``on_field`` are not used)."""
        i = self._pos
        if self._pool is None or i >= len(self.items) or self.items[i][0] is not loc:
            return self._direct(loc, row, into, on_field)
        self._pos += 1
        self._fill(i + 1 + self.depth)
        future = self._futures.pop(i, None)
        if future is None:
            return self._direct(loc, row, into, on_field)
        return future.result()

    def peek(self, loc: Any, row: Mapping[str, Any],
             into: Mapping[str, np.ndarray] | None = None) -> dict[str, Any]:
        """A copy of the record of ``loc`` when it is the next one of the list, which
        :meth:`read` still returns (so a schema probe does not fetch the first record twice);
        other locations are read directly. ``into`` is not used."""
        i = self._pos
        if self._pool is None or i >= len(self.items) or self.items[i][0] is not loc:
            return self._direct(loc, row)
        self._fill(i + self.depth)
        future = self._futures.get(i)
        if future is None:
            return self._direct(loc, row)
        return copy.deepcopy(future.result())  # the caller's transforms may change it

    def close(self) -> None:
        """Stop the reads not yet started and wait for the running ones."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._futures.clear()

    def __enter__(self) -> ReadAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Peeking:
    """``ahead`` for a schema probe: ``read`` is :meth:`ReadAhead.peek`."""

    def __init__(self, ahead: ReadAhead):
        self.ahead = ahead

    def __getattr__(self, name: str) -> Any:  # shapes() and the reader's other attributes
        return getattr(self.ahead, name)

    def read(self, loc: Any, row: Mapping[str, Any],
             into: Mapping[str, np.ndarray] | None = None,
             on_field: OnField | None = None) -> dict[str, Any]:
        return self.ahead.peek(loc, row, into)  # a probe's copy: nothing handed over
