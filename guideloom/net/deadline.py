"""Deadlines of HTTP requests: the one place every HTTP client of guideloom takes them from.

A socket timeout times each read only, so a server sending a byte just before each timeout
holds a request for ever. Every request guideloom makes therefore has two deadlines:

* **The answer** (status line and headers, redirects included) must come within the timeout
  *in all* (:func:`answer_late` words the error).
* **The body** must keep a minimum rate: a body of known size gets :func:`body_budget` seconds
  in all (the timeout plus its bytes at :data:`RANGE_MIN_RATE`); a body of unknown size keeps
  up a rate over each window (:class:`Pace`).

The clients differ, the deadlines do not: :func:`open_url` gives ``urllib`` requests (the
download path, the Dataverse API, ``HEAD``) their answer deadline; :func:`watchdog` shuts down
the socket of an ``http.client`` exchange past its deadline (the remote read path,
:mod:`guideloom.read.http`); :func:`within` bounds an ``asyncio`` request (``HTTPIO``, on
aiohttp). The errors are :class:`~guideloom.errors.TransientDownloadError`, which the callers'
retries count as a timeout (:func:`guideloom.net.fetch.with_retries`), or ``TimeoutError``
for ``HTTPIO``; each caller names the URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import os
import socket
import threading
import time
import urllib.request
from collections.abc import Awaitable
from typing import Any, TypeVar

from guideloom.errors import DeadlineError, TransientDownloadError

RANGE_MIN_RATE = 4096  # bytes/s a body of known size must average (after the timeout)
BODY_MIN_RATE = 1024.0  # bytes/s a body of unknown size keeps up over each window (Pace)
WATCH_PERIOD = 0.25  # seconds between the watchdog's looks at the requests it watches

T = TypeVar("T")


def answer_late(seconds: float) -> str:
    """The reason of an answer (status line and headers) that did not come in time."""
    return f"timed out: no complete answer within {seconds:g} s (the server sends too slowly)"


def body_budget(timeout: float, size: int) -> float:
    """Seconds a body of ``size`` bytes may take in all: the timeout, plus the bytes at
    :data:`RANGE_MIN_RATE`."""
    return timeout + size / RANGE_MIN_RATE


def body_late(got: int | None, size: int, seconds: float) -> str:
    """The reason of a body of known size slower than :func:`body_budget` allows (``got``
    ``None``: not counted)."""
    part = "not all" if got is None else f"{got} of"
    return f"{part} {size} bytes in {seconds:.0f} s (slower than {RANGE_MIN_RATE} bytes/s)"


class Watchdog:
    """Shuts down the sockets of requests past their deadlines (one thread per process, waking
    every :data:`WATCH_PERIOD` seconds while a socket is watched): ``http.client`` reads a head
    or a body in one call, which a server sending a byte per socket timeout keeps alive."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._active: dict[int, list[Any]] = {}  # key -> [deadline, socket, fired]
        self._next = 0
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, sock: socket.socket | None, deadline: float) -> int | None:
        """Watch ``sock`` until :meth:`done` (``deadline`` on :func:`time.monotonic`);
        ``None`` (nothing watched) without a socket."""
        if sock is None:
            return None
        with self._lock:
            self._next += 1
            key = self._next
            self._active[key] = [deadline, sock, False]
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="guideloom-http-watchdog")
                self._thread.start()
        self._wake.set()
        return key

    def done(self, key: int | None) -> bool:
        """Stop watching; True when the deadline passed and the socket was shut down."""
        if key is None:
            return False
        with self._lock:
            entry = self._active.pop(key, None)
        return bool(entry and entry[2])

    def _run(self) -> None:
        while True:
            self._wake.wait()
            now = time.monotonic()
            with self._lock:
                if not self._active:
                    self._wake.clear()
                    continue
                late = [e for e in self._active.values() if not e[2] and e[0] <= now]
                for e in late:
                    e[2] = True
            for e in late:
                with contextlib.suppress(OSError):
                    e[1].shutdown(socket.SHUT_RDWR)
            time.sleep(WATCH_PERIOD)


_WATCHDOG = Watchdog()


