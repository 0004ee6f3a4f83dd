"""Attacks on reading a release where it lives, and on the zip directory parser.

A hostile server (raw sockets on 127.0.0.1, or Debian's nginx serving hostile files), a hostile
release (a manifest, a central directory) and hostile archives on local disk: every read stays
in the directory the user named, in bounded memory and time, and fails with an error naming
the archive or the experiment.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

import guideloom
from guideloom.errors import CorruptDataError, GuideloomError, RemoteReadError
from guideloom.net.fetch import Settings
from guideloom.read.http import HttpRangeSource
from guideloom.streaming import iter_view
from tests.remote_servers import nginx_binary, start_nginx

_CENTRAL = struct.Struct("<4s4B4HL2L5H2L")


@contextmanager
def raw_server(handle) -> Iterator[int]:
    """A TCP server on 127.0.0.1 whose connections ``handle(sock, request)`` answers."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)  # the accept loop sees ``stop`` soon after the test ends
    stop = threading.Event()

    def serve(conn: socket.socket) -> None:
        with conn:
            with suppress(OSError):
                handle(conn, conn.recv(65536).decode("latin-1"))

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        listener.close()
        thread.join(5)


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def test_a_range_answer_without_length_that_never_ends_is_cut_at_the_range(tmp_path):
    """A 206 with the right Content-Range but no Content-Length, then bytes until the client
    hangs up: the reader read the whole stream into memory (300 MB for a 100-byte range per
    attempt; a server that never stops exhausts memory). It reads one byte past the range."""
    sent: list[int] = []

    def forever(conn: socket.socket, request: str) -> None:
        line = next(v for v in request.split("\r\n") if v.lower().startswith("range:"))
        first, last = line.split("=", 1)[1].split("-")
        conn.sendall(f"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {first}-{last}/"
                     "100000\r\nConnection: close\r\n\r\n".encode())
        total = 0
        while total < 400 << 20:  # 400 MB, as if forever
            conn.sendall(b"x" * (1 << 20))
            total += 1 << 20
            sent.append(total)

    before = _maxrss_mb()
    with raw_server(forever) as port:
        url = f"http://127.0.0.1:{port}/release/concave.zip"
        src = HttpRangeSource(url, size=100000, settings=Settings(retries=1, backoff=0.01,
                                                                  timeout=10))
        t0 = time.monotonic()
        with pytest.raises(RemoteReadError, match="more than the 100 bytes") as err:
            src.read(0, 100)
    assert url in str(err.value)
    assert time.monotonic() - t0 < 20
    assert _maxrss_mb() - before < 100, "the answer was read into memory"



def test_a_server_trickling_one_byte_at_a_time_times_out(tmp_path):
    """A 206 with the right headers whose body comes one byte every 0.2 s: each byte arrives
    within the socket timeout, so a 100-byte range took 20 s and a 64 KiB footer would take
    3.6 hours (per attempt). A range's body must average 4 KiB/s after the timeout."""
    def trickle(conn: socket.socket, request: str) -> None:
        line = next(v for v in request.split("\r\n") if v.lower().startswith("range:"))
        first, last = (int(v) for v in line.split("=", 1)[1].split("-"))
        conn.sendall(f"HTTP/1.1 206 Partial Content\r\nContent-Range: bytes {first}-{last}/"
                     f"100000\r\nContent-Length: {last - first + 1}\r\n\r\n".encode())
        for _ in range(last - first + 1):
            conn.sendall(b"x")
            time.sleep(0.2)

    with raw_server(trickle) as port:
        url = f"http://127.0.0.1:{port}/release/concave.zip"
        src = HttpRangeSource(url, size=100000, settings=Settings(retries=1, backoff=0.01,
                                                                  timeout=1))
        t0 = time.monotonic()
        with pytest.raises(RemoteReadError, match="slower than") as err:
            src.read(0, 100)
    assert url in str(err.value)
    assert time.monotonic() - t0 < 10

