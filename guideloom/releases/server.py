"""``guideloom serve-release DIR``: a release folder served as a Dataverse dataset on 127.0.0.1.

To rehearse the "From DaRUS" steps without the network: ``guideloom info``, ``download
--small``, a download stopped and resumed, ``run --data-dir doi:…`` all work against it with
``--server URL``. It answers the Dataverse API calls guideloom makes:

* ``GET /api/datasets/:persistentId/versions?persistentId=DOI``: one version, 2.0 (the one
  guideloom asks for by default);
* ``GET /api/datasets/:persistentId/versions/{2.0|:latest|:latest-published}[/files]``;
* ``GET``/``HEAD /api/access/datafile/{id}``: the bytes, with ``Range`` (206), ``ETag``,
  ``Last-Modified`` and ``If-Range`` as a web server answers them.

The files are every regular file of ``DIR`` and of ``DIR/h5`` (hidden and ``.part`` files
left out); zips and ``.h5`` files are listed in the folder ``h5``, as on DaRUS, so a download
writes the layout ``guideloom download`` writes. Ids are given in path order and each file's MD5
is listed (computed when the server starts). ``--rate`` slows the bodies down (bytes per
second) so a download can be stopped halfway and resumed. The server binds 127.0.0.1 only.
"""

from __future__ import annotations

import email.utils
import hashlib
import json
import logging
import re
import threading
import urllib.parse
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from guideloom.net.dataverse import RDDAC_DOI

logger = logging.getLogger(__name__)

VERSIONS = ("2.0", ":latest", ":latest-published")  # 2.0: the version guideloom reads
# The experiment ids of DaRUS' sample.zip (one experiment per category, 18 files): what
# `download --small` gives, and what rddac's tutorial and notebooks read (`by_sim_id(4500)`).
# The demo release holds them, so every documented command runs against it unchanged.
PUBLISHED_SAMPLE_IDS = (0, 500, 1002, 1500, 2000, 2500, 3000, 3500, 4000,
                        4500, 5000, 5500, 6000, 6500, 7000, 7500, 8000, 8500)
BLOCK = 64 * 1024
_RANGE = re.compile(r"bytes=(\d*)-(\d*)$")


@dataclass(frozen=True)
class ReleaseFile:
    """One served file: its id, name, folder label, path on disk, size, MD5 and mtime."""

    id: int
    name: str
    directory: str
    path: Path
    size: int
    md5: str
    mtime: float

    @property
    def etag(self) -> str:
        return f'"{self.md5}"'


def _md5(path: Path) -> str:
    h = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as fh:
        while block := fh.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def release_files(root: Path) -> list[ReleaseFile]:
    """The files of the release folder ``root`` (see the module's docstring).

    Raises:
        FileNotFoundError: ``root`` is not a folder, or holds no file.
    """
    if not root.is_dir():
        raise FileNotFoundError(f"{root}: no such release folder (guideloom serve-release "
                                "DIR --demo writes a demo release there)")
    found: list[tuple[str, Path]] = []
    for folder, label in ((root, ""), (root / "h5", "h5")):
        if not folder.is_dir():
            continue
        for path in sorted(folder.iterdir()):
            if path.name.startswith(".") or path.name.endswith(".part") \
                    or not path.is_file():
                continue
            found.append((label or ("h5" if path.suffix in (".zip", ".h5") else ""), path))
    if not found:
        raise FileNotFoundError(f"{root} holds no file to serve")
    files = []
    for i, (label, path) in enumerate(found, start=1):
        st = path.stat()
        files.append(ReleaseFile(i, path.name, label, path, st.st_size, _md5(path),
                                 st.st_mtime))
    names = [f"{f.directory}/{f.name}" for f in files]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"{root}: {', '.join(twice)} is both in the folder and in h5/; keep one")
    return files


def make_demo_release(root: Path, n: int = 12) -> Path:
    """A demo release in ``root``: :func:`guideloom.demo.make_demo_data` (zip layout) of the
    experiments ``0..n-1`` and :data:`PUBLISHED_SAMPLE_IDS`, plus ``sample.zip`` holding the
    sample's experiments (stored, as DaRUS' sample; copies of the geometry zips' members)."""
    from guideloom.demo import make_demo_data, member_name

    demo = make_demo_data(root, sim_ids=sorted(set(range(n)) | set(PUBLISHED_SAMPLE_IDS)))
    wanted = {member_name(i) for i in PUBLISHED_SAMPLE_IDS}
    members: dict[str, bytes] = {}
    for archive in ("concave.zip", "convex.zip"):
        with zipfile.ZipFile(root / archive) as src:
            members.update({i.filename: src.read(i) for i in src.infolist()
                            if i.filename in wanted})
    missing = sorted(wanted - set(members))
    if missing:  # make_demo_data wrote every id: a member missing is a bug, said as such
        raise RuntimeError(f"{root}: the demo zips lack the sample members {missing}")
    with zipfile.ZipFile(root / "sample.zip", "w", compression=zipfile.ZIP_STORED) as dst:
        for name in sorted(members, key=lambda m: int(Path(m).stem)):
            dst.writestr(name, members[name])
    logger.info("demo release in %s: %d experiments, %d in sample.zip", root, len(demo.ids),
                len(members))
    return root


