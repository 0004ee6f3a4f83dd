"""Datasets read where they are published: an https:// directory, a Dataverse DOI, fsspec.

A real HTTP server on 127.0.0.1 (a thread of this process, with a real socket) serves the demo
release's files with ``Range`` support and logs every request and the bytes it sent; the
Dataverse API server of :mod:`tests.dataverse_server` serves the same release under a DOI.
Remote results must equal the local ones exactly.

S3 (seaweedfs) is covered by the S3 fixture of the HTTP-range work once it lands; the
``memory://`` tests here go through the same fsspec code path.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import fsspec
import h5py
import numpy as np
import pytest

import guideloom
from guideloom.demo import make_demo_data
from guideloom.errors import CorruptDataError
from guideloom.h5native.stats import native_stats
from guideloom.read.byte_source import LocalFileSource
from guideloom.read.metacache import MetaCache
from guideloom.read.zipdir import read_members
from guideloom.streaming import iter_view
from tests.http_server import RangeHandler, Server, Stats
from tests.remote_helpers import assert_same as _assert_same
from tests.remote_helpers import records as _records
from tests.zip_helpers import corrupt_member

REPO = Path(__file__).resolve().parents[1]


@dataclass
class Request:
    method: str
    path: str
    range: str | None
    sent: int = 0


@dataclass
class Log:
    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: list[Request] = field(default_factory=list)

    def since(self, n: int) -> list[Request]:
        with self.lock:
            return self.requests[n:]

    def __len__(self) -> int:
        with self.lock:
            return len(self.requests)


class _LoggingHandler(RangeHandler):
    log: Log

    def __init__(self, *args, log: Log, **kwargs) -> None:
        self.log = log
        super().__init__(*args, **kwargs)

    def send_head(self):
        self._entry = Request(self.command, self.path, self.headers.get("Range"))
        with self.log.lock:
            self.log.requests.append(self._entry)
        return super().send_head()

    def copyfile(self, source, outputfile) -> None:
        while chunk := source.read(64 << 10):
            outputfile.write(chunk)
            self._entry.sent += len(chunk)


@contextlib.contextmanager
def serve_logged(root: Path) -> Iterator[tuple[str, Log]]:
    """Serve ``root`` over HTTP on 127.0.0.1 (a thread, a real socket); yield (url, log)."""
    log = Log()
    handler = partial(_LoggingHandler, directory=str(root), stats=Stats(), log=log)
    server = Server(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/release", log
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


@pytest.fixture
def cache_dir(tmp_path, monkeypatch) -> Path:
    """A fresh remote-read cache for the test."""
    path = tmp_path / "cache"
    monkeypatch.setenv("GUIDELOOM_CACHE_DIR", str(path))
    return path


@pytest.fixture
def served(demo_zip, tmp_path, cache_dir) -> Iterator[tuple[str, Log, Path]]:
    """The demo release under ``http://127.0.0.1:PORT/release``."""
    site = tmp_path / "site"
    shutil.copytree(demo_zip, site / "release")
    with serve_logged(site) as (url, log):
        yield url, log, site / "release"


def _has_pointcloud(row) -> bool:
    return row["has_pointcloud"]


def _archive_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.glob("*.zip"))


def _gets(requests: list[Request]) -> list[Request]:
    return [r for r in requests if r.method == "GET"]


# --- the zip directory parser shared with the local path -------------------------------------
@pytest.mark.parametrize("kind", ["plain", "zip64", "comment", "prefixed"])
def test_zip_directory_parser_matches_zipfile(tmp_path, kind):
    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for i in range(5):
            with zf.open(f"{i:04d}.h5", "w", force_zip64=kind == "zip64") as fh:
                fh.write(os.urandom(1000 + i))
        zf.writestr("deflated.txt", b"x" * 5000, compress_type=zipfile.ZIP_DEFLATED)
        if kind == "comment":
            zf.comment = b"a comment longer than the first tail read " * 10
    if kind == "prefixed":  # a self-extractor's stub before the archive
        archive.write_bytes(b"#!stub\n" * 100 + archive.read_bytes())
    with zipfile.ZipFile(archive) as zf:
        expected = [(i.filename, i.header_offset, i.compress_size, i.file_size,
                     i.compress_type, i.CRC) for i in zf.infolist()]
    with LocalFileSource(archive) as src:
        members = read_members(src, tail_read=256)  # a short tail: the directory is a 2nd read
    assert [(m.name, m.header_offset, m.compress_size, m.file_size, m.method, m.crc)
            for m in members] == expected