def _serve_with_nginx(root: Path, work: Path):
    if nginx_binary() is None:
        pytest.skip("nginx is not installed (apt-get install nginx)")
    return start_nginx(root, work)


def test_a_manifest_name_with_encoded_dots_does_not_leave_the_release(demo_zip, tmp_path,
                                                                      monkeypatch):
    """The manifest names its index table ``%2e%2e/private/process_parameters.csv``: appended
    unencoded to the release URL, nginx decoded it to ``/private/...`` and guideloom read a
    file outside the directory the user named. Names are file names: they are encoded."""
    monkeypatch.setenv("GUIDELOOM_CACHE_DIR", str(tmp_path / "cache"))
    site = tmp_path / "site"
    release, private = site / "release", site / "private"
    shutil.copytree(demo_zip, release)
    private.mkdir()
    (release / "process_parameters.csv").rename(private / "process_parameters.csv")
    manifest = release / "metadata.json"
    text = manifest.read_text().replace('"process_parameters.csv"',
                                        '"%2e%2e/private/process_parameters.csv"')
    manifest.write_text(text)
    server = _serve_with_nginx(site, tmp_path / "nginx")
    try:
        with pytest.raises((FileNotFoundError, GuideloomError)):
            guideloom.load(server.url + "/release").index()
        log = (tmp_path / "nginx" / "access.log").read_text()
    finally:
        server.stop()
    paths = [line.split('"')[1].split()[1] for line in log.splitlines() if '"GET ' in line]
    assert paths, log
    outside = [p for p in paths if p != "/" and not p.startswith("/release/")]
    assert not outside, f"requests outside the release: {outside}"
    assert not any("private" in p and "%25" not in p for p in paths), paths


def _zip64_tail(cd_offset: int, cd_size: int, entries: int, eocd64_at: int) -> bytes:
    """A zip64 end record, its locator and an EOCD saying 'see zip64'."""
    rec = struct.pack("<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, entries, entries,
                      cd_size, cd_offset)
    loc = struct.pack("<4sLQL", b"PK\x06\x07", 0, eocd64_at, 1)
    eocd = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF,
                       0xFFFFFFFF, 0)
    return rec + loc + eocd


