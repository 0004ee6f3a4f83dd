"""A Dataverse-API test server on 127.0.0.1, with the faults a real repository shows.

Two HTTP/1.1 servers run in threads: the API server (``/api/datasets/:persistentId/versions``,
``/api/datasets/:persistentId/versions/{version}[/files]``, ``/api/access/datafile/{id}``) and
a "store" that files larger than ``Faults.redirect_over`` are redirected to, as DaRUS sends
large files to its object store. Both honour ``Range: bytes=N-`` (and ``N-M``) and log every
request (path, Range header, whether an ``X-Dataverse-key`` came, the status answered).

Faults (:class:`Faults`, changeable while the server runs): every Nth access request answered
503 or 429, a throttle, a connection reset or a truncated body after N bytes (once per file),
a wrong ``Content-Range``, ``Range`` ignored, a stall before the answer, damaged bytes (the
list keeps the MD5 of the good bytes), a required token, a body held after its first block
(``hold``), and ``ETag``/``Last-Modified`` headers (``validators=True``; then a stale
``If-Range`` gets the whole file, as RFC 9110 says); ``script`` lists faults for the
next file requests, one each ("reset", "truncate", "bad-range", "ignore-range", "slow", "429",
"503", "403", "404"). Shaping: ``latency`` seconds before every answer and a ``bandwidth`` cap
in bytes per second shared by all bodies (one link), so figures measured on loopback mean
something.

``static`` serves a plain directory at ``/`` (beside ``/api/``) with the same Range support,
faults and shaping, as a web server serves a download layout. :class:`Counts` (``server.counts``)
holds the requests and body bytes served per path and the connections accepted, for the tests
and the benchmarks.

As a process (``python -m tests.dataverse_server --static DIR --latency 0.02 --bandwidth 5e7``,
or ``--release DIR`` for a demo release) it prints one JSON line with ``url`` and ``store_url``
and serves until stopped (SIGTERM or SIGINT). Two control paths, neither
counted, shaped nor logged: ``GET /_control/counts`` (add ``?reset=1`` to start again from
zero) answers the counts as JSON; ``GET /_control/faults?latency=0.05&bandwidth=1e6&script=reset``
changes the faults.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import re
import socket
import struct
import threading
import time
import urllib.parse
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

DOI = "doi:10.18419/DARUS-5589"
_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")
BLOCK = 16 * 1024


@dataclass
class ServedFile:
    """One file of the served dataset version."""

    id: int
    name: str
    directory: str
    data: bytes
    description: str = ""
    modified: float = field(default_factory=time.time)  # its Last-Modified (seconds)

    @property
    def etag(self) -> str:
        """A strong ETag of the bytes (a new version of the file gets a new one)."""
        return f'"{hashlib.sha256(self.data).hexdigest()[:32]}"'

    @property
    def md5(self) -> str:
        return hashlib.md5(self.data, usedforsecurity=False).hexdigest()


@dataclass
class Faults:
    """What goes wrong; every field may be changed while the server runs."""

    fail_every: int = 0  # every Nth access request (1-based) gets 503, every other one 429
    throttle: float = 0.0  # seconds of sleep after each 16 KiB block of a body
    reset_after: dict[str, int] = field(default_factory=dict)  # name -> bytes, then RST (once)
    truncate_after: dict[str, int] = field(default_factory=dict)  # name -> bytes, then FIN
    bad_content_range: bool = False  # a 206 whose Content-Range starts one byte late
    ignore_range: bool = False  # always 200 with the whole file
    stall: float = 0.0  # seconds to wait before answering an access request
    stall_requests: int = 0  # how many access requests stall (0: all of them while stall > 0)
    damaged: set[str] = field(default_factory=set)  # served with one byte flipped
    redirect_over: int | None = None  # files larger than this are sent to the store
    require_token: str | None = None  # answer 401 without this X-Dataverse-key
    api_busy: int = 0  # the first N metadata (non-access) requests get 503
    repeat: int = 1  # how often reset_after / truncate_after fire per file (0: every time)
    script: list[str] = field(default_factory=list)  # one fault for each next file request
    retry_after: str = "0"  # the Retry-After header of a 429/503
    latency: float = 0.0  # seconds before answering any request (both servers)
    bandwidth: float | None = None  # bytes per second for all bodies together
    validators: bool = False  # send ETag and Last-Modified (and honour If-Range)
    hold: threading.Event | None = None  # after a body's first block, wait until this is set


class Counts:
    """Requests and body bytes served per URL path (query left off), connections accepted."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: dict[str, int] = {}
        self.bytes: dict[str, int] = {}
        self.connections = 0

    def request(self, path: str) -> None:
        with self.lock:
            self.requests[path] = self.requests.get(path, 0) + 1

    def sent(self, path: str, n: int) -> None:
        with self.lock:
            self.bytes[path] = self.bytes.get(path, 0) + n

    def connected(self) -> None:
        with self.lock:
            self.connections += 1

    def total_requests(self) -> int:
        with self.lock:
            return sum(self.requests.values())

    def total_bytes(self) -> int:
        with self.lock:
            return sum(self.bytes.values())

    def snapshot(self) -> dict[str, Any]:
        """A copy: ``{"requests": {path: n}, "bytes": {path: n}, "connections": n}``."""
        with self.lock:
            return {"requests": dict(self.requests), "bytes": dict(self.bytes),
                    "connections": self.connections}

    def reset(self) -> None:
        with self.lock:
            self.requests.clear()
            self.bytes.clear()
            self.connections = 0