# --- iter_view and exports from an https:// directory ----------------------------------------
def test_iter_view_from_https_directory_equals_local(served, demo_zip):
    url, log, _ = served
    ds = guideloom.load(url)
    assert str(ds.data_dir) == url
    def complete(row):
        return row["has_oil"] and row["has_pointcloud"]

    for view in ds.views:
        _assert_same(_records(view, data_dir=url, where=complete),
                     _records(view, data_dir=demo_zip, where=complete))
    assert all(r.method in ("GET", "HEAD") for r in log.since(0))


def test_force_view_fetches_a_small_fraction_and_a_second_pass_no_metadata(tmp_path,
                                                                            cache_dir):
    # members of 1.2 MB (scans of 400 x 640), of which the force table is 27 KB
    root = tmp_path / "site" / "release"
    make_demo_data(root, n=6, layout="zip", seed=0, scan_shape=(400, 640))
    with serve_logged(tmp_path / "site") as (url, log):
        _force_view_passes(url, log, root)


def _force_view_passes(url: str, log: Log, root: Path) -> None:
    stats = native_stats()
    first = _records("force-curve", data_dir=url)
    after = native_stats()
    _assert_same(first, _records("force-curve", data_dir=root))
    fetched = sum(r.sent for r in log.since(0) if r.path.endswith(".zip"))
    archives = _archive_bytes(root)
    assert fetched < 0.05 * archives, (fetched, archives)
    # read by guideloom.h5native, not h5py: per member one range for the local header and
    # the metadata, one for the chunks; per archive at most two for its directory
    assert after["native"] - stats["native"] == len(first)
    assert after["fallbacks"] == stats["fallbacks"]
    first_zips = [r for r in _gets(log.since(0)) if r.path.endswith(".zip")]
    n_archives = len(list(root.glob("*.zip")))
    assert len(first_zips) <= 2 * len(first) + 2 * n_archives, first_zips

    n = len(log)
    again = _records("force-curve", data_dir=url)
    _assert_same(again, first)
    second = log.since(n)
    # per experiment one GET, for the force table's chunks; no tail, directory or header reads
    members = {}
    for archive in root.glob("*.zip"):
        with zipfile.ZipFile(archive) as zf:
            members[archive.name] = zf.infolist()
    zips = [r for r in _gets(second) if r.path.endswith(".zip")]
    assert len(zips) == len(first)
    for r in zips:
        start = int(r.range.split("=")[1].split("-")[0])
        infos = members[r.path.rsplit("/", 1)[1]]
        assert all(start != i.header_offset for i in infos)
        size = (root / r.path.rsplit("/", 1)[1]).stat().st_size
        assert int(r.range.split("-")[1]) < size - 22  # not the end-of-directory tail
    # ... and exactly the bytes of the force table's chunks
    assert sum(r.sent for r in zips) == sum(_chunk_span(a, "force/data") for a in
                                            root.glob("*.zip"))
    assert sum(r.sent for r in zips) < fetched * 0.7  # the first pass also read metadata


def _chunk_span(archive: Path, path: str) -> int:
    """Bytes from the first to the end of the last chunk of ``path``, summed over members."""
    total = 0
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            with h5py.File(io.BytesIO(zf.read(info))) as f:
                dsid = f[path].id
                chunks = [dsid.get_chunk_info(i) for i in range(dsid.get_num_chunks())]
            total += max(c.byte_offset + c.size for c in chunks) - min(c.byte_offset
                                                                        for c in chunks)
    return total