def _sparse_archive(path: Path, cd_size: int) -> None:
    """A sparse 'archive' whose zip64 end record claims a central directory of ``cd_size``
    bytes just before it (the holes read as zeros)."""
    total = cd_size + (1 << 20)
    tail = _zip64_tail(total - 98 - cd_size, cd_size, cd_size // 46, total - 98)
    with path.open("wb") as fh:
        fh.truncate(total)
        fh.seek(total - len(tail))
        fh.write(tail)


@pytest.mark.parametrize("where", ["local", "nginx"])
def test_a_central_directory_of_a_terabyte_is_refused_at_once(demo_zip, tmp_path, monkeypatch,
                                                               where):
    """An archive whose zip64 end record claims a 1 TiB central directory (a sparse file, served
    as is by nginx): the parser asked for the whole directory in one read (a MemoryError
    naming nothing locally; a terabyte download remotely). It is refused, naming the archive."""
    monkeypatch.setenv("GUIDELOOM_CACHE_DIR", str(tmp_path / "cache"))
    data = tmp_path / "data"
    shutil.copytree(demo_zip, data)
    _sparse_archive(data / "concave.zip", 1 << 40)
    if where == "local":
        location, server = data, None
    else:
        server = _serve_with_nginx(data, tmp_path / "nginx")
        location = server.url
    try:
        t0 = time.monotonic()
        with pytest.raises(GuideloomError, match=r"concave.zip.*central directory claims"):
            list(iter_view("force-curve", data_dir=location))
        assert time.monotonic() - t0 < 30
    finally:
        if server is not None:
            server.stop()


def _directory(data: bytes) -> tuple[bytes, list[list], bytes]:
    end = data.rfind(b"PK\x05\x06")
    _, _, _, _, _, cd_size, cd_offset, _ = struct.unpack_from("<4s4H2LH", data, end)
    entries, pos = [], cd_offset
    while pos < cd_offset + cd_size:
        fields = list(_CENTRAL.unpack_from(data, pos))
        n, e, c = fields[12], fields[13], fields[14]
        start = pos + _CENTRAL.size
        entries.append([fields, data[start:start + n], data[start + n:start + n + e],
                        data[start + n + e:start + n + e + c]])
        pos = start + n + e + c
    return data[:cd_offset], entries, data[end:]


def _rebuild(head: bytes, entries: list[list], eocd: bytes) -> bytes:
    cd = b""
    for fields, name, extra, comment in entries:
        fields[12], fields[13], fields[14] = len(name), len(extra), len(comment)
        cd += _CENTRAL.pack(*fields) + name + extra + comment
    end = list(struct.unpack_from("<4s4H2LH", eocd))
    end[3] = end[4] = len(entries)
    end[5], end[6] = len(cd), len(head)
    return head + cd + struct.pack("<4s4H2LH", *end) + eocd[22:]


def test_a_zip64_offset_beyond_any_file_names_the_archive(demo_copy):
    """A zip64 extra field giving a member the offset 2**63: a raw ``OverflowError: Python int
    too large to convert to C long`` naming neither archive nor experiment."""
    archive = demo_copy / "concave.zip"
    head, entries, eocd = _directory(archive.read_bytes())
    fields = entries[0][0]
    fields[18] = 0xFFFFFFFF
    entries[0][2] = struct.pack("<HHQ", 1, 8, 1 << 63) + entries[0][2]
    archive.write_bytes(_rebuild(head, entries, eocd))
    with pytest.raises(GuideloomError, match=r"concave.zip cannot be read: member '0000.h5'"):
        list(iter_view("force-curve", data_dir=demo_copy))


@pytest.mark.parametrize("method", [8, 99])
def test_a_member_that_does_not_inflate_names_the_experiment(demo_copy, method):
    """A stored member whose directory entry says deflate (8) or an unknown method (99): a raw
    ``zlib.error`` / ``NotImplementedError`` naming nothing, and ``on_error="skip"`` could not
    skip it. It is a CorruptDataError naming the experiment and the member."""
    archive = demo_copy / "concave.zip"
    head, entries, eocd = _directory(archive.read_bytes())
    entries[0][0][6] = method
    archive.write_bytes(_rebuild(head, entries, eocd))
    with pytest.raises(CorruptDataError, match=r"experiment 0: .*concave.zip::0000.h5: the "
                                               "member does not inflate"):
        list(iter_view("force-curve", data_dir=demo_copy, sim_ids=[0]))



def test_a_cache_folder_swapped_by_another_user_is_not_followed(tmp_path):
    """The cache in a shared folder (``GUIDELOOM_CACHE_DIR=/scratch/me``, a folder anyone may
    write to, no sticky bit): once a long-lived process (a Dask worker) has checked its cache
    folder, another user renames it away and puts a symbolic link to a folder of theirs in its
    place, holding a planted entry. The process read the planted entry (made-up zip offsets or
    HDF5 chunk addresses) and wrote its own entries (the release's URLs) there."""
    from guideloom.read.metacache import MetaCache
    from guideloom.read.metacache import payload_digest as _digest
    from tests.second_user import second_user, shared_folder

    with shared_folder() as shared, second_user() as other:
        cache = MetaCache(shared / "mine", limit=1 << 20)
        cache.put("zip-directory", "https://host/a.zip|10|", [{"name": "0001.h5"}])
        assert cache.get("zip-directory", "https://host/a.zip|10|") == [{"name": "0001.h5"}]
        planted = [{"name": "0001.h5", "header_offset": 4}]
        key = "https://host/b.zip|10|"
        doc = {"format": "guideloom-remote-cache/1", "kind": "zip-directory", "key": key,
               "digest": _digest(planted), "payload": planted}
        entry = cache._file("zip-directory", key).name
        evil = shared / "evil"
        script = (f"mkdir -p {evil}/remote && chmod -R 777 {evil} && "
                  f"printf '%s' '{json.dumps(doc)}' > {evil}/remote/{entry} && "
                  f"mv {shared}/mine {shared}/mine.old && ln -s {evil} {shared}/mine")
        other.run("/bin/sh", "-c", script)
        assert (shared / "mine").is_symlink()
        got = cache.get("zip-directory", key)
        cache.put("zip-directory", "https://host/c.zip|10|", [{"name": "0002.h5"}])
        written = sorted(p.name for p in (evil / "remote").iterdir())
    assert got is None, "a planted entry was read through the swapped folder"
    assert written == [entry], "entries were written into the other user's folder"


def test_a_damaged_shuffle_parameter_read_remotely_is_refused(demo_zip, tmp_path, monkeypatch):
    """The shuffle parameter of a stored member set to 67,108,868, the release served by nginx:
    the remote reader returned the force table with its bytes still shuffled (1.6e-15,
    6.2e+22, ...) without an error; read locally it is refused. Both refuse it now."""
    monkeypatch.setenv("GUIDELOOM_CACHE_DIR", str(tmp_path / "cache"))
    site = tmp_path / "site"
    release = site / "release"
    shutil.copytree(demo_zip, release)
    archive = release / "concave.zip"
    old = b"shuffle\0" + struct.pack("<I", 4)
    archive.write_bytes(archive.read_bytes().replace(
        old, b"shuffle\0" + struct.pack("<I", 67108868), 1))
    server = _serve_with_nginx(site, tmp_path / "nginx")
    try:
        for where in (release, server.url + "/release"):
            with pytest.raises(CorruptDataError, match=r"experiment 0: .*shuffle filter"):
                list(iter_view("force-curve", data_dir=where, sim_ids=[0]))
    finally:
        server.stop()


def test_the_token_appears_in_no_output_file_log_message_or_cache(tmp_path):
    """A DOI export with a token, on a real local cluster, with a run report; then a run with
    a wrong token and one where the manifest is gone (404): the token is in no file the runs
    wrote (export, report, cache), in no message, and never reached the store the large files
    are redirected to. (A guard: this held on main.)"""
    from tests.dataverse_server import DOI, Faults, make_release, serve

    token = "tok-3f9a1c7e-d0e4-leakcheck"
    release = make_release(tmp_path, n=6)
    faults = Faults(redirect_over=100_000, require_token=token)
    env = {**os.environ, "GUIDELOOM_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    env.pop("GUIDELOOM_DATAVERSE_TOKEN", None)

    def run(out: str, *extra: str, token_env: str | None = None) -> subprocess.CompletedProcess:
        e = {**env, "GUIDELOOM_DATAVERSE_URL": server.url}
        if token_env is not None:
            e["GUIDELOOM_DATAVERSE_TOKEN"] = token_env
        return subprocess.run([sys.executable, "-m", "guideloom", "run", "force_signals",
                               "--data-dir", DOI, "--output", str(tmp_path / out), "--verbose",
                               *extra], cwd=tmp_path, env=e, capture_output=True, text=True,
                              timeout=300)

    with serve(release, faults) as server:
        good = run("out", "--token", token, "--scheduler", "local:2", "--report",
                   str(tmp_path / "report.html"))
        assert good.returncode == 0, good.stderr
        wrong = run("out2", token_env=token + "x")
        assert wrong.returncode != 0
        assert "401" in wrong.stderr
        faults.script.extend(["404"] * 20)
        gone = run("out3", "--overwrite", token_env=token)
        assert gone.returncode != 0
        log = server.log
    assert (tmp_path / "cache" / "remote").is_dir()
    leaks = [str(p) for p in tmp_path.rglob("*") if p.is_file() and p.suffix != ".zip"
             and token[:16].encode() in p.read_bytes()]
    leaks += [name for name, done in (("good", good), ("wrong", wrong), ("gone", gone))
              if token[:16] in done.stdout + done.stderr]
    assert not leaks, leaks
    assert any(e.server == "store" for e in log)
    assert not any(e.token for e in log if e.server == "store")


@pytest.mark.parametrize("target", ["file:///etc/passwd", "ftp://127.0.0.1/x", "loop"])
def test_redirects_to_other_schemes_and_loops_end_with_a_clear_error(target):
    """A server redirecting a range request to ``file://``, ``ftp://`` or to itself forever:
    refused at once (no request to another scheme; at most 5 hops), naming the URL. (A guard:
    this held on main.)"""
    hits: list[str] = []

    def redirect(conn: socket.socket, request: str) -> None:
        hits.append(request.split(" ", 2)[1])
        where = f"/hop{len(hits)}" if target == "loop" else target
        conn.sendall(f"HTTP/1.1 302 Found\r\nLocation: {where}\r\nContent-Length: 0\r\n"
                     "Connection: close\r\n\r\n".encode())

    with raw_server(redirect) as port:
        url = f"http://127.0.0.1:{port}/api/access/datafile/7"
        src = HttpRangeSource(url, size=1000, settings=Settings(retries=2, backoff=0.01,
                                                                timeout=5))
        with pytest.raises(RemoteReadError, match=r"not http|redirects") as err:
            src.read(0, 10)
    assert url in str(err.value)
    assert len(hits) <= 6 if target == "loop" else len(hits) == 1


def _run_limited(code: str, *args: str, cwd: Path, env: dict | None = None,
                 memory: int = 1 << 30) -> subprocess.CompletedProcess:
    """``python -c code args`` with at most ``memory`` bytes of address space (so an attack
    that makes the reader hold everything fails fast instead of taking the machine down)."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run([sys.executable, "-c", code, *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300, preexec_fn=limit)


def test_a_manifest_claiming_64_gib_is_refused_unread(demo_zip, tmp_path):
    """nginx serving a ``metadata.json`` of 64 GiB (a sparse file): the manifest was read
    whole into memory ("it is small"). Files fetched whole are refused above 256 MiB, naming
    the URL."""
    site = tmp_path / "site"
    release = site / "release"
    shutil.copytree(demo_zip, release)
    with (release / "metadata.json").open("r+b") as fh:
        fh.truncate(64 << 30)
    server = _serve_with_nginx(site, tmp_path / "nginx")
    code = ("import sys, guideloom\ntry:\n    guideloom.load(sys.argv[1])\n"
            "except Exception as exc:\n    print(type(exc).__name__, exc)\n")
    env = {**os.environ, "GUIDELOOM_CACHE_DIR": str(tmp_path / "cache"),
           "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    try:
        done = _run_limited(code, server.url + "/release", cwd=tmp_path, env=env)
    finally:
        server.stop()
    assert "more than the 256 MiB" in done.stdout, done.stdout + done.stderr[-2000:]
    assert server.url + "/release/metadata.json" in done.stdout


def test_a_dataverse_answer_that_never_ends_is_cut(tmp_path):
    """A "Dataverse" API that answers the dataset version with JSON that goes on for 400 MB
    (as if forever): the answer was read whole into memory. It is cut after 256 MiB with an
    error naming the URL."""
    def endless(conn: socket.socket, request: str) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                     b"Connection: close\r\n\r\n[")
        block = b"0," * (1 << 19)
        for _ in range(400):
            conn.sendall(block)

    code = ("import sys\nfrom guideloom.read.roots import open_remote_root\ntry:\n"
            "    open_remote_root('doi:10.18419/DARUS-5589', server=sys.argv[1])\n"
            "except Exception as exc:\n    print(type(exc).__name__, exc)\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    with raw_server(endless) as port:
        done = _run_limited(code, f"http://127.0.0.1:{port}", cwd=tmp_path, env=env,
                            memory=1 << 30)
    assert "more than 256 MiB of JSON" in done.stdout, done.stdout + done.stderr[-2000:]
