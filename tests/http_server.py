"""A static HTTP/1.1 file server with Range support and request counters, on 127.0.0.1.

Tests start it in a thread (:func:`serve`); the benchmark runs it as a process
(``python -m tests.http_server ROOT`` prints the port). Keep-alive is on, so a client that reuses
connections shows fewer ``connections`` than ``requests``.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import sys
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")


class Stats:
    """What the server saw; ``fail`` maps a URL path to the status code to answer with."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.connections = 0
        self.requests = 0
        self.range_requests = 0
        self.fail: dict[str, int] = {}
        self.ignore_range = False


class RangeHandler(SimpleHTTPRequestHandler):
    """Serves files with ``Accept-Ranges: bytes``; answers ``Range: bytes=a-b`` with 206."""

    protocol_version = "HTTP/1.1"
    stats: Stats

    def __init__(self, *args, stats: Stats, **kwargs) -> None:
        self.stats = stats
        super().__init__(*args, **kwargs)

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes: without TCP_NODELAY, Nagle's algorithm
        # and the client's delayed ACK stall every keep-alive response by ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.stats.lock:
            self.stats.connections += 1

    def log_message(self, format: str, *args) -> None:
        pass

    def send_head(self):
        with self.stats.lock:
            self.stats.requests += 1
            status = self.stats.fail.get(self.path)
        if status is not None:
            self.send_error(status, "injected failure")
            return None
        path = self.translate_path(self.path)
        header = self.headers.get("Range")
        if header is None or os.path.isdir(path) or self.stats.ignore_range:
            return super().send_head()
        match = _RANGE.match(header.strip())
        try:
            handle = open(path, "rb")  # noqa: SIM115 - closed by copyfile's caller
        except OSError:
            self.send_error(404, "File not found")
            return None
        size = os.fstat(handle.fileno()).st_size
        if match is not None and not match.group(1) and match.group(2):  # suffix: last N bytes
            start, end = max(0, size - int(match.group(2))), size - 1
        elif match is not None and match.group(1):
            start = int(match.group(1))
            end = min(int(match.group(2)) if match.group(2) else size - 1, size - 1)
        else:
            start = end = -1
        if start < 0 or start >= size or end < start:
            handle.close()
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{size}")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        with self.stats.lock:
            self.stats.range_requests += 1
        handle.seek(start)
        self.send_response(206)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(end - start + 1))
        self.end_headers()
        return _Limited(handle, end - start + 1)

    def end_headers(self) -> None:
        if self.headers.get("Range") is None:
            self.send_header("Accept-Ranges", "bytes")
        super().end_headers()


class _Limited:
    """A file object that yields at most ``remaining`` bytes (what ``copyfile`` reads)."""

    def __init__(self, handle, remaining: int) -> None:
        self._handle = handle
        self._remaining = remaining

    def read(self, size: int = -1) -> bytes:
        if size < 0 or size > self._remaining:
            size = self._remaining
        data = self._handle.read(size)
        self._remaining -= len(data)
        return data

    def close(self) -> None:
        self._handle.close()


class Server(ThreadingHTTPServer):
    """A threading server whose listen backlog takes a burst of concurrent connections."""

    daemon_threads = True
    request_queue_size = 256

    def serve_forever(self, poll_interval: float = 0.05) -> None:
        """Serve until :meth:`shutdown`, which waits up to one ``poll_interval`` (50 ms here,
        the standard library's 0.5 s made every served test's teardown take ~0.5 s)."""
        super().serve_forever(poll_interval)


@contextlib.contextmanager
def serve(root: Path) -> Iterator[tuple[str, Stats]]:
    """Serve ``root`` on 127.0.0.1 (a free port) in a thread; yield ``(base_url, stats)``."""
    stats = Stats()
    handler = partial(RangeHandler, directory=str(root), stats=stats)
    server = Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", stats
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def main(root: str) -> None:
    """Serve ``root`` until killed; print the port on the first line of stdout."""
    handler = partial(RangeHandler, directory=root, stats=Stats())
    server = Server(("127.0.0.1", 0), handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1])
