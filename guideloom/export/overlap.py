"""Writing record ``k`` on a helper thread while record ``k+1`` is decoded (runs on workers).

Only for partitions where no user code sees the arrays (no transforms) and the sink has copied a
record when its ``write`` returns: records are then decoded into two alternating buffer sets,
and at most one write is in flight, so a buffer is never decoded into while it is written.
Decoding and ``pwrite`` both release the GIL, so the write of one record overlaps the decode of
the next instead of leaving a core idle.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from guideloom.formats.base import PartitionSink


class OverlappedWrites:
    """Double-buffered, one-write-ahead writes into ``sink``.

    Args:
        sink: The partition's sink (its ``write`` copies the arrays).
        buffer_sets: Two sets of decode buffers (``{alias: array}``), used in turn.
    """

    def __init__(self, sink: PartitionSink, buffer_sets: tuple[Mapping[str, np.ndarray], ...]):
        self.sink = sink
        self._sets = buffer_sets
        self._turn = 0
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="guideloom-write")
        self._inflight: Future[None] | None = None
        self.busy_s = 0.0  # time spent in the sink's write, on the helper thread

    def buffers(self) -> Mapping[str, np.ndarray]:
        """The buffers to decode the next record into (not the ones being written)."""
        return self._sets[self._turn]

    def write(self, row: int, sim_id: Any, arrays: Mapping[str, np.ndarray]) -> None:
        """Start writing ``arrays`` once the previous write has finished (its error is raised
        here); the next record then decodes into the other buffer set."""
        self._wait()
        self._inflight = self._pool.submit(self._timed_write, row, sim_id, arrays)
        self._turn = 1 - self._turn

    def drain(self) -> None:
        """Wait for the write in flight (its error is raised here), so that the caller may
        use the sink itself (an update carrying rows)."""
        self._wait()

    def close(self) -> int:
        """Finish the last write, then close the sink; return the bytes written."""
        try:
            self._wait()
        finally:
            self._pool.shutdown(wait=True)
        return self.sink.close()

    def abort(self) -> None:
        """Let a running write end (its error is dropped), then abort the sink."""
        inflight, self._inflight = self._inflight, None
        if inflight is not None:
            inflight.exception()  # waits; the partition's own error is what gets reported
        self._pool.shutdown(wait=True)
        self.sink.abort()

    def _timed_write(self, row: int, sim_id: Any, arrays: Mapping[str, np.ndarray]) -> None:
        start = time.perf_counter()
        try:
            self.sink.write(row, sim_id, arrays)
        finally:
            self.busy_s += time.perf_counter() - start

    def _wait(self) -> None:
        inflight, self._inflight = self._inflight, None
        if inflight is not None:
            inflight.result()