def test_exports_from_url_equal_local_in_process_and_on_the_cluster(served, demo_zip, tmp_path,
                                                                    dask_client):
    url, _, _ = served
    for kind, fn in (("npy", guideloom.export_to_numpy), ("zarr", guideloom.export_to_zarr)):
        local = fn("pointcloud-op10", tmp_path / f"local.{kind}", data_dir=demo_zip,
                   where=_has_pointcloud, client="sync", show_progress=False)
        remote = fn("pointcloud-op10", tmp_path / f"sync.{kind}", data_dir=url,
                    where=_has_pointcloud, client="sync", show_progress=False)
        cluster = fn("pointcloud-op10", tmp_path / f"cluster.{kind}", data_dir=url,
                     where=_has_pointcloud, client=dask_client, partition_size=7,
                     show_progress=False)
        assert local
        assert remote
        assert cluster
        ref = guideloom.load_export(tmp_path / f"local.{kind}")
        for name in ("sync", "cluster"):
            got = guideloom.load_export(tmp_path / f"{name}.{kind}")
            assert list(got.sim_ids) == list(ref.sim_ids)
            for i in range(len(ref)):
                a, b = got[i], ref[i]
                for key in b:
                    np.testing.assert_array_equal(np.asarray(a[key]), np.asarray(b[key]))
    manifest = json.loads((tmp_path / "cluster.npy" / "export.json").read_text())
    assert manifest["data_dir"] == url


def test_per_sim_npz_export_from_url_equals_local(served, demo_zip, tmp_path):
    url, _, _ = served
    guideloom.export_to_numpy_per_sim("force-curve", tmp_path / "local", data_dir=demo_zip,
                                      client="sync", show_progress=False)
    guideloom.export_to_numpy_per_sim("force-curve", tmp_path / "remote", data_dir=url,
                                      client="sync", show_progress=False)
    local = sorted(p.relative_to(tmp_path / "local") for p in (tmp_path / "local").rglob("*.npz"))
    remote = sorted(p.relative_to(tmp_path / "remote")
                    for p in (tmp_path / "remote").rglob("*.npz"))
    assert local == remote
    assert local
    for rel in local:
        a, b = np.load(tmp_path / "local" / rel), np.load(tmp_path / "remote" / rel)
        assert a.files == b.files
        for key in a.files:
            np.testing.assert_array_equal(a[key], b[key], strict=True)


