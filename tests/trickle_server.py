"""A server on 127.0.0.1 that answers every request one byte at a time (tests of deadlines).

Each byte comes ``gap`` seconds after the one before, so every socket read ends well within any
timeout and the answer never does. ``head=True`` trickles the status line and headers; else
they come at once and the body is trickled. A ``Range: bytes=a-b`` (or ``bytes=-n``) request
is answered 206 with its ``Content-Range``, any other 200 with the whole (made-up) file.
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Callable
from typing import Any

SIZE = 100_000  # bytes of the file the server pretends to have (by default)


class TrickleServer:
    """Serves until :meth:`close`; ``url`` is its base URL, ``requests`` the request lines."""

    def __init__(self, head: bool, gap: float = 0.05, size: int = SIZE):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.head, self.gap, self.size = head, gap, size
        self.requests: list[str] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def __enter__(self) -> TrickleServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _serve(self) -> None:
        self.sock.settimeout(0.1)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            try:
                request = conn.recv(65536).decode("latin-1")
                self.requests.append(request.split("\r\n", 1)[0])
                head, length = _head(request, self.size)
                if not self.head:
                    conn.sendall(head)
                    if request.startswith("HEAD "):
                        return
                body = _padded(head) if self.head else b"x" * length
                for byte in body:
                    if self.stop.wait(self.gap):
                        return
                    conn.sendall(bytes([byte]))
            except OSError:
                return

    def close(self) -> None:
        self.stop.set()
        self.thread.join(timeout=10)
        self.sock.close()


def _head(request: str, size: int) -> tuple[bytes, int]:
    m = re.search(r"(?im)^range:\s*bytes=(\d*)-(\d*)\s*$", request)
    if m is None:
        first, last, status = 0, size - 1, "200 OK"
    else:
        first, last = (max(0, size - int(m[2])), size - 1) if not m[1] else \
            (int(m[1]), min(size - 1, int(m[2]) if m[2] else size - 1))
        status = "206 Partial Content"
    length = last - first + 1
    lines = [f"HTTP/1.1 {status}", f"Content-Length: {length}",
             "Content-Type: application/octet-stream"]
    if m is not None:
        lines.append(f"Content-Range: bytes {first}-{last}/{size}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode(), length


def _padded(head: bytes) -> bytes:
    """``head`` with a long header (legal, under http.client's 64 KiB a line): trickled, it
    lasts minutes."""
    return head[:-2] + b"X-Padding: " + b"p" * 8000 + b"\r\n\r\n"


def bounded(action: Callable[[], Any], seconds: float) -> tuple[BaseException | None, float]:
    """Run ``action`` on a thread; what it raised (``None``: nothing) and the seconds it took.
    Fails the test when it is still running after ``seconds`` (it is left to the daemon thread:
    a client without a deadline never ends)."""
    import time

    import pytest

    out: list[BaseException | None] = []

    def run() -> None:
        try:
            action()
            out.append(None)
        except BaseException as exc:
            out.append(exc)

    start = time.monotonic()
    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        pytest.fail(f"still waiting after {seconds:g} s: no deadline ended the request")
    return out[0], time.monotonic() - start
