"""The transports remote reading goes through: HTTP ranges and S3, against real servers.

Servers (all on 127.0.0.1, started and stopped here): the test Dataverse server of
tests/dataverse_server.py serving a directory (with faults, latency and counters), Debian's nginx
and SeaweedFS's S3 gateway (tests/remote_servers.py, fixtures in conftest.py).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from guideloom.errors import RemoteReadError
from guideloom.net.fetch import Settings
from guideloom.read.byte_source import clear_source_cache, open_byte_source
from guideloom.read.fsspec_source import FsspecSource
from guideloom.read.http import HttpRangeSource, close_connections
from tests.dataverse_server import Faults, Release, ServedFile, serve
from tests.remote_servers import HOST, listening_addresses

SIZE = 3 * 1024 * 1024 + 17
FAST = Settings(timeout=0.5, retries=2, backoff=0.01, max_wait=0.05)
# ranges a zip/HDF5 reader asks for: the tail, a header, neighbours, overlaps, an empty one
RANGES = [(SIZE - 22, 22), (0, 30), (30, 100), (1000, 5000), (3000, 10), (2_000_000, 70_000),
          (SIZE - 1, 1), (5, 0), (1_500_000, 1)]


@pytest.fixture(scope="module")
def blob(tmp_path_factory) -> Path:
    """A directory holding ``data.bin``: SIZE random bytes."""
    root = tmp_path_factory.mktemp("static")
    (root / "data.bin").write_bytes(random.Random(21).randbytes(SIZE))
    return root


@pytest.fixture
def static(blob):
    """The test server serving ``blob`` at ``/`` with fresh faults; connections closed after."""
    with serve(faults=Faults(), static=blob) as server:
        server.data = (blob / "data.bin").read_bytes()
        server.file_url = f"{server.url}/data.bin"
        yield server
    close_connections()
    clear_source_cache()


def expected(data: bytes, ranges) -> list[bytes]:
    return [data[o:o + n] for o, n in ranges]


# -- nginx ---------------------------------------------------------------------------------

def test_http_and_fsspec_sources_read_nginx_ranges_equal_to_the_local_bytes(nginx_server, blob):
    data = (blob / "data.bin").read_bytes()
    (nginx_server.root / "data.bin").write_bytes(data)
    url = f"{nginx_server.url}/data.bin"
    src = open_byte_source(url)
    assert isinstance(src, HttpRangeSource)
    assert open_byte_source(url) is src  # one source per URL and process
    assert src.size() == SIZE
    assert src.read_ranges(RANGES) == expected(data, RANGES)
    assert src.read(SIZE - 22, 22) == data[-22:]
    assert HttpRangeSource(url).read_tail(22) == data[-22:]  # nginx answers suffix ranges
    fs_src = open_byte_source(url, block_size=0)  # storage options: fsspec's HTTP filesystem
    assert isinstance(fs_src, FsspecSource)
    assert fs_src.size() == SIZE
    assert fs_src.read_ranges(RANGES) == expected(data, RANGES)
    assert fs_src.read_tail(22) == data[-22:]
    with open_byte_source(blob / "data.bin") as local:  # the same calls on a local file
        assert local.read_ranges(RANGES) == expected(data, RANGES)
        assert local.read_tail(SIZE + 1) == data
    with pytest.raises(RemoteReadError, match=r"missing\.bin.*HTTP 404"):
        HttpRangeSource(f"{nginx_server.url}/missing.bin", settings=FAST).read(0, 10, sim_id=3)


def test_https_is_verified_and_read_once_the_certificate_is_trusted(nginx_server, blob,
                                                                    tmp_path):
    data = (blob / "data.bin").read_bytes()
    (nginx_server.root / "data.bin").write_bytes(data)
    url = f"{nginx_server.tls_url}/data.bin"
    start = time.monotonic()
    with pytest.raises(RemoteReadError, match=r"TLS certificate of 127\.0\.0\.1:\d+ is not "
                                              r"trusted.*SSL_CERT_FILE"):
        HttpRangeSource(url, settings=Settings(retries=3, backoff=1.0)).read(0, 10, sim_id=4)
    assert time.monotonic() - start < 1.0  # not retried: trust does not come with time
    script = ("import hashlib, sys\n"
              "from guideloom.read.byte_source import open_byte_source\n"
              "src = open_byte_source(sys.argv[1])\n"
              f"parts = src.read_ranges([(0, 100), ({SIZE // 2}, 5000), ({SIZE - 22}, 22)])\n"
              "print(src.size(), hashlib.sha256(b''.join(parts)).hexdigest())\n")
    env = {**os.environ, "SSL_CERT_FILE": str(nginx_server.ca_file),
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    out = subprocess.run([sys.executable, "-c", script, url], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    want = data[:100] + data[SIZE // 2:SIZE // 2 + 5000] + data[-22:]
    assert out.stdout.split() == [str(SIZE), hashlib.sha256(want).hexdigest()]


# -- the test server: counters, coalescing, keep-alive, concurrency -------------------------

def test_size_comes_from_the_first_content_range_and_costs_at_most_one_request(static):
    src = HttpRangeSource(static.file_url, settings=FAST)
    assert src.read(100, 10) == static.data[100:110]
    assert src.size() == SIZE
    assert static.counts.requests == {"/data.bin": 1}
    fresh = HttpRangeSource(static.file_url, settings=FAST)
    assert fresh.size() == SIZE
    assert static.counts.requests == {"/data.bin": 2}
    assert static.counts.bytes == {"/data.bin": 11}  # the 1-byte probe of the second source
    tail = HttpRangeSource(static.file_url, settings=FAST)
    assert tail.read_tail(22) == static.data[-22:]  # a zip's end record, with the size
    assert tail.size() == SIZE
    assert static.counts.requests == {"/data.bin": 3}
    assert tail.read_tail(SIZE + 100) == static.data  # more than there is: the whole file
    static.faults.script = ["ignore-range"]  # a server without suffix ranges: asked by offset
    no_suffix = HttpRangeSource(static.file_url, settings=FAST)
    assert no_suffix.read_tail(22) == static.data[-22:]
    assert no_suffix.size() == SIZE
    assert no_suffix.requests == 2
    static.faults.ignore_range = True  # size() from Content-Length at once, reads refused
    ignoring = HttpRangeSource(static.file_url, settings=FAST)
    assert ignoring.size() == SIZE
    assert ignoring.requests == 1
    with pytest.raises(RemoteReadError, match="ignores Range"):
        ignoring.read(0, 10)
    assert open_byte_source(static.file_url) is pickle.loads(pickle.dumps(
        open_byte_source(static.file_url)))  # a task's copy is this process's source


def test_coalescing_turns_many_nearby_ranges_into_one_request(static):
    src = HttpRangeSource(static.file_url, settings=FAST, size=SIZE)
    near = [(i * 1000, 100) for i in range(200)]  # 200 ranges, gaps < 64 KiB
    assert src.read_ranges(near) == expected(static.data, near)
    assert static.counts.total_requests() == 1
    assert static.counts.total_bytes() == 199 * 1000 + 100
    far = [(i * 200_000, 100) for i in range(10)]  # gaps > 64 KiB: one request each
    assert src.read_ranges(far) == expected(static.data, far)
    assert static.counts.total_requests() == 1 + 10
    assert src.requests == 11


def test_keep_alive_connections_are_reused_across_reads_and_sources(static):
    for i in range(30):
        src = HttpRangeSource(static.file_url, settings=FAST, size=SIZE)
        assert src.read(i * 7919, 64) == static.data[i * 7919:i * 7919 + 64]
    assert static.counts.total_requests() == 30
    assert static.counts.connections == 1


def test_concurrent_ranges_take_far_less_than_one_latency_each(static):
    latency = 0.1
    static.faults.latency = latency
    src = HttpRangeSource(static.file_url, settings=Settings(connections=16), size=SIZE)
    ranges = [(i * 150_000, 4096) for i in range(16)]
    start = time.monotonic()
    assert src.read_ranges(ranges) == expected(static.data, ranges)
    elapsed = time.monotonic() - start
    assert static.counts.total_requests() == 16
    assert elapsed < 5 * latency, f"16 ranges took {elapsed:.2f} s at {latency} s per request"
    one_by_one = HttpRangeSource(static.file_url, settings=Settings(connections=1), size=SIZE)
    start = time.monotonic()
    one_by_one.read_ranges(ranges)
    assert time.monotonic() - start >= 16 * latency  # the server does delay each request


def test_the_bandwidth_cap_bounds_throughput(static):
    static.faults.bandwidth = 2_000_000  # bytes per second, for all connections together
    src = HttpRangeSource(static.file_url, settings=Settings(connections=4), size=SIZE)
    ranges = [(i * 250_000, 200_000) for i in range(4)]
    start = time.monotonic()
    assert src.read_ranges(ranges) == expected(static.data, ranges)
    assert time.monotonic() - start >= 0.35  # 800 kB at 2 MB/s: 0.4 s, parallel or not


# -- faults: retried, then a clear error in bounded time ------------------------------------

@pytest.mark.parametrize("fault", ["reset", "truncate", "bad-range", "ignore-range", "429",
                                   "503", "slow"])
def test_one_bad_answer_is_retried_and_the_bytes_are_right(static, fault):
    static.faults.script = [fault]
    src = HttpRangeSource(static.file_url, settings=FAST, size=SIZE)
    start = time.monotonic()
    assert src.read(200_000, 300_000) == static.data[200_000:500_000]
    assert time.monotonic() - start < 3
    assert static.counts.requests == {"/data.bin": 2}
    assert static.faults.script == []


ALWAYS = {
    "reset": {"reset_after": {"/data.bin": 1000}, "repeat": 0},
    "truncate": {"truncate_after": {"/data.bin": 1000}, "repeat": 0},
    "wrong Content-Range": {"bad_content_range": True},
    "ignores Range": {"ignore_range": True},
    "slow": {"stall": 2.0},
    "503": {"script": ["503"] * 10},
}
REASONS = {"reset": r"Connection|Reset|closed|ended", "truncate": r"ended after|closed",
           "wrong Content-Range": r"Content-Range 'bytes 200001-",
           "ignores Range": r"ignores Range", "slow": r"timed out|Timeout",
           "503": r"HTTP 503"}


@pytest.mark.parametrize("fault", list(ALWAYS))
def test_a_server_that_keeps_failing_gives_a_clear_error_in_bounded_time(static, fault):
    for key, value in ALWAYS[fault].items():
        setattr(static.faults, key, value)
    settings = Settings(timeout=0.4, retries=2, backoff=0.01, max_wait=0.05)
    src = HttpRangeSource(static.file_url, settings=settings, size=SIZE)
    start = time.monotonic()
    with pytest.raises(RemoteReadError) as info:
        src.read(200_000, 300_000, sim_id=17)
    elapsed = time.monotonic() - start
    message = str(info.value)
    assert static.file_url in message
    assert "bytes 200000-499999" in message
    assert "experiment 17" in message
    assert re.search(REASONS[fault], message), message
    if fault == "ignores Range":  # no retry changes what a server supports: asked twice
        assert "twice in a row" in message
        assert "answers HTTP Range requests" in message
        assert "after" not in message, message
        assert "reachable" not in message, message
        assert static.counts.requests["/data.bin"] == 2
    else:
        assert "after 3 attempts" in message
        assert static.counts.requests["/data.bin"] == 3  # bounded: the first try and 2 retries
    assert elapsed < 3 * 0.4 + 1.5, f"{fault}: gave up after {elapsed:.1f} s"
    err = pickle.loads(pickle.dumps(info.value))  # as a Dask worker sends it back
    assert (err.url, err.ranges, err.sim_id) == (static.file_url, [(200_000, 300_000)], 17)


def test_retry_after_is_honoured(static):
    static.faults.script = ["429"]
    static.faults.retry_after = "1"
    settings = Settings(timeout=0.5, retries=2, backoff=0.01, max_wait=5)  # caps Retry-After
    src = HttpRangeSource(static.file_url, settings=settings, size=SIZE)
    start = time.monotonic()
    assert src.read(0, 1000) == static.data[:1000]
    assert 0.95 <= time.monotonic() - start < 3


def test_a_range_past_the_end_fails_at_once_naming_the_size(static):
    src = HttpRangeSource(static.file_url, settings=FAST)
    with pytest.raises(RemoteReadError, match=rf"bytes {SIZE - 10}-{SIZE + 9} .*experiment 8: "
                                              rf"past the end of the file \({SIZE} bytes\)"):
        src.read(SIZE - 10, 20, sim_id=8)
    assert static.counts.total_requests() == 1
    with pytest.raises(RemoteReadError, match="past the end"):  # the size is known now
        src.read_ranges([(0, 10), (SIZE, 1)])
    assert static.counts.total_requests() == 1


def test_a_missing_file_fails_at_once_without_retries(static):
    url = f"{static.url}/nope.bin"
    with pytest.raises(RemoteReadError, match=r"nope\.bin.*HTTP 404.*check the URL"):
        HttpRangeSource(url, settings=FAST).read_ranges([(0, 10), (10, 10)], sim_id="s1")
    assert static.counts.requests == {"/nope.bin": 1}


# -- redirects and the token ---------------------------------------------------------------

TOKEN = "t0ken-only-for-the-api-host"


@pytest.fixture
def darus(blob):
    """The Dataverse API that sends file bytes to its store (another port: another host)."""
    data = (blob / "data.bin").read_bytes()
    release = Release([ServedFile(21, "data.bin", "h5", data)])
    with serve(release, Faults(redirect_over=0, require_token=TOKEN)) as server:
        server.data = data
        server.file_url = f"{server.url}/api/access/datafile/21"
        yield server
    close_connections()
    clear_source_cache()


def test_redirects_are_followed_remembered_and_never_get_the_token(darus):
    src = open_byte_source(darus.file_url, token=TOKEN, settings=FAST)
    assert isinstance(src, HttpRangeSource)
    assert src.size() == SIZE
    assert src.resolved_url.startswith(darus.store_url)
    assert src.read_ranges(RANGES) == expected(darus.data, RANGES)
    log = darus.log
    api = [e for e in log if e.server == "api"]
    store = [e for e in log if e.server == "store"]
    assert len(api) == 1
    assert api[0].token
    assert api[0].status == 302
    assert store
    assert not any(e.token for e in store)
    assert {e.status for e in store} == {206}


def test_an_expired_redirect_target_is_resolved_again(darus):
    src = HttpRangeSource(darus.file_url, token=TOKEN, settings=FAST)
    assert src.read(0, 10) == darus.data[:10]
    darus.faults.script = ["403"]  # the store's (signed) URL expired
    assert src.read(50, 10) == darus.data[50:60]
    tail = [(e.server, e.status, e.token) for e in darus.log][-4:]
    assert tail == [("store", 206, False), ("store", 403, False), ("api", 302, True),
                    ("store", 206, False)]
    assert darus.counts.connections == 2  # one to each host: answers without bytes drained


def test_without_the_token_the_error_says_how_to_pass_it(darus):
    with pytest.raises(RemoteReadError, match=r"experiment 5: .*HTTP 401.*API token.*token="):
        HttpRangeSource(darus.file_url, settings=FAST).read(0, 10, sim_id=5)


# -- Dask workers reuse their sources and connections --------------------------------------

def test_dask_workers_reuse_connections_through_the_source_cache(static, dask_client):
    def _read_on_worker(url: str, offset: int) -> bytes:  # shipped by value to the workers
        from guideloom.read.byte_source import open_byte_source

        return open_byte_source(url).read(offset, 100)

    offsets = [i * 10_007 for i in range(40)]
    futures = [dask_client.submit(_read_on_worker, static.file_url, o, pure=False)
               for o in offsets]
    assert dask_client.gather(futures) == [static.data[o:o + 100] for o in offsets]
    assert static.counts.total_requests() == 40
    assert static.counts.connections <= 2  # one per single-threaded worker


# -- S3 (SeaweedFS) ------------------------------------------------------------------------

def test_s3_read_ranges_equal_the_local_bytes(seaweedfs_server, blob):
    import s3fs

    options = {"key": "any", "secret": "any",
               "client_kwargs": {"endpoint_url": seaweedfs_server.url}}
    fs = s3fs.S3FileSystem(**options)
    if not fs.exists("guideloom-test"):
        fs.mkdir("guideloom-test")
    data = (blob / "data.bin").read_bytes()
    fs.pipe("guideloom-test/h5/data.bin", data)
    src = open_byte_source("s3://guideloom-test/h5/data.bin", **options)
    assert isinstance(src, FsspecSource)
    assert src.size() == SIZE
    assert src.read_ranges(RANGES) == expected(data, RANGES)
    with pytest.raises(RemoteReadError, match=r"s3://guideloom-test/h5/gone\.bin.*experiment 9"):
        open_byte_source("s3://guideloom-test/h5/gone.bin", **options).read(0, 10, sim_id=9)


# -- the test server as a process (for benchmarks) ----------------------------------------

@pytest.fixture
def server_process(blob, tmp_path):
    """``python -m tests.dataverse_server --static blob --latency 0.05`` and its URLs."""
    import json

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    proc = subprocess.Popen([sys.executable, "-m", "tests.dataverse_server", "--static",
                             str(blob), "--latency", "0.05"], cwd=tmp_path, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    try:
        urls = json.loads(proc.stdout.readline())
        yield proc, urls
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        close_connections()


def test_the_server_process_reports_counts_and_takes_faults_while_running(server_process, blob):
    import json
    import urllib.request

    proc, urls = server_process
    data = (blob / "data.bin").read_bytes()

    def control(path: str):
        with urllib.request.urlopen(urls["url"] + path, timeout=10) as resp:
            return json.loads(resp.read())

    src = HttpRangeSource(urls["url"] + "/data.bin", settings=FAST, size=SIZE)
    start = time.monotonic()
    assert src.read(10, 20) == data[10:30]
    assert time.monotonic() - start >= 0.05  # the latency asked for on the command line
    assert control("/_control/counts?reset=1")["requests"] == {"/data.bin": 1}
    assert control("/_control/faults?script=truncate&latency=0")["script"] == ["truncate"]
    assert src.read(1000, 200_000) == data[1000:201_000]  # cut short once, then complete
    counts = control("/_control/counts")
    assert counts["requests"] == {"/data.bin": 2}
    assert 200_000 < counts["bytes"]["/data.bin"] < 2 * 200_000
    assert {ip for ip, _ in listening_addresses(proc.pid)} == {HOST}


# -- nothing listens beyond 127.0.0.1 ------------------------------------------------------

def test_every_started_server_listens_only_on_loopback(nginx_server, seaweedfs_server, static):
    for server in (nginx_server, seaweedfs_server):
        addresses = listening_addresses(server.pid)
        assert addresses, f"{server.name} listens on nothing"
        assert {ip for ip, _ in addresses} == {HOST}, (server.name, addresses)
        assert {port for _, port in addresses} >= set(server.ports[:1])
    for srv in static._servers:
        assert srv.server_address[0] == HOST
