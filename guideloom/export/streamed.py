"""Each field of a record written on a helper thread as soon as it is decoded (runs on workers).

For partitions where no user code sees the arrays (no transforms) and the format writes a
record's fields apart (:attr:`~guideloom.formats.base.ExportFormat.writes_fields`): every field
has one reused buffer; the record reader hands each field over the moment it is decoded into
its buffer (``on_field``), and the helper thread writes it while the next field decodes. The
buffers are the ones the sink writes from, so nothing is copied between decode and write, and a
one-record partition overlaps its writes too (record-level overlap, :mod:`.overlap`, has
nothing to overlap there).

A buffer is handed out again (:meth:`StreamedFields.buffers`, a mapping whose lookups wait)
only once its last write has ended, so a field is never decoded into while it is written.
Decoding and ``pwrite`` both release the GIL. A record that fails after some of its fields
were written is :meth:`~StreamedFields.discard`-ed: its writes end and the sink forgets the
row (no checksum of a row that is never published).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from guideloom.formats.base import PartitionSink
from guideloom.runtime.buffers import give_back


class _Free(Mapping[str, np.ndarray]):
    """The buffers, each looked up only once its write in flight has ended."""

    def __init__(self, owner: StreamedFields):
        self._owner = owner

    def __getitem__(self, alias: str) -> np.ndarray:
        buf = self._owner.free[alias]
        self._owner.wait_for(alias)
        return buf

    def __iter__(self) -> Iterator[str]:
        return iter(self._owner.free)

    def __len__(self) -> int:
        return len(self._owner.free)


class StreamedFields:
    """Field-by-field writes into ``sink`` from one reused buffer per field.

    Args:
        sink: The partition's sink (its ``write`` copies what it is given and takes any subset
            of a record's fields; its ``discard`` forgets a row).
        buffers: One buffer per field (``{alias: array}``), decoded into again and again.

    A failed write's error is raised by the next call that waits for it, as the sink worded
    it (the npy sink names the experiment, the row and the file).
    """

    def __init__(self, sink: PartitionSink, buffers: Mapping[str, np.ndarray]):
        sink.write_apart()  # each write done when it returns: its error names its record
        self.sink = sink
        self.free = dict(buffers)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="guideloom-write")
        self._inflight: dict[str, Future[None]] = {}  # alias -> the write of its buffer
        self._row: int | None = None
        self._sim_id: Any = None
        self._sent: set[str] = set()  # fields of the current row already written
        self.busy_s = 0.0  # time spent in the sink's write, on the helper thread

    def buffers(self) -> Mapping[str, np.ndarray]:
        """The buffers to decode into: looking one up waits until its last write ended."""
        return _Free(self)

    def start(self, row: int, sim_id: Any) -> None:
        """A new record begins, for ``row`` of the output."""
        self._row, self._sim_id, self._sent = row, sim_id, set()

    def field(self, alias: str, value: np.ndarray) -> None:
        """``value`` is final (the reader will not write it again): write it now, on the
        helper thread, if it is this field's buffer."""
        if self._row is None or self.free.get(alias) is not value or alias in self._sent:
            return
        self._submit(alias, {alias: value})

    def write(self, row: int, sim_id: Any, arrays: Mapping[str, Any]) -> None:
        """The record is complete: write the fields not written yet (a value that is not its
        buffer, a field read by the fallback path)."""
        if row != self._row:
            self.start(row, sim_id)
        for alias, value in arrays.items():
            if alias not in self._sent:
                self._submit(alias, {alias: value})
        self._row = None

    def discard(self, row: int) -> None:
        """The record of ``row`` failed: let its writes end (their errors dropped; the
        record's own error is what gets reported), then have the sink forget the row."""
        self._settle(raise_errors=False)
        if self._sent:
            self.sink.discard(row)
        self._row, self._sent = None, set()

    def drain(self) -> None:
        """Wait for every write in flight (the first error is raised here), so that the
        caller may use the sink itself (an update carrying rows)."""
        self._settle(raise_errors=True)

    def close(self) -> int:
        """Finish the writes, then close the sink; return the bytes written. The buffers go
        back to this process's spares (the caller uses them no more)."""
        try:
            self._settle(raise_errors=True)
        finally:
            self._pool.shutdown(wait=True)
        self._give_back()
        return self.sink.close()

    def abort(self) -> None:
        """Let the running writes end (their errors dropped), then abort the sink."""
        self._settle(raise_errors=False)
        self._pool.shutdown(wait=True)
        self._give_back()
        self.sink.abort()

    def _give_back(self) -> None:
        """The buffers, no write in flight any more, to the next partition of this process."""
        free, self.free = self.free, {}
        give_back(free.values())

    def wait_for(self, alias: str) -> None:
        """Wait until the write of ``alias``'s buffer in flight (if any) has ended; its error
        is raised here."""
        inflight = self._inflight.pop(alias, None)
        if inflight is not None:
            inflight.result()

    def _submit(self, alias: str, arrays: dict[str, Any]) -> None:
        self.wait_for(alias)  # one write per buffer at a time
        assert self._row is not None
        self._inflight[alias] = self._pool.submit(self._timed_write, self._row, self._sim_id,
                                                  arrays)
        self._sent.add(alias)

    def _timed_write(self, row: int, sim_id: Any, arrays: Mapping[str, Any]) -> None:
        start = time.perf_counter()
        try:
            self.sink.write(row, sim_id, arrays)
        finally:
            self.busy_s += time.perf_counter() - start

    def _settle(self, raise_errors: bool) -> None:
        inflight, self._inflight = self._inflight, {}
        error: BaseException | None = None
        for fut in inflight.values():
            exc = fut.exception()  # waits
            if error is None:
                error = exc
        if raise_errors and error is not None:
            raise error