@dataclass
class Release:
    """The dataset the server serves: files of version 2.0 (and an older 1.0)."""

    files: list[ServedFile]
    doi: str = DOI
    title: str = "RDDAC test release"
    older_missing: tuple[str, ...] = ("sample.zip",)  # not yet in version 1.0
    checksum_type: str = "MD5"  # or "SHA-1", as a Dataverse configured for it lists; "none":
    # the list gives only each file's size
    also: list[Release] = field(default_factory=list)  # datasets served beside (other DOIs)

    def by_id(self, fid: int) -> ServedFile | None:
        for release in (self, *self.also):
            found = next((f for f in release.files if f.id == fid), None)
            if found is not None:
                return found
        return None

    def named(self, doi: str | None) -> Release | None:
        """The dataset served under ``doi`` (this one or one of :attr:`also`)."""
        return next((r for r in (self, *self.also) if r.doi == doi), None)


def make_release(root: Path, n: int = 12) -> Release:
    """A release made by :func:`guideloom.demo.make_demo_data`, plus ``h5/sample.zip``.

    ``sample.zip`` holds the first two members of ``concave.zip`` (stored, as published).
    """
    from guideloom.demo import make_demo_data

    data = root / "release"
    make_demo_data(data, n=n)
    sample = root / "sample.zip"
    with zipfile.ZipFile(data / "concave.zip") as src, \
            zipfile.ZipFile(sample, "w", compression=zipfile.ZIP_STORED) as dst:
        for info in src.infolist()[:2]:
            dst.writestr(info.filename, src.read(info))
    files = [
        ServedFile(11, "metadata.json", "", (data / "metadata.json").read_bytes(),
                   "Croissant manifest"),
        ServedFile(12, "process_parameters.csv", "",
                   (data / "process_parameters.csv").read_bytes(), "index table"),
        ServedFile(21, "concave.zip", "h5", (data / "concave.zip").read_bytes()),
        ServedFile(22, "convex.zip", "h5", (data / "convex.zip").read_bytes()),
        ServedFile(23, "sample.zip", "h5", sample.read_bytes(), "sample bundle"),
    ]
    return Release(files, also=[sim_release()])


SIM_DOI = "doi:10.18419/DARUS-4801"


def sim_release(folder: Path | None = None) -> Release:
    """DDACS's simulations as ``guideloom download`` fetches them beside a full download:
    ``rddac.zip``, ``metadata.json`` and ``process_parameters.csv`` of ``folder`` (default: three
    placeholder files of a few bytes), served under DDACS's DOI (file ids 31-33)."""
    import io

    if folder is None:
        empty = io.BytesIO()
        zipfile.ZipFile(empty, "w").close()
        data = {"rddac.zip": empty.getvalue(), "metadata.json": b"{}",
                "process_parameters.csv": b"index,geometry\n"}
    else:
        data = {name: (folder / name).read_bytes()
                for name in ("rddac.zip", "metadata.json", "process_parameters.csv")}
    files = [ServedFile(31 + i, name, "", body) for i, (name, body) in enumerate(data.items())]
    return Release(files, doi=SIM_DOI, title="DDACS test release", older_missing=())


