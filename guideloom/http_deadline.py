"""Deadlines of one HTTP request made with ``urllib``: the answer in all, and the body's pace.

``urllib`` times each socket read only, so a server sending a byte just before each timeout
holds a request for ever. :func:`open_url` gives the whole answer (status line and headers,
redirects included) one deadline: a timer shuts the request's sockets down when it passes.
:class:`Pace` then makes the body keep a minimum rate over each window. Both raise
:class:`~guideloom.errors.TransientDownloadError`, which the callers' retries count as a
timeout (:func:`guideloom.http_fetch.with_retries`).
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
import urllib.request
from typing import Any

from guideloom.errors import TransientDownloadError


class _Watch:
    """The deadline of one request's answer (status line and headers): when it passes, the
    request's sockets are shut down, so a server trickling its headers cannot hold us."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.expired = False
        self._lock = threading.Lock()
        self._conns: list[http.client.HTTPConnection] = []
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def add(self, conn: http.client.HTTPConnection) -> None:
        with self._lock:
            self._conns.append(conn)
            if self.expired:
                _shut(conn)

    def _fire(self) -> None:
        with self._lock:
            self.expired = True
            for conn in self._conns:
                _shut(conn)

    def cancel(self) -> None:
        self._timer.cancel()


def _shut(conn: http.client.HTTPConnection) -> None:
    sock = conn.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


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
    late = TransientDownloadError(f"timed out: no complete answer within "
                                  f"{timeout:g} s (the server sends too slowly)")
    try:
        resp = opener.open(req, timeout=timeout)
    except (OSError, http.client.HTTPException):  # HTTPError too: its headers may be cut
        if watch.expired:
            raise late from None
        raise
    finally:
        watch.cancel()
    if watch.expired:  # cut while its headers came: what was parsed is not the answer
        resp.close()
        raise late
    return resp


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
