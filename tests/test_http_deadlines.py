"""Every HTTP request of guideloom ends against a server that trickles (issue 30, C3/C4).

A server on 127.0.0.1 (tests/trickle_server.py) sends its answer one byte every 50 ms: each
socket read ends long before any timeout, the answer never. Each entry point that makes HTTP
requests -- the remote read path's ranges (guideloom.read.http), its ``HEAD`` of an archive
(guideloom.read.fetch), ``guideloom.load`` of a URL (the manifest), and ``StreamStorage`` over
``HTTPIO`` (aiohttp) -- must fail within its deadline (guideloom.net.deadline) with one error
naming the URL. ``guideloom info``/``download`` are tested in tests/test_download_attacks.py.
A server that ignores ``Range`` is not retried: the error says what it must support.
"""

from __future__ import annotations

import numpy as np
import pytest

import guideloom
from guideloom.errors import RemoteReadError
from guideloom.net.fetch import Settings
from guideloom.read.byte_source import clear_source_cache
from guideloom.read.http import HttpRangeSource, close_connections
from tests.dataverse_server import Faults, serve
from tests.trickle_server import TrickleServer, bounded

LIMIT = 40  # seconds any of these may take (a deadline of 1 s, retries 0, python's overhead)


@pytest.fixture(autouse=True)
def _fresh(monkeypatch, tmp_path):
    monkeypatch.setenv("GUIDELOOM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GUIDELOOM_HTTP_TIMEOUT", "1")
    monkeypatch.setenv("GUIDELOOM_HTTP_RETRIES", "0")
    clear_source_cache()
    yield
    close_connections()
    clear_source_cache()


def test_a_remote_range_read_ends_when_the_head_trickles():
    with TrickleServer(head=True) as server:
        url = f"{server.url}/concave.zip"
        src = HttpRangeSource(url, size=100_000, settings=Settings(timeout=1, retries=0))
        error, seconds = bounded(lambda: src.read(0, 10, sim_id=3), LIMIT)
    assert isinstance(error, RemoteReadError), error
    assert url in str(error)
    assert "experiment 3" in str(error)
    assert "no complete answer within 1 s" in str(error), error
    assert seconds < 10  # on main: the head's 8 kB at 20 bytes/s, then the body


def test_the_head_request_of_an_archive_ends_when_it_trickles():
    from guideloom.read.fetch import http_validator

    with TrickleServer(head=True) as server:
        url = f"{server.url}/concave.zip"
        error, seconds = bounded(lambda: http_validator(url), LIMIT)
    assert isinstance(error, RemoteReadError), error
    assert url in str(error), error
    assert "no complete answer within 1 s" in str(error), error
    assert seconds < 10


def test_loading_a_url_whose_head_trickles_ends_naming_the_manifest():
    with TrickleServer(head=True) as server:  # a trickled body: tests/test_remote_attacks.py
        error, seconds = bounded(lambda: guideloom.load(f"{server.url}/release"), LIMIT)
    assert isinstance(error, OSError), error
    message = str(error)
    assert f"{server.url}/release/metadata.json" in message, message
    assert "no complete answer within 1 s" in message, message
    assert seconds < 20  # on main: the head's 8 kB at 20 bytes/s, then the body


DTYPE = np.dtype([("tokens", "<i4"), ("document_ids", "<u4")])


@pytest.mark.parametrize("listed", [True, False])
@pytest.mark.parametrize("head", [True, False])
def test_stream_storage_over_httpio_ends_when_the_server_trickles(head, listed):
    pytest.importorskip("aiohttp", reason="HTTPIO needs aiohttp (the http and test extras)")
    from guideloom import StreamNumpyFormat, StreamStorage
    from guideloom.storage.http import HTTPIO

    with TrickleServer(head=head) as server:
        url = f"{server.url}/tokens"
        io = HTTPIO(timeout=2, tail=4096, num_shards=1 if listed else None)
        storage = StreamStorage(url, StreamNumpyFormat(DTYPE), read_interface=io)
        error, seconds = bounded(storage.sync_reader, LIMIT)
    assert isinstance(error, TimeoutError), error
    message = str(error)
    assert url in message, message
    if head:
        assert "no complete answer within 2 s" in message, message
    else:
        assert "bytes/s" in message, message
    assert seconds < 30  # on main: the 100 kB body at 20 bytes/s, over an hour


def test_a_server_that_ignores_range_fails_at_once_saying_what_it_must_support(tmp_path):
    (tmp_path / "data.bin").write_bytes(bytes(range(256)) * 4000)
    with serve(faults=Faults(ignore_range=True), static=tmp_path) as server:
        url = f"{server.url}/data.bin"
        src = HttpRangeSource(url, size=256_000, settings=Settings(timeout=2, retries=5,
                                                                   backoff=0.5))
        with pytest.raises(RemoteReadError) as info:
            src.read(1000, 5000)
        asked = server.counts.requests["/data.bin"]
    message = str(info.value)
    assert url in message, message
    assert "ignores Range" in message, message
    assert "answers HTTP Range requests (206 Partial Content" in message, message
    assert "attempts" not in message, message
    assert "reachable" not in message, message
    assert asked == 2  # one more at once (a cache filling itself may answer so), no retries


@pytest.mark.parametrize("value", ["-1", "0", "nan"])
def test_a_bad_http_timeout_is_refused_by_the_python_api_naming_the_variable(demo_zip,
                                                                             monkeypatch, value):
    from guideloom.errors import ConfigError

    monkeypatch.setenv("GUIDELOOM_HTTP_TIMEOUT", value)
    with serve(faults=Faults(), static=demo_zip) as server:
        with pytest.raises(ConfigError) as info:
            guideloom.load(server.url)
        asked = server.counts.total_requests()
    message = str(info.value)
    assert message.startswith(f"GUIDELOOM_HTTP_TIMEOUT={value!r} must be"), message
    assert "manifest" not in message
    assert asked == 0  # refused before anything was asked
