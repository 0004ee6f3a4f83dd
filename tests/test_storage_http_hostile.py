"""HTTPIO against hostile HTTP servers on 127.0.0.1 (issue 22, B22).

* A server that answers the 64 KiB footer request (or a later range read) with a body of
  hundreds of MiB, announced by ``Content-Length`` or streamed past the ``Content-Range`` it
  claims: the reader refuses it naming the URL and the sizes, and its peak memory (measured in
  a separate reader process) grows by a few MiB, not by the body.
* A server that accepts the connection and never answers: the read raises ``TimeoutError``
  naming the URL within the configured timeout, not after aiohttp's 300 s.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from functools import partial

import numpy as np
import pytest

from guideloom import StreamNumpyFormat, StreamStorage
from guideloom.storage.http import DEFAULT_TIMEOUT_S, HTTPIO
from tests.http_server import RangeHandler, Server, Stats

pytest.importorskip("aiohttp", reason="HTTPIO needs aiohttp (the http and test extras)")

DTYPE = np.dtype([("tokens", "<i4"), ("document_ids", "<u4")])
HUGE = 512 << 20  # what the hostile server streams (its Content-Length may claim 3 GiB)
CLAIMED = 3 << 30


class HostileHandler(RangeHandler):
    """Serves files honestly except where ``mode`` says to misbehave.

    Modes: ``huge-tail-length``/``huge-tail-stream`` (the suffix-range footer request),
    ``huge-range-length``/``huge-range-stream`` (any other range request), ``delay`` (every
    request waits for ``release`` before anything is answered).
    """

    mode = ""
    release: threading.Event

    def do_GET(self) -> None:
        header = self.headers.get("Range", "")
        if self.mode == "delay":
            self.release.wait()  # until the test ends: the client must give up first
            return
        suffix = header.startswith("bytes=-")
        if self.mode == "shifted" and header and not suffix:  # the right length, other bytes
            self.headers.replace_header("Range", _shifted(header))
            super().do_GET()
            return
        target = "tail" if suffix else "range" if header else ""
        if not self.mode.startswith(f"huge-{target}-") or not target:
            super().do_GET()
            return
        self.send_response(206)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Range", "bytes 0-65535/99999999")  # what it claims to send
        if self.mode.endswith("-length"):
            self.send_header("Content-Length", str(CLAIMED))
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        chunk = b"\0" * (1 << 20)
        try:
            for _ in range(HUGE // len(chunk)):  # lazily: 1 MiB at a time
                self.wfile.write(chunk)
        except OSError:  # the reader hung up, as it should
            pass


def _shifted(header: str) -> str:
    """``bytes=a-b`` moved 8 bytes back: what a server with an off-by-some bug sends."""
    first, last = (int(x) for x in header.removeprefix("bytes=").split("-"))
    return f"bytes={first - 8}-{last - 8}"


@pytest.fixture
def hostile(tmp_path):
    """A stream storage in ``tmp_path/www/tokens`` and a hostile server for it."""
    root = tmp_path / "www"
    storage = StreamStorage(root / "tokens", StreamNumpyFormat(DTYPE))
    with storage.sync_writer() as writer:
        n = 200_000  # ~1.6 MB of rows: the range reads leave the 64 KiB footer
        writer.append(0, {"tokens": np.arange(n, dtype=np.int32),
                          "document_ids": np.zeros(n, dtype=np.uint32)})
    release = threading.Event()
    handler_cls = type("Handler", (HostileHandler,), {"release": release})
    handler = partial(handler_cls, directory=str(root), stats=Stats())
    server = Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler_cls
    finally:
        release.set()
        server.shutdown()
        server.server_close()
        thread.join()


READER = textwrap.dedent("""
    import asyncio
    import json
    import resource
    import sys

    import numpy as np

    from guideloom import StreamNumpyFormat, StreamStorage
    from guideloom.storage.http import HTTPIO

    url, how = sys.argv[1], sys.argv[2]
    fmt = StreamNumpyFormat(np.dtype([("tokens", "<i4"), ("document_ids", "<u4")]))
    storage = StreamStorage(url, fmt, read_interface=HTTPIO(num_shards=1, readahead=0))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    error = None
    try:
        if how == "sync":
            storage.sync_reader().read(150_000, 1000)
        else:
            asyncio.run(storage.async_reader().read(150_000, 1000))
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    print(json.dumps({"error": error, "grown_kib": grown}))
""")


@pytest.mark.fast_case("huge-tail-length-sync")
@pytest.mark.parametrize(("mode", "how"), [
    ("huge-tail-length", "sync"), ("huge-tail-stream", "sync"),
    ("huge-range-length", "sync"), ("huge-range-stream", "sync"),
    ("huge-range-stream", "async"),
])
def test_oversized_answer_is_refused_with_bounded_memory(hostile, tmp_path, mode, how):
    base, handler = hostile
    handler.mode = mode
    url = f"{base}/tokens"
    done = subprocess.run([sys.executable, "-c", READER, url, how], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["grown_kib"] < 64 << 10, result  # < 64 MiB, not the 512 MiB body
    error = result["error"] or ""
    assert f"{url}/shard-000000.gls" in error, result
    assert "bytes" in error, result
    assert ("announced" in error or "sent more" in error or
                                 "refused unread" in error), result


def test_a_server_that_never_answers_times_out(hostile):
    base, handler = hostile
    handler.mode = "delay"
    url = f"{base}/tokens"
    assert HTTPIO().timeout == DEFAULT_TIMEOUT_S == 30.0  # finite by default
    storage = StreamStorage(url, StreamNumpyFormat(DTYPE),
                            read_interface=HTTPIO(num_shards=1, timeout=1.0))
    start = time.monotonic()
    with pytest.raises(TimeoutError, match=rf"{url}/shard-000000\.gls.*within 1 s"):
        storage.sync_reader()
    assert time.monotonic() - start < 15  # the 1 s timeout, not aiohttp's 300 s


def test_a_range_answer_for_other_bytes_is_refused(hostile):
    """206 with the right length but a Content-Range that starts elsewhere: not served."""
    base, handler = hostile
    handler.mode = "shifted"
    url = f"{base}/tokens"
    storage = StreamStorage(url, StreamNumpyFormat(DTYPE),
                            read_interface=HTTPIO(num_shards=1, readahead=0))
    reader = storage.sync_reader()
    with pytest.raises(OSError, match=rf"{url}/shard-000000\.gls: asked for bytes \d+-\d+ and "
                                      r"the server answered bytes \d+-\d+; refused unread"):
        reader.read(150_000, 1000)