def test_shipped_workflow_runs_from_url_on_the_command_line(served, demo_zip, tmp_path):
    url, _, _ = served
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for name, data_dir in (("local", str(demo_zip)), ("remote", url)):
        done = subprocess.run(
            [sys.executable, "-m", "guideloom", "run", "force_signals", "--data-dir", data_dir,
             "--output", str(tmp_path / name)],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
    local, remote = (guideloom.load_export(tmp_path / n) for n in ("local", "remote"))
    assert list(remote.sim_ids) == list(local.sim_ids)
    assert len(local) > 10
    for i in range(len(local)):
        for key, value in local[i].items():
            np.testing.assert_array_equal(np.asarray(remote[i][key]), np.asarray(value))


# --- a Dataverse DOI -----------------------------------------------------------------------
def test_doi_resolves_through_the_dataverse_api(tmp_path, cache_dir, monkeypatch):
    from tests.dataverse_server import DOI, make_release, serve

    release = make_release(tmp_path, n=8)
    local = tmp_path / "release"
    with serve(release) as server:
        monkeypatch.setenv("GUIDELOOM_DATAVERSE_URL", server.url)
        ds = guideloom.load(DOI)
        assert ds.data_dir.url == DOI
        for view in ("force-curve", "pointcloud-op20"):
            _assert_same(_records(view, data_dir=DOI, where=lambda r: r["has_pointcloud"]),
                         _records(view, data_dir=local, where=lambda r: r["has_pointcloud"]))
        out = guideloom.export_to_numpy("pointcloud-op20", tmp_path / "doi.npy", data_dir=DOI,
                                        where=_has_pointcloud, client="sync",
                                        show_progress=False)
        assert out is not None
        accessed = server.access_log()
    got = guideloom.load_export(tmp_path / "doi.npy")
    want = _records("pointcloud-op20", data_dir=local, where=_has_pointcloud)
    assert list(got.sim_ids) == [r["_sim_id"] for r in want]
    for i, rec in enumerate(want):
        np.testing.assert_array_equal(got[i]["pointcloud_op20_z"], rec["pointcloud_op20_z"])
    assert any(e.path.startswith("/api/access/datafile/21") for e in accessed)


# --- fsspec URLs -------------------------------------------------------------------------
def test_memory_filesystem_release_equals_local(demo_zip, cache_dir):
    fs = fsspec.filesystem("memory")
    base = "memory://guideloom-test-release"
    for path in demo_zip.iterdir():
        if path.is_file():
            fs.pipe(f"{base}/{path.name}", path.read_bytes())
    try:
        for view in ("force-curve", "pointcloud-op10"):
            _assert_same(_records(view, data_dir=base, where=lambda r: r["has_pointcloud"]),
                         _records(view, data_dir=demo_zip, where=lambda r: r["has_pointcloud"]))
    finally:
        fs.rm(base, recursive=True)


# --- damage and the cache ------------------------------------------------------------------
def test_damaged_remote_member_gives_the_local_error(served):
    url, _, root = served
    corrupt_member(root / "concave.zip", "0003.h5", 0, b"\0" * 512)  # the superblock
    with pytest.raises(CorruptDataError) as local:
        _records("force-curve", data_dir=root)
    with pytest.raises(CorruptDataError) as remote:
        _records("force-curve", data_dir=url)
    for exc in (local.value, remote.value):
        assert "experiment 3" in str(exc)
        assert "0003.h5" in str(exc)
        assert "damaged or not an HDF5 file" in str(exc)
    assert f"{url}/concave.zip::0003.h5" in str(remote.value)


def test_tampered_cache_entries_are_refetched(served, demo_zip, cache_dir):
    url, log, _ = served
    first = _records("force-curve", data_dir=url)
    entries = sorted((cache_dir / "remote").glob("*.json"))
    assert entries
    assert stat.S_IMODE((cache_dir / "remote").stat().st_mode) == 0o700
    assert all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in entries)
    for path in entries:  # point every entry elsewhere and keep it well-formed JSON
        doc = json.loads(path.read_text())
        payload = doc["payload"]
        if isinstance(payload, list):
            for m in payload:
                m["header_offset"] += 7
        else:
            payload["data_start"] -= 3
        path.write_text(json.dumps(doc))
    n = len(log)
    again = _records("force-curve", data_dir=url)
    _assert_same(again, first)
    _assert_same(again, _records("force-curve", data_dir=demo_zip))
    refetched = log.since(n)
    assert any(r.range and r.range.startswith("bytes=") and r.path.endswith("concave.zip")
               and int(r.range.split("-")[1]) > (served[2] / "concave.zip").stat().st_size - 100
               for r in refetched)  # the directory's tail, read again


def test_cache_stays_within_its_bound(tmp_path):
    cache = MetaCache(tmp_path / "c", limit=20_000)
    for i in range(50):
        cache.put("k", f"key{i}", {"blob": "x" * 1000})
    files = list((tmp_path / "c" / "remote").glob("*.json"))
    assert sum(p.stat().st_size for p in files) <= 20_000
    assert cache.get("k", "key49") == {"blob": "x" * 1000}
    assert cache.get("k", "key0") is None


def test_doi_with_a_token_and_large_files_on_the_store(tmp_path, cache_dir, monkeypatch):
    from tests.dataverse_server import DOI, Faults, make_release, serve

    release = make_release(tmp_path, n=6)
    faults = Faults(redirect_over=100_000, require_token="s3cret")
    with serve(release, faults) as server:
        monkeypatch.setenv("GUIDELOOM_DATAVERSE_URL", server.url)
        monkeypatch.setenv("GUIDELOOM_DATAVERSE_TOKEN", "s3cret")
        _assert_same(_records("force-curve", data_dir=DOI),
                     _records("force-curve", data_dir=tmp_path / "release"))
        log = server.log
    assert any(e.server == "store" and e.range for e in log)  # zips read by range, redirected
    assert all(e.token for e in log if e.server == "api")
    assert not any(e.token for e in log if e.server == "store")  # the token stays with the API


