"""Sending a run's events to the Dask scheduler in order, without waiting for each one.

``Client.log_event`` returns once the scheduler has the event: a round trip per event, a
couple of dozen per export, each holding up the driver (and costing it more on a loaded
machine, where every wait gives the CPU away). :class:`EventSender` queues the events and
sends them one after the other from the client's event loop, so they arrive in the order they
happened; :meth:`EventSender.flush` waits (bounded) until the scheduler has them all, which a
run does once, when it ends, before its client may close.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
from typing import Any

from guideloom.runtime import faults

FLUSH_S = 5.0  # the longest a finished run waits for the scheduler to take its last events

__all__ = ["FLUSH_S", "EventSender"]

logger = logging.getLogger(__name__)


class EventSender:
    """Ordered, non-blocking ``log_event`` calls to ``client``'s scheduler.

    Args:
        client: A (synchronous) ``distributed.Client``.
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        self.failed = False
        self._queue: collections.deque[tuple[Any, dict[str, Any]]] = collections.deque()
        self._lock = threading.Lock()
        self._idle = threading.Event()
        self._idle.set()
        self._draining = False
        # held at a pause point, the run's events so far reach the scheduler first
        self._stop_flushing_at_pauses = faults.before_pause(self.flush)

    def close(self) -> None:
        """Stop flushing at pause points (the run is over)."""
        self._stop_flushing_at_pauses()

    def send(self, topic: Any, msg: dict[str, Any]) -> None:
        """Queue ``msg`` under ``topic`` (a name or a list of names); returns at once."""
        if self.failed:
            return
        with self._lock:
            self._queue.append((topic, msg))
            if self._draining:
                return
            self._draining = True
            self._idle.clear()
        try:
            loop = self.client.loop.asyncio_loop
        except AttributeError:  # no loop to send from: send here and wait
            self._drain_here()
            return
        drain = self._drain()
        try:
            asyncio.run_coroutine_threadsafe(drain, loop)
        except RuntimeError:  # the loop is closed (the client was): send here and fail
            drain.close()
            self._drain_here()

    def _next(self) -> tuple[Any, dict[str, Any]] | None:
        """The next queued event, or ``None`` (nothing left, or sending failed): idle then."""
        with self._lock:
            if not self._queue or self.failed:
                self._queue.clear()
                self._draining = False
                self._idle.set()
                return None
            return self._queue.popleft()

    async def _drain(self) -> None:
        while (item := self._next()) is not None:
            topic, msg = item
            try:
                await self.client.scheduler.log_event(topic=topic, msg=msg)
            except Exception as exc:
                logger.debug("guideloom: events no longer reach the scheduler: %s", exc)
                self.failed = True

    def _drain_here(self) -> None:
        while (item := self._next()) is not None:
            topic, msg = item
            try:
                self.client.log_event(topic, msg)
            except Exception:
                self.failed = True

    def flush(self, timeout: float = FLUSH_S) -> bool:
        """Wait until the scheduler has every queued event (at most ``timeout`` seconds);
        whether it has."""
        return self._idle.wait(timeout) and not self.failed
