"""Reading a partition's next local records on a helper thread while the current one is
transformed and written (runs on the workers, and in-process).

A small record costs about as much to read (open the member, parse the HDF5 metadata, inflate
its chunks) as the seed's transform and the writes cost together. Inflating and ``pread``
release the GIL, so with the reads on a second thread the transform of record ``k`` runs while
record ``k + 1`` is inflated, instead of one core doing both in turn.

Records come back in their order, each exactly as the reader's ``read`` returns it, its error
raised when that record is asked for; at most ``depth`` finished records wait.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from guideloom.sources import Location

DEPTH = 2  # finished records waiting for the partition loop


class Prefetch:
    """``read(loc, row, into)`` of ``reader`` for ``locations`` asked in their order, the next
    ones already read on a helper thread. Use as a context manager (or :meth:`close`).

    A record asked for out of order, or into buffers (``into``), is read directly.
    """

    def __init__(self, reader: Any, locations: Sequence[Location], rows: Sequence[Any],
                 depth: int = DEPTH):
        self.reader = reader
        self._expected = list(locations)
        self._pos = 0
        self._queue: queue.Queue[tuple[bool, Any]] = queue.Queue(max(1, depth))
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(list(zip(locations, rows, strict=True)),),
            name="guideloom-prefetch", daemon=True)
        self._thread.start()

    def __getattr__(self, name: str) -> Any:  # the reader's other attributes
        return getattr(self.reader, name)

    def read(self, loc: Location, row: Mapping[str, Any],
             into: Mapping[str, np.ndarray] | None = None) -> dict[str, Any]:
        """The record of ``loc`` (read ahead when it is the next one of the list)."""
        i = self._pos
        if into is not None or i >= len(self._expected) or self._expected[i] is not loc:
            return self.reader.read(loc, row, into)  # type: ignore[no-any-return]
        self._pos += 1
        ok, value = self._queue.get()
        if ok:
            return value  # type: ignore[no-any-return]
        raise value

    def close(self) -> None:
        """Stop reading ahead: the read under way finishes, the rest are not started."""
        self._stop.set()
        while True:  # a slot for a blocked put, which then sees the stop
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        self._thread.join()

    def __enter__(self) -> Prefetch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _run(self, items: list[tuple[Location, Any]]) -> None:
        for loc, row in items:
            if self._stop.is_set():
                return
            try:
                result: tuple[bool, Any] = (True, self.reader.read(loc, row))
            except BaseException as exc:  # noqa: BLE001 - raised where the record is asked for
                result = (False, exc)
            self._queue.put(result)