def test_verify_crc_reports_a_damaged_chunk_as_locally(served):
    url, _, root = served
    with zipfile.ZipFile(root / "concave.zip") as zf:
        member = zf.read("0002.h5")
    with h5py.File(io.BytesIO(member)) as f:
        chunk = f["force/data"].id.get_chunk_info(0)
    # flip bytes inside the force table's first chunk: metadata intact, only the CRC tells
    corrupt_member(root / "concave.zip", "0002.h5", chunk.byte_offset + chunk.size - 8,
                   b"\0\1\2\3")
    errors = []
    for data_dir in (root, url):
        with pytest.raises(CorruptDataError) as caught:
            _records("force-curve", data_dir=data_dir, verify_crc=True, sim_ids=[2])
        errors.append(str(caught.value))
    for message in errors:
        assert "experiment 2" in message
        assert "0002.h5: CRC-32 mismatch" in message
    assert errors[1].startswith(f"experiment 2: {url}/concave.zip::0002.h5")


def test_deflated_remote_members_read_as_locally(served):
    from tests.zip_helpers import rebuild_archive

    url, _, root = served
    rebuild_archive(root / "concave.zip", compression=zipfile.ZIP_DEFLATED)
    for view in ("force-curve", "sheet-thickness"):
        _assert_same(_records(view, data_dir=url, sim_ids=[0, 1, 5]),
                     _records(view, data_dir=root, sim_ids=[0, 1, 5]))


def test_deflated_remote_members_pass_their_crc_check_and_a_damaged_one_fails_it(served):
    """verify_crc=True on a deflated remote member checks the CRC-32 of the inflated bytes (the
    CRC the archive records), as locally; the old remote path checked the compressed bytes
    against it and refused every intact deflated member."""
    import struct

    from tests.zip_helpers import rebuild_archive

    url, _, root = served
    archive = root / "concave.zip"
    rebuild_archive(archive, compression=zipfile.ZIP_DEFLATED)
    with zipfile.ZipFile(archive) as zf:
        info = zf.getinfo("0002.h5")
        entry = zf.start_dir
        for other in zf.infolist():  # the central entry of 0002.h5
            if other.filename == "0002.h5":
                break
            entry += 46 + len(other.filename.encode()) + len(other.extra) + len(other.comment)
    with open(archive, "r+b") as fh:  # a wrong CRC-32; the deflate stream itself is intact
        fh.seek(entry)
        assert fh.read(4) == b"PK\x01\x02"
        fh.seek(entry + 16)
        fh.write(struct.pack("<I", info.CRC ^ 0x5A5A5A5A))
    _assert_same(_records("force-curve", data_dir=url, sim_ids=[0, 1, 5], verify_crc=True),
                 _records("force-curve", data_dir=root, sim_ids=[0, 1, 5], verify_crc=True))
    for data_dir in (root, url):
        with pytest.raises(CorruptDataError, match=r"0002\.h5 .*Bad CRC-32") as caught:
            _records("force-curve", data_dir=data_dir, sim_ids=[2], verify_crc=True)
        assert caught.value.sim_id == 2


