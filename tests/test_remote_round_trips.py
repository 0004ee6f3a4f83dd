"""Round trips of reads straight from a remote release (issue 21, goal 5), counted by the test
server of :mod:`tests.dataverse_server`: how many requests a first and a second pass cost, and
which of them are in flight at once. No timings are asserted: the server's log says what was
asked, and when each request came and was answered.
"""

from __future__ import annotations

import io
import shutil
import threading
import time
import zipfile

import h5py
import numpy as np
import pytest

import guideloom
from guideloom.h5native.stats import native_stats
from guideloom.read.fetch import FIRST_WHOLE, fetch_bytes
from guideloom.read.hdf5 import NATIVE_FIRST_READ
from guideloom.read.http import close_connections
from guideloom.read.records import REFERENCE_RECORDS, RecordReader
from guideloom.read.roots import open_remote_root as open_root
from guideloom.runtime.caches import clear_caches
from guideloom.select.selection import select
from tests.dataverse_server import Faults, LogEntry, serve
from tests.remote_helpers import assert_same, records


@pytest.fixture
def release(demo_zip, tmp_path, monkeypatch):
    """The demo release at ``URL/release``, a fresh cache folder and fresh in-process caches."""
    site = tmp_path / "site"
    shutil.copytree(demo_zip, site / "release")
    monkeypatch.setenv("GUIDELOOM_CACHE_DIR", str(tmp_path / "cache"))
    clear_caches()
    with serve(faults=Faults(), static=site) as server:
        yield server, f"{server.url}/release", site / "release"
    close_connections()
    clear_caches()


def _zip_gets(entries: list[LogEntry], root) -> list[LogEntry]:
    """The ranged GETs of member bytes: not HEADs, not the archives' tails (directories)."""
    sizes = {p.name: p.stat().st_size for p in root.glob("*.zip")}
    out = []
    for e in entries:
        name = e.path.rsplit("/", 1)[-1]
        if e.method != "GET" or name not in sizes or not e.range:
            continue
        if int(e.range.split("-")[1]) == sizes[name] - 1:  # the tail: the central directory
            continue
        out.append(e)
    return out


def _members(root) -> int:
    return sum(len(zipfile.ZipFile(p).infolist()) for p in root.glob("*.zip"))


def test_a_first_pass_reads_each_record_in_one_range(release, monkeypatch):
    server, url, root = release
    monkeypatch.setenv("GUIDELOOM_REMOTE_READAHEAD", "0")  # one record after another
    n = len(server.log)
    stats = native_stats()
    got = records("force-curve", data_dir=url)
    assert native_stats()["native"] - stats["native"] == len(got) == _members(root)
    gets = _zip_gets(server.log[n:], root)
    assert_same(got, records("force-curve", data_dir=root))
    # the first members: metadata first, then the chunks (the view's reach is learnt); every
    # later member: its local header, metadata and force chunks in one range (two before)
    assert len(gets) <= len(got) + 3, [(e.path, e.range) for e in gets]
    fetched = sum(int(e.range.split("-")[1]) - int(e.range.split("=")[1].split("-")[0]) + 1
                  for e in gets)
    # no more bytes than the two ranges a member took before (first block, then chunks)
    assert fetched <= sum(NATIVE_FIRST_READ + 256 + end for end in _force_ends(root))


def _force_ends(root) -> list[int]:
    """Per member, where the last byte of its force table's chunks lies in it."""
    ends = []
    for archive in root.glob("*.zip"):
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                with h5py.File(io.BytesIO(zf.read(info))) as f:
                    dsid = f["force/data"].id
                    ends.append(max(c.byte_offset + c.size for c in (
                        dsid.get_chunk_info(i) for i in range(dsid.get_num_chunks()))))
    return ends


def test_shapes_of_a_remote_member_cost_one_range_and_its_record_then_only_its_data(release):
    server, url, root = release
    ds = guideloom.load(url)
    sel = select(ds, ds.data_dir)
    view = ds.view("force-curve")
    reader = RecordReader(view)
    n = len(server.log)
    shapes = reader.shapes(sel.locations[0], sel.rows[0])
    gets = _zip_gets(server.log[n:], root)
    assert len(gets) == 1, [(e.path, e.range) for e in gets]  # header and metadata at once
    record = reader.read(sel.locations[0], sel.rows[0])
    again = _zip_gets(server.log[n:], root)[1:]
    assert len(again) == 1  # the metadata was kept: the chunks only
    for alias, (shape, dtype) in shapes.items():
        assert np.asarray(record[alias]).shape == shape
        assert np.asarray(record[alias]).dtype == dtype
    # and the same answer as h5py's description of the local file
    local = select(guideloom.load(root), root)
    assert RecordReader(view).shapes(local.locations[0], local.rows[0]) == shapes


def _wait_until_logged(entries: list[LogEntry], timeout: float = 30.0) -> None:
    """Wait until the server has noted the end of each of ``entries`` (it does so after the
    last byte is sent, so a client can read its answer first)."""
    deadline = time.monotonic() + timeout
    while any(e.finished is None for e in entries):
        assert time.monotonic() < deadline, "the server never noted the end of a request"
        threading.Event().wait(0.01)


