"""Bulk records from a remote release keep the link busy: what proves it without timing.

The Dataverse test server (:mod:`tests.dataverse_server`, real sockets on 127.0.0.1) logs
every request with its ``Range``; the tests read that log and its counters, never a clock.
"""

from __future__ import annotations

import shutil
import threading

import h5py
import numpy as np
import pytest

import guideloom
from guideloom.h5native.stats import native_stats
from guideloom.read.byte_source import LocalFileSource, clear_source_cache
from guideloom.read.http import close_connections
from guideloom.select.selection import select
from tests.dataverse_server import Faults, serve

WAIT_S = 20.0  # how long the gate waits for a request it expects (far more than needed)


@pytest.fixture
def release(demo_zip, tmp_path, monkeypatch):
    """The demo release served at ``URL/release`` (20 ms per request) with a fresh cache."""
    site = tmp_path / "site"
    shutil.copytree(demo_zip, site / "release")
    monkeypatch.setenv("GUIDELOOM_CACHE_DIR", str(tmp_path / "cache"))
    clear_source_cache()
    with serve(faults=Faults(latency=0.02), static=site) as server:
        yield server, f"{server.url}/release"
    close_connections()
    clear_source_cache()


def _has_pointcloud(row) -> bool:
    return row["has_pointcloud"]


def _asked_for(server, loc) -> bool:
    """Whether the server was asked for bytes of ``loc``'s zip member."""
    path = "/" + loc.path.split("/", 3)[3]
    for entry in server.log:
        if entry.path == path and entry.range and entry.range.startswith("bytes="):
            first = entry.range[len("bytes="):].split("-")[0]
            if first and loc.header_offset <= int(first) < loc.header_offset + loc.size + 1024:
                return True
    return False


class _Gate:
    """A ``record_transform`` that, at the record ``at``, waits until the server has been
    asked for the member of the record ``then`` (and notes whether it was)."""

    def __init__(self, server, at, then) -> None:
        self.server, self.at, self.then = server, at, then
        self.seen: bool | None = None
        self._event = threading.Event()

    def __call__(self, record):
        if record["_sim_id"] == self.at.sim_id and self.seen is None:
            for _ in range(int(WAIT_S / 0.01)):
                if _asked_for(self.server, self.then):
                    break
                self._event.wait(0.01)  # polls the server's log; not a stand-in for an event
            self.seen = _asked_for(self.server, self.then)
        return record


def test_a_sync_export_fetches_the_next_partitions_records_while_one_is_written(
        release, demo_zip, tmp_path):
    server, url = release
    ds = guideloom.load(url)
    locs = select(ds, ds.data_dir, where=_has_pointcloud).locations
    assert len(locs) > 8
    # records 0-2 have their metadata read before the partitions start (dtypes, schema)
    gate = _Gate(server, at=locs[4], then=locs[5])
    out = guideloom.export_to_numpy("pointcloud-op10", tmp_path / "remote.npy", data_dir=url,
                                    where=_has_pointcloud, client="sync", partition_size=1,
                                    record_transform=gate, show_progress=False)
    assert out
    # partition 5 starts after partition 4 is written: its record was fetched before
    assert gate.seen is True
    local = guideloom.export_to_numpy("pointcloud-op10", tmp_path / "local.npy",
                                      data_dir=demo_zip, where=_has_pointcloud, client="sync",
                                      show_progress=False)
    a, b = (guideloom.load_export(tmp_path / n) for n in ("remote.npy", "local.npy"))
    assert local
    assert list(a.sim_ids) == list(b.sim_ids)
    for i in range(len(b)):
        for key in b[i]:
            np.testing.assert_array_equal(np.asarray(a[i][key]), np.asarray(b[i][key]))


def test_the_schema_probe_takes_the_first_record_from_the_read_ahead(release, tmp_path):
    _server, url = release
    ds = guideloom.load(url)
    n = len(select(ds, ds.data_dir, where=_has_pointcloud).locations)
    before = native_stats()
    out = guideloom.export_to_zarr("pointcloud-op10", tmp_path / "remote.zarr", data_dir=url,
                                   where=_has_pointcloud, client="sync", partition_size=4,
                                   transforms={"pointcloud_op10_z": _negated},
                                   show_progress=False)
    after = native_stats()
    assert out
    assert after["fallbacks"] == before["fallbacks"]
    # each record read once (n + 1 before: the probe's record was read again)
    assert after["native"] - before["native"] == n


def _negated(z):
    return -z


class _CountingSource:
    """A :class:`LocalFileSource` that counts the calls made to it (each a round trip
    remotely: ``read_ranges`` issues its ranges concurrently)."""

    high_latency = True

    def __init__(self, path):
        self.src = LocalFileSource(path)
        self.name = self.src.name
        self.calls = self.ranges = self.bytes = 0

    def size(self) -> int:
        return self.src.size()

    def read(self, offset: int, size: int) -> bytes:
        return self.read_ranges([(offset, size)])[0]

    def read_ranges(self, ranges):
        self.calls += 1
        self.ranges += len(ranges)
        self.bytes += sum(n for _, n in ranges)
        return self.src.read_ranges(ranges)


def test_two_chunked_datasets_cost_the_round_trips_of_one(tmp_path):
    from guideloom.h5native import open_file

    path = tmp_path / "two.h5"
    a, b = np.arange(60_000, dtype="<f4"), np.arange(60_000, dtype="<f4") * 2
    with h5py.File(path, "w") as f:  # 600 chunks each: B-trees of a root and ten leaves
        f.create_dataset("scan/a", data=a, chunks=(100,), compression="gzip", shuffle=True)
        for i in range(3):  # metadata and data of other datasets in between
            f.create_dataset(f"other{i}", data=np.ones(5000), chunks=(50,))
        f.create_dataset("scan/b", data=b, chunks=(100,), compression="gzip", shuffle=True)
    rounds, ranges, sent = {}, {}, {}
    for together in (False, True):
        src = _CountingSource(path)
        h = open_file(src, first_block=16 << 10)
        if together:
            h.prefetch(["scan/a", "scan/b"], whole=["scan/a", "scan/b"])
        np.testing.assert_array_equal(h.read("scan/a"), a)
        np.testing.assert_array_equal(h.read("scan/b"), b)
        rounds[together], ranges[together], sent[together] = src.calls, src.ranges, src.bytes
    # first block, b's object header, a's leaves with b's, both datasets' chunks
    assert rounds[True] <= 4 < rounds[False], rounds
    # each dataset's leaves as one range across them (chunks lie between): not one per leaf
    # or chunk, and not many more bytes (metadata blocks of other sizes)
    assert ranges[True] * 10 < ranges[False], ranges
    assert sent[True] < 1.25 * sent[False], sent
    assert sent[True] < path.stat().st_size, sent