@dataclass
class LogEntry:
    server: str
    path: str
    range: str | None
    token: bool
    status: int = 0
    method: str = "GET"
    started: float = 0.0  # time.monotonic() when the request came (before the latency)
    finished: float | None = None  # ... when its answer was sent
    if_range: str | None = None  # the If-Range header of the request


class _State:
    def __init__(self, release: Release, faults: Faults, static: Path | None = None):
        self.release = release
        self.faults = faults
        self.static = static.resolve() if static is not None else None
        self.lock = threading.Lock()
        self.log: list[LogEntry] = []
        self.counts = Counts()
        self.access_requests = 0
        self.faulted: dict[tuple[str, str], int] = {}
        self.stalled = 0
        self.store_url = ""
        self.link_free = 0.0  # when the shared link is free again (bandwidth cap)

    def once(self, kind: str, name: str) -> bool:
        """True while this fault is still due for this file (``Faults.repeat`` times)."""
        with self.lock:
            done = self.faulted.get((kind, name), 0)
            if self.faults.repeat and done >= self.faults.repeat:
                return False
            self.faulted[(kind, name)] = done + 1
            return True

    def scripted(self) -> str | None:
        """The next fault of ``Faults.script`` (taken off the list), if any."""
        with self.lock:
            return self.faults.script.pop(0) if self.faults.script else None

    def pace(self, n: int) -> None:
        """Wait until ``n`` more bytes fit the bandwidth cap (all bodies share one link)."""
        bandwidth = self.faults.bandwidth
        if not bandwidth:
            return
        with self.lock:
            now = time.monotonic()
            start = max(now, self.link_free)
            self.link_free = start + n / bandwidth
            done = self.link_free
        if done > now:
            time.sleep(done - now)


def _file_json(f: ServedFile, checksum_type: str = "MD5") -> dict[str, Any]:
    sums: dict[str, Any]
    if checksum_type == "MD5":
        sums = {"md5": f.md5, "checksum": {"type": "MD5", "value": f.md5}}
    elif checksum_type == "none":
        sums = {}
    else:
        sums = {"checksum": {"type": checksum_type, "value": hashlib.new(
            checksum_type.replace("-", "").lower(), f.data).hexdigest()}}
    return {
        "label": f.name,
        "directoryLabel": f.directory or None,
        "description": f.description,
        "restricted": False,
        "dataFile": {"id": f.id, "filename": f.name, "filesize": len(f.data),
                     "contentType": "application/octet-stream", **sums},
    }