def _file_json(f: ReleaseFile) -> dict[str, Any]:
    return {"label": f.name, "directoryLabel": f.directory or None, "restricted": False,
            "dataFile": {"id": f.id, "filename": f.name, "filesize": f.size,
                         "contentType": "application/octet-stream", "md5": f.md5,
                         "checksum": {"type": "MD5", "value": f.md5}}}


def _version_json(files: list[ReleaseFile], title: str) -> dict[str, Any]:
    when = email.utils.formatdate(max(f.mtime for f in files), usegmt=True)
    stamp = email.utils.parsedate_to_datetime(when).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"versionNumber": 2, "versionMinorNumber": 0, "versionState": "RELEASED",
            "releaseTime": stamp, "lastUpdateTime": stamp,
            "license": {"name": "as in the release folder"},
            "metadataBlocks": {"citation": {"fields": [{"typeName": "title",
                                                        "value": title}]}},
            "files": [_file_json(f) for f in files]}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        logger.debug("%s %s", self.address_string(), format % args)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def do_GET(self) -> None:
        self._answer(head=False)

    def _send(self, status: int, body: bytes, headers: dict[str, str], head: bool) -> None:
        self.send_response(status)
        for key, value in {"Content-Length": str(len(body)), **headers}.items():
            self.send_header(key, value)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _json(self, doc: Any, status: int = 200, head: bool = False) -> None:
        self._send(status, json.dumps(doc).encode(), {"Content-Type": "application/json"}, head)

    def _answer(self, head: bool) -> None:
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query)
        release = self.server.release
        m = re.fullmatch(r"/api/datasets/:persistentId/versions(?:/([^/]+))?(/files)?", url.path)
        if m:
            if query.get("persistentId") != [release.doi]:
                return self._json({"status": "ERROR", "message": "no such dataset"}, 404, head)
            doc = _version_json(release.files, release.title)
            if m[1] is None:
                return self._json({"status": "OK", "data": [doc]}, head=head)
            if m[1] not in VERSIONS:
                return self._json({"status": "ERROR", "message": f"no version {m[1]}; this "
                                   "server has 2.0"}, 404, head)
            return self._json({"status": "OK", "data": doc["files"] if m[2] else doc},
                              head=head)
        m = re.fullmatch(r"/api/access/datafile/(\d+)", url.path)
        f = next((f for f in release.files if m and f.id == int(m[1])), None)
        if f is None:
            return self._json({"status": "ERROR", "message": "not found"}, 404, head)
        self._file(f, head)
        return None

    def _file(self, f: ReleaseFile, head: bool) -> None:
        modified = email.utils.formatdate(f.mtime, usegmt=True)
        headers = {"Accept-Ranges": "bytes", "Content-Type": "application/octet-stream",
                   "ETag": f.etag, "Last-Modified": modified}
        start, end = 0, f.size - 1
        m = _RANGE.match(self.headers.get("Range") or "")
        if_range = self.headers.get("If-Range")
        ranged = bool(m) and (if_range is None or if_range in (f.etag, modified))
        if ranged and m:
            if not (m[1] or m[2]):
                ranged = False
            elif not m[1]:
                start = max(0, f.size - int(m[2]))
            else:
                start = int(m[1])
                end = min(int(m[2]), end) if m[2] else end
            if ranged and start > end:
                return self._send(416, b"", {"Content-Range": f"bytes */{f.size}"}, head)
        if ranged:
            headers["Content-Range"] = f"bytes {start}-{end}/{f.size}"
        self.send_response(206 if ranged else 200)
        for key, value in {"Content-Length": str(end + 1 - start), **headers}.items():
            self.send_header(key, value)
        self.end_headers()
        if not head:
            self._body(f.path, start, end + 1)
        return None

    def _body(self, path: Path, start: int, stop: int) -> None:
        rate = self.server.rate
        with path.open("rb") as fh:
            fh.seek(start)
            left = stop - start
            while left > 0:
                block = fh.read(min(BLOCK, left))
                if not block:
                    break
                try:
                    self.wfile.write(block)
                except (BrokenPipeError, ConnectionResetError):
                    return  # the client went away (a download stopped): part of a rehearsal
                left -= len(block)
                if rate:
                    self.server.stopped.wait(len(block) / rate)


@dataclass
class _Release:
    doi: str
    title: str
    files: list[ReleaseFile]


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    release: _Release
    rate: float | None
    stopped: threading.Event


class ReleaseServer:
    """The running server: ``url`` (``http://127.0.0.1:PORT``), ``doi``, ``files``."""

    def __init__(self, root: str | Path, *, doi: str = RDDAC_DOI, port: int = 0,
                 rate: float | None = None, title: str | None = None):
        root = Path(root)
        files = release_files(root)
        self.doi = doi
        self.files = files
        self._server = _Server(("127.0.0.1", port), _Handler)
        self._server.release = _Release(doi, title or f"release folder {root.resolve()}", files)
        self._server.rate = rate
        self._server.stopped = threading.Event()
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread: threading.Thread | None = None

    def start(self) -> ReleaseServer:
        """Serve in a thread (returns at once)."""
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.1}, daemon=True,
                                        name="guideloom-serve-release")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.stopped.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)


@contextmanager
def serve_release(root: str | Path, **kwargs: Any) -> Iterator[ReleaseServer]:
    """Run a :class:`ReleaseServer` of ``root`` for the ``with`` block."""
    server = ReleaseServer(root, **kwargs).start()
    try:
        yield server
    finally:
        server.stop()