def _after_fork() -> None:  # a forked child has no watchdog thread: it starts its own
    global _WATCHDOG
    _WATCHDOG = Watchdog()


os.register_at_fork(after_in_child=_after_fork)


def watchdog() -> Watchdog:
    """This process's :class:`Watchdog`."""
    return _WATCHDOG


class _Watch:
    """The deadline of one ``urllib`` request's answer: each connection it makes is watched by
    the :class:`Watchdog` until the answer came."""

    def __init__(self, seconds: float):
        self.deadline = time.monotonic() + seconds
        self._keys: list[int | None] = []
        self._dog = watchdog()
        self._lock = threading.Lock()

    def add(self, conn: http.client.HTTPConnection) -> None:
        key = self._dog.watch(conn.sock, self.deadline)
        with self._lock:
            self._keys.append(key)

    def cancel(self) -> bool:
        """Stop watching; whether the deadline passed while a connection was watched."""
        with self._lock:
            keys, self._keys = self._keys, []
        fired = [self._dog.done(k) for k in keys]
        return any(fired)


def _watched(cls: type[http.client.HTTPConnection], watch: _Watch) -> Any:
    """``cls`` whose connections ``watch`` may shut down once connected."""
    class Watched(cls):  # type: ignore[valid-type,misc]
        def connect(self) -> None:
            super().connect()
            watch.add(self)

    return Watched


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, watch: _Watch):
        super().__init__()
        self.watch = watch

    def do_open(self, http_class: Any, req: Any, **kwargs: Any) -> Any:
        return super().do_open(_watched(http_class, self.watch), req, **kwargs)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, watch: _Watch):
        super().__init__()
        self.watch = watch

    def do_open(self, http_class: Any, req: Any, **kwargs: Any) -> Any:
        return super().do_open(_watched(http_class, self.watch), req, **kwargs)


def open_url(req: urllib.request.Request, timeout: float) -> Any:
    """``urlopen(req)`` whose answer (status line and headers, after any redirects) must come
    within ``timeout`` seconds in all, not only within that per socket read.

    Raises:
        TransientDownloadError: The answer did not come in time (retried as a timeout is).
        urllib.error.HTTPError, OSError: As ``urlopen`` raises them.
    """
    watch = _Watch(timeout)
    opener = urllib.request.build_opener(_HTTPHandler(watch), _HTTPSHandler(watch))
    late = TransientDownloadError(answer_late(timeout))
    try:
        resp = opener.open(req, timeout=timeout)
    except (OSError, http.client.HTTPException):  # HTTPError too: its headers may be cut
        if watch.cancel():
            raise late from None
        raise
    if watch.cancel():  # cut while its headers came: what was parsed is not the answer
        resp.close()
        raise late
    return resp


async def within(awaitable: Awaitable[T], seconds: float) -> T:
    """``await awaitable``, cancelled after ``seconds`` in all (an ``asyncio`` client's
    deadline).

    Raises:
        DeadlineError: The deadline passed (the caller words it, naming the URL).
    """
    scope = asyncio.timeout(seconds)
    try:
        async with scope:
            return await awaitable
    except TimeoutError:
        if scope.expired():
            raise DeadlineError(answer_late(seconds)) from None
        raise  # the client's own (socket) timeout


class Pace:
    """A body must keep up ``rate`` bytes/s over each ``window`` seconds: a server trickling a
    byte a second cannot hold a download for hours."""

    def __init__(self, window: float, rate: float):
        self.window = window
        self.rate = rate
        self.start = time.monotonic()
        self.got = 0

    def add(self, n: int) -> None:
        """Count ``n`` bytes received.

        Raises:
            TransientDownloadError: The last window was slower than the minimum rate.
        """
        self.got += n
        now = time.monotonic()
        spent = now - self.start
        if spent >= self.window:
            if self.got < self.rate * spent:
                raise TransientDownloadError(
                    f"the body came at {self.got / spent:.0f} bytes/s for {spent:.0f} s, "
                    f"below the {self.rate:.0f} bytes/s guideloom waits for")
            self.start, self.got = now, 0