def _version_json(release: Release, number: int, state: str = "RELEASED") -> dict[str, Any]:
    files = release.files if number == 2 else [
        f for f in release.files if f.name not in release.older_missing]
    return {
        "versionNumber": number, "versionMinorNumber": 0, "versionState": state,
        "releaseTime": f"202{number + 4}-06-01T00:00:00Z",
        "lastUpdateTime": f"202{number + 4}-06-01T00:00:00Z",
        "license": {"name": "CC BY 4.0"},
        "metadataBlocks": {"citation": {"fields": [
            {"typeName": "title", "value": release.title}]}},
        "files": [_file_json(f, release.checksum_type) for f in files],
    }


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: _State
    role: str

    def log_message(self, format: str, *args: Any) -> None:
        pass

    head = False  # answering HEAD: headers only

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.state.counts.connected()

    def _log(self) -> LogEntry:
        entry = LogEntry(self.role, self.path, self.headers.get("Range"),
                         self.headers.get("X-Dataverse-key") is not None,
                         method="HEAD" if self.head else "GET", started=time.monotonic(),
                         if_range=self.headers.get("If-Range"))
        self._entry = entry
        with self.state.lock:
            self.state.log.append(entry)
        self.state.counts.request(urllib.parse.urlsplit(self.path).path)
        if self.state.faults.latency:
            time.sleep(self.state.faults.latency)
        return entry

    def _write(self, data: bytes | memoryview) -> None:
        if self.head:
            return
        self.state.pace(len(data))
        # counted before the write, so a client that has the bytes sees them counted
        self.state.counts.sent(urllib.parse.urlsplit(self.path).path, len(data))
        self.wfile.write(data)

    def do_HEAD(self) -> None:
        self.head = True
        try:
            self.do_GET()
        finally:
            self.head = False

    def _reply(self, entry: LogEntry, status: int, body: bytes = b"",
               headers: dict[str, str] | None = None) -> None:
        entry.status = status
        self.send_response(status)
        for k, v in {"Content-Length": str(len(body)), **(headers or {})}.items():
            self.send_header(k, v)
        self.end_headers()
        self._write(body)

    def _json(self, entry: LogEntry, doc: Any, status: int = 200) -> None:
        self._reply(entry, status, json.dumps(doc).encode(),
                    {"Content-Type": "application/json"})

    def _control(self, url: urllib.parse.SplitResult) -> None:
        query = urllib.parse.parse_qs(url.query)
        faults = self.state.faults
        if url.path == "/_control/counts":
            doc: Any = self.state.counts.snapshot()
            if query.get("reset") == ["1"]:
                self.state.counts.reset()
        elif url.path == "/_control/faults":
            numbers = {"latency": float, "bandwidth": float, "stall": float, "fail_every": int,
                       "repeat": int}
            for key, values in query.items():
                if key in numbers:
                    value = numbers[key](values[-1])
                    setattr(faults, key, None if key == "bandwidth" and not value else value)
                elif key == "script":
                    faults.script.extend(values)
                elif key in ("ignore_range", "bad_content_range"):
                    setattr(faults, key, values[-1] == "1")
            doc = {"latency": faults.latency, "bandwidth": faults.bandwidth,
                   "script": list(faults.script)}
        else:
            self.send_error(404)
            return
        body = json.dumps(doc).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    _entry: LogEntry | None = None  # the request being answered

    def do_GET(self) -> None:
        self._entry = None
        try:
            self._get()
        finally:
            if self._entry is not None:
                self._entry.finished = time.monotonic()

    def _get(self) -> None:
        control = urllib.parse.urlsplit(self.path)
        if control.path.startswith("/_control/"):
            return self._control(control)
        entry = self._log()
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        faults, release = self.state.faults, self.state.release
        if faults.require_token and self.headers.get("X-Dataverse-key") != faults.require_token \
                and self.role == "api":
            return self._json(entry, {"status": "ERROR", "message": "Bad api key"}, 401)
        if self.role == "store":
            m = re.fullmatch(r"/files/(\d+)", url.path)
            f = release.by_id(int(m[1])) if m else None
            return self._send_file(entry, f) if f else self._reply(entry, 404)
        if self.state.static is not None and not url.path.startswith("/api/"):
            return self._send_static(entry, urllib.parse.unquote(url.path))
        m = re.fullmatch(r"/api/datasets/:persistentId/versions(?:/([^/]+))?(/files)?", url.path)
        if m:
            with self.state.lock:
                busy = faults.api_busy > 0
                faults.api_busy -= busy
            if busy:
                return self._reply(entry, 503, b"busy", {"Retry-After": "0"})
            asked = release.named((query.get("persistentId") or [None])[0])
            if asked is None:
                return self._json(entry, {"status": "ERROR", "message": "no such dataset"}, 404)
            release = asked
            versions = {"2.0": 2, ":latest": 2, ":latest-published": 2, "1.0": 1, "3.0": 2}
            if m[1] is None:
                return self._json(entry, {"status": "OK", "data": [
                    _version_json(release, 2), _version_json(release, 1)]})
            if m[1] not in versions:
                return self._json(entry, {"status": "ERROR", "message": "no such version"}, 404)
            doc = _version_json(release, versions[m[1]])
            return self._json(entry, {"status": "OK", "data": doc["files"] if m[2] else doc})
        m = re.fullmatch(r"/api/access/datafile/(\d+)", url.path)
        f = release.by_id(int(m[1])) if m else None
        if f is None:
            return self._json(entry, {"status": "ERROR", "message": "not found"}, 404)
        with self.state.lock:
            self.state.access_requests += 1
            nth = self.state.access_requests
        if faults.fail_every and nth % faults.fail_every == 0:
            status = 503 if (nth // faults.fail_every) % 2 else 429
            return self._reply(entry, status, b"busy", {"Retry-After": faults.retry_after})
        if faults.redirect_over is not None and len(f.data) > faults.redirect_over:
            return self._reply(entry, 302, b"",
                               {"Location": f"{self.state.store_url}/files/{f.id}"})
        return self._send_file(entry, f)

    def _send_static(self, entry: LogEntry, path: str) -> None:
        root = self.state.static
        assert root is not None
        target = (root / path.lstrip("/")).resolve()
        if not target.is_relative_to(root) or not target.is_file():
            return self._reply(entry, 404, b"not found")
        def read(start: int, stop: int) -> bytes:  # only the bytes asked: files may be large
            with target.open("rb") as fh:
                fh.seek(start)
                return fh.read(stop - start)

        st = target.stat()
        etag = f'"{st.st_ino:x}-{st.st_size:x}-{st.st_mtime_ns:x}"'
        return self._send_data(entry, path, st.st_size, read, (etag, st.st_mtime))

    def _send_file(self, entry: LogEntry, f: ServedFile) -> None:
        data: bytes | bytearray = f.data
        if f.name in self.state.faults.damaged:
            data = bytearray(f.data)
            data[len(data) // 2] ^= 0xFF
        view = memoryview(data)
        return self._send_data(entry, f.name, len(data), lambda a, b: view[a:b],
                               (f.etag, f.modified))

    def _send_data(self, entry: LogEntry, name: str, total: int,
                   read: Callable[[int, int], bytes | memoryview],
                   version: tuple[str, float] | None = None) -> None:
        faults = self.state.faults
        scripted = self.state.scripted()
        if scripted in ("429", "503"):
            return self._reply(entry, int(scripted), b"busy", {"Retry-After": faults.retry_after})
        if scripted in ("403", "404"):  # e.g. a signed store URL that expired
            return self._reply(entry, int(scripted), b"expired")
        if faults.stall or scripted == "slow":
            with self.state.lock:
                self.state.stalled += 1
                due = not faults.stall_requests or self.state.stalled <= faults.stall_requests
            if due or scripted == "slow":
                time.sleep(faults.stall or 5.0)
        start, end = 0, total - 1
        m = _RANGE.match(self.headers.get("Range") or "")
        ranged = bool(m) and not faults.ignore_range and scripted != "ignore-range"
        validators: dict[str, str] = {}
        if version is not None and faults.validators:
            validators = {"ETag": version[0],
                          "Last-Modified": email.utils.formatdate(version[1], usegmt=True)}
        if_range = self.headers.get("If-Range")
        if ranged and if_range is not None and if_range not in (
                validators.get("ETag"), validators.get("Last-Modified")):
            ranged = False  # another version (or none to compare): the whole file, RFC 9110
        if ranged and not m[1]:  # a suffix: the last N bytes
            start = max(0, total - int(m[2] or 0))
        elif ranged:
            start = int(m[1])
            end = min(int(m[2]), end) if m[2] else end
        if ranged and (start > end or not (m[1] or m[2])):
            return self._reply(entry, 416, b"", {"Content-Range": f"bytes */{total}"})
        bad_range = faults.bad_content_range or scripted == "bad-range"
        shown = start + 1 if ranged and bad_range else start
        # a HEAD answers the headers only: the file's bytes are not read (an archive may be
        # hundreds of MB, which a real server does not read to answer a HEAD either)
        body = memoryview(b"" if self.head else read(start, end + 1))
        entry.status = 206 if ranged else 200
        self.send_response(entry.status)
        self.send_header("Content-Length", str(end + 1 - start if self.head else len(body)))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Type", "application/octet-stream")
        for key, value in validators.items():
            self.send_header(key, value)
        if ranged:
            self.send_header("Content-Range", f"bytes {shown}-{end}/{total}")
        self.end_headers()
        if self.head:
            return None
        cut = None
        if name in faults.reset_after and self.state.once("reset", name):
            cut = ("reset", faults.reset_after[name])
        elif name in faults.truncate_after and self.state.once("truncate", name):
            cut = ("truncate", faults.truncate_after[name])
        elif scripted in ("reset", "truncate"):
            cut = (scripted, len(body) // 2)
        sent = 0
        while sent < len(body):
            n = BLOCK if cut is None else max(0, min(BLOCK, cut[1] - sent))
            if n == 0:
                break
            self._write(body[sent:sent + n])
            sent += n
            if faults.hold is not None and sent < len(body):
                faults.hold.wait(60)  # the test lets the body go on
            if faults.throttle:
                time.sleep(faults.throttle)
        if cut is not None:
            self.close_connection = True
            if cut[0] == "reset":  # RST instead of FIN: the client sees ECONNRESET
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
            else:  # FIN after a short body: the client sees the body end early
                self.connection.shutdown(socket.SHUT_RDWR)
            self.connection.close()
        return None


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # listen backlog: 5 would drop concurrent connects (1 s SYN retry)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (timed out, killed) is part of the tests, not an error."""
        import sys

        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class DataverseServer:
    """The running pair of servers: ``url`` (API, and ``static`` at ``/``), ``store_url``,
    ``faults``, ``log``, ``counts``."""

    def __init__(self, release: Release | None = None, faults: Faults | None = None,
                 static: Path | None = None):
        self.state = _State(release or Release([]), faults or Faults(), static)
        self._servers: list[ThreadingHTTPServer] = []
        self._threads: list[threading.Thread] = []

    @property
    def faults(self) -> Faults:
        return self.state.faults

    @property
    def counts(self) -> Counts:
        return self.state.counts

    @property
    def log(self) -> list[LogEntry]:
        with self.state.lock:
            return list(self.state.log)

    def access_log(self) -> list[LogEntry]:
        """Requests for file bytes (API access endpoint and store)."""
        return [e for e in self.log if e.server == "store" or "/api/access/" in e.path]

    def _start(self, role: str) -> str:
        handler = type(f"_{role.title()}Handler", (_Handler,), {"state": self.state,
                                                              "role": role})
        server = _Server(("127.0.0.1", 0), handler)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                                  daemon=True)
        thread.start()
        self._servers.append(server)
        self._threads.append(thread)
        return f"http://127.0.0.1:{server.server_address[1]}"

    def start(self) -> DataverseServer:
        self.store_url = self.state.store_url = self._start("store")
        self.url = self._start("api")
        return self

    def stop(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()
        for thread in self._threads:
            thread.join(timeout=10)


@contextmanager
def serve(release: Release | None = None, faults: Faults | None = None,
          static: Path | None = None) -> Iterator[DataverseServer]:
    """Run a :class:`DataverseServer` for the ``with`` block."""
    server = DataverseServer(release, faults, static).start()
    try:
        yield server
    finally:
        server.stop()


def main(argv: list[str] | None = None) -> None:
    """Run the servers as a process (for benchmarks): print their URLs, serve until stopped."""
    import argparse
    import signal

    parser = argparse.ArgumentParser(prog="python -m tests.dataverse_server")
    parser.add_argument("--static", type=Path, help="a directory to serve at /")
    parser.add_argument("--release", type=Path,
                        help="make a demo release in this (empty) directory and serve its API")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--bandwidth", type=float, default=None, help="bytes per second, shared")
    parser.add_argument("--redirect-over", type=int, default=None,
                        help="send files larger than this many bytes to the store")
    parser.add_argument("--validators", action="store_true",
                        help="send ETag and Last-Modified, as nginx and S3 do")
    args = parser.parse_args(argv)
    release = make_release(args.release) if args.release else None
    faults = Faults(latency=args.latency, bandwidth=args.bandwidth,
                    redirect_over=args.redirect_over, validators=args.validators)
    server = DataverseServer(release, faults, args.static).start()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    print(json.dumps({"url": server.url, "store_url": server.store_url,
                      "doi": server.state.release.doi}), flush=True)
    try:
        stop.wait()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