def _overlap(entries: list[LogEntry]) -> int:
    """The most requests of ``entries`` in flight at one moment."""
    events = sorted([(e.started, 1) for e in entries] + [(e.finished, -1) for e in entries],
                    key=lambda x: (x[0], x[1]))
    most = now = 0
    for _, step in events:
        now += step
        most = max(most, now)
    return most


def test_an_in_process_export_reads_ahead_across_its_partitions(release, tmp_path):
    server, url, root = release
    ds = guideloom.load(url)
    kw = {"dataset": ds, "client": "sync", "show_progress": False, "partition_size": 1}
    # a first export caches the directories and metadata
    assert guideloom.export_to_numpy_per_sim("force-curve", tmp_path / "first", **kw)
    server.faults.latency = 0.2  # each record's read takes a while (long beside thread starts)
    n = len(server.log)
    result = guideloom.export_to_numpy_per_sim("force-curve", tmp_path / "second", **kw)
    gets = _zip_gets(server.log[n:], root)
    # one data read per record and one of its whole member for its content digest (issue
    # 38), nothing else
    assert len(gets) == 2 * _members(root)
    _wait_until_logged(gets)  # every one of them answered, as the server noted it
    # partitions of one record each: before, each partition read its record alone
    assert _overlap(gets) > 1
    local = guideloom.export_to_numpy_per_sim("force-curve", tmp_path / "local", data_dir=root,
                                    client="sync", show_progress=False)
    assert result
    assert local
    got, ref = (guideloom.load_export(tmp_path / n) for n in ("second", "local"))
    assert list(got.sim_ids) == list(ref.sim_ids)
    for i in range(len(ref)):
        for key in ref[i]:
            np.testing.assert_array_equal(np.asarray(got[i][key]), np.asarray(ref[i][key]))


def test_the_manifest_and_index_table_come_in_one_request_each(release, tmp_path):
    server, url, _root = release
    server.counts.reset()
    ds = guideloom.load(url)
    assert guideloom.export_to_numpy_per_sim("force-curve", tmp_path / "out", dataset=ds,
                                   client="sync", show_progress=False)
    counts = server.counts.snapshot()["requests"]
    assert counts["/release/metadata.json"] == 1
    assert counts["/release/process_parameters.csv"] == 1  # not again for the job identity


def test_the_archives_heads_and_directories_are_asked_at_once(release):
    server, url, root = release
    server.faults.latency = 0.2  # long beside a thread's start on a loaded machine
    ds = guideloom.load(url)
    n = len(server.log)
    sel = select(ds, ds.data_dir)
    assert len(sel.locations) == _members(root)
    zips = [e for e in server.log[n:] if e.path.endswith(".zip")]
    heads = [e for e in zips if e.method == "HEAD"]
    tails = [e for e in zips if e.method == "GET"]
    assert len(heads) == len(tails) == len(list(root.glob("*.zip"))) > 1
    _wait_until_logged(zips)  # the client has its answers; the server may not have noted them
    assert _overlap(heads) == len(heads)
    assert _overlap(tails) == len(tails)


@pytest.mark.parametrize("size", [0, 100, FIRST_WHOLE + 12345])
def test_fetch_bytes_gets_small_files_whole_in_one_request(release, size):
    server, url, root = release
    data = bytes(range(256)) * (size // 256) + bytes(size % 256)
    (root / "blob.bin").write_bytes(data)
    server.counts.reset()
    got, where = fetch_bytes(open_root(url), "blob.bin", "a test file")
    assert got == data
    assert str(where) == f"{url}/blob.bin"
    assert server.counts.snapshot()["requests"]["/release/blob.bin"] == (
        2 if size > FIRST_WHOLE else 1)


def test_an_export_describes_its_first_experiments_at_once(release, tmp_path):
    server, url, root = release
    server.faults.latency = 0.2  # long beside a thread's start on a loaded machine
    ds = guideloom.load(url)
    sel = select(ds, ds.data_dir)
    firsts = {(loc.path.rsplit("/", 1)[-1], loc.header_offset): loc.size
              for loc in sel.locations[:REFERENCE_RECORDS]}
    n = len(server.log)
    assert guideloom.export_to_numpy_per_sim("force-curve", tmp_path / "out", dataset=ds,
                                             client="sync", show_progress=False)

    def first(e) -> tuple[str, int]:
        return e.path.rsplit("/", 1)[-1], int(e.range.split("=")[1].split("-")[0])

    def length(e) -> int:
        low, high = e.range.split("=")[1].split("-")
        return int(high) - int(low) + 1

    # (the fetch of each whole member for its content digest, issue 38, left out)
    described = [e for e in _zip_gets(server.log[n:], root)
                 if first(e) in firsts and length(e) < firsts[first(e)]]
    # one range each (header and metadata), all in flight together: the job's size estimate
    # and its reference datatypes need them before any record is read
    assert len(described) == REFERENCE_RECORDS
    _wait_until_logged(described)
    assert _overlap(described) == REFERENCE_RECORDS