def test_cache_location_follows_the_environment(tmp_path, monkeypatch):
    from guideloom.read.metacache import cache_root

    monkeypatch.delenv("GUIDELOOM_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "guideloom"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_root() == tmp_path / "home" / ".cache" / "guideloom"
    monkeypatch.setenv("GUIDELOOM_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_root() == tmp_path / "mine"


def test_an_archive_replaced_on_the_server_is_read_afresh(served):
    from tests.zip_helpers import rebuild_archive

    url, _, root = served
    first = _records("force-curve", data_dir=url, sim_ids=[0, 1])
    archive = root / "concave.zip"
    with zipfile.ZipFile(archive) as zf:
        swapped = {"0000.h5": zf.read("0001.h5"), "0001.h5": zf.read("0000.h5")}
    stamp = archive.stat().st_mtime
    rebuild_archive(archive, replace=swapped)  # same size, members' contents swapped
    os.utime(archive, (stamp + 10, stamp + 10))  # the new Last-Modified
    again = _records("force-curve", data_dir=url, sim_ids=[0, 1])
    _assert_same(again, _records("force-curve", data_dir=root, sim_ids=[0, 1]))
    np.testing.assert_array_equal(again[0]["force_data"], first[1]["force_data"])


def test_an_archive_gone_from_the_server_mid_run_names_the_experiment_and_url(served):
    url, _, root = served
    records = iter_view("force-curve", data_dir=url)  # lists the archives now
    (root / "concave.zip").unlink()  # the server answers 404 from now on
    with pytest.raises(guideloom.errors.ExperimentReadError) as caught:
        next(records)
    message = str(caught.value)
    assert message.startswith(f"experiment 0: {url}/concave.zip::0000.h5: reading from {url}")
    assert "check the connection" in message
    assert not isinstance(caught.value, CorruptDataError)


def test_guideloom_run_from_a_doi_with_server_option(tmp_path, cache_dir):
    from tests.dataverse_server import DOI, make_release, serve

    make_release_root = tmp_path / "made"
    release = make_release(make_release_root, n=6)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GUIDELOOM_DATAVERSE")}
    env["PYTHONPATH"] = str(REPO)
    with serve(release) as server:
        done = subprocess.run(
            [sys.executable, "-m", "guideloom", "run", "force_signals", "--data-dir", DOI,
             "--server", server.url, "--output", str(tmp_path / "doi")],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    local = subprocess.run(
        [sys.executable, "-m", "guideloom", "run", "force_signals", "--data-dir",
         str(make_release_root / "release"), "--output", str(tmp_path / "local")],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert local.returncode == 0, local.stderr
    a, b = guideloom.load_export(tmp_path / "doi"), guideloom.load_export(tmp_path / "local")
    assert list(a.sim_ids) == list(b.sim_ids)
    assert len(b) == 6
    for i in range(len(b)):
        for key, value in b[i].items():
            np.testing.assert_array_equal(np.asarray(a[i][key]), np.asarray(value))


def test_a_workflow_file_may_name_a_url_as_its_data_dir(served, tmp_path):
    from guideloom.export.run import run_export
    from guideloom.workflow import load_workflow

    url, _, root = served
    text = (REPO / "workflows" / "force_signals.toml").read_text()
    assert 'data_dir = "demo-data"' in text
    for name, data_dir in (("remote", url), ("local", str(root))):
        (tmp_path / f"{name}.toml").write_text(
            text.replace('data_dir = "demo-data"', f"data_dir = {json.dumps(data_dir)}"))
        wf = load_workflow(tmp_path / f"{name}.toml", output=tmp_path / name)
        run_export(wf.to_spec(), client="sync", show_progress=False)
    a, b = (guideloom.load_export(tmp_path / n) for n in ("remote", "local"))
    assert list(a.sim_ids) == list(b.sim_ids)
    assert len(b) > 10
    np.testing.assert_array_equal(a[3]["force"], b[3]["force"])


class _CountingSource:
    """A :class:`LocalFileSource` that counts the calls made to it (each a request remotely)."""

    high_latency = True

    def __init__(self, path: Path):
        self.src = LocalFileSource(path)
        self.name = self.src.name
        self.calls = 0

    def size(self) -> int:
        return self.src.size()

    def read(self, offset: int, size: int) -> bytes:
        self.calls += 1
        return self.src.read(offset, size)

    def read_ranges(self, ranges):
        self.calls += 1
        return self.src.read_ranges(ranges)


def test_a_chunk_btree_level_is_fetched_in_one_request(tmp_path):
    from guideloom.h5native import open_file

    path = tmp_path / "many.h5"
    data = np.arange(60_000, dtype="<f4")
    with h5py.File(path, "w") as f:  # 600 chunks: a v1 B-tree of a root and ten leaves
        f.create_dataset("big/data", data=data, chunks=(100,), compression="gzip")
        for i in range(3):  # metadata and data of other datasets in between
            f.create_dataset(f"other{i}", data=np.ones(5000), chunks=(50,))
    src = _CountingSource(path)
    got = open_file(src, first_block=16 << 10).read("big/data")
    np.testing.assert_array_equal(got, data)
    assert src.calls <= 4, src.calls  # first block, the root if elsewhere, the leaves, chunks
