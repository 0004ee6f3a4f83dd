"""Remote-read faults end to end: views and exports from the test server of
:mod:`tests.dataverse_server` (static directory) while it resets connections mid-body,
truncates bodies, answers a wrong ``Content-Range``, ignores ``Range``, stalls or answers 503.

One bad answer is retried and the records equal the local ones; a server that keeps failing
ends the export after bounded retries with an error naming the URL and, when a member's read
failed, the experiment; the export is absent. Never a wrong or zero row.
"""

from __future__ import annotations

import shutil
import time

import numpy as np
import pytest

import guideloom
from guideloom.errors import GuideloomError
from guideloom.read.byte_source import clear_source_cache
from guideloom.read.http import close_connections
from tests.dataverse_server import Faults, serve
from tests.remote_helpers import assert_same as _assert_same
from tests.remote_helpers import records as _records


@pytest.fixture
def release(demo_zip, tmp_path, monkeypatch):
    """The demo release served at ``URL/release`` with fast timeouts and two retries."""
    site = tmp_path / "site"
    shutil.copytree(demo_zip, site / "release")
    monkeypatch.setenv("GUIDELOOM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GUIDELOOM_HTTP_TIMEOUT", "0.5")
    monkeypatch.setenv("GUIDELOOM_HTTP_RETRIES", "2")
    clear_source_cache()
    with serve(faults=Faults(stall_requests=1, retry_after="0"), static=site) as server:
        yield server, f"{server.url}/release"
    close_connections()
    clear_source_cache()


def _has_pointcloud(row) -> bool:
    return row["has_pointcloud"]


ONCE = {
    "reset mid-body": {"reset_after": {"/release/convex.zip": 3000}},
    "truncated": {"truncate_after": {"/release/convex.zip": 3000}},
    "wrong Content-Range": {"script": ["bad-range"]},
    "Range ignored": {"script": ["ignore-range"]},
    "slow": {"script": ["slow"]},
    "503": {"script": ["503", "503"]},
}


@pytest.mark.fast_case("Range ignored", "503")  # the others ~2-3 s each; every fault is fast in
# tests/test_remote_transport.py's test_one_bad_answer_is_retried_and_the_bytes_are_right
@pytest.mark.parametrize("fault", list(ONCE))
def test_one_bad_answer_during_an_export_is_retried_and_the_rows_are_right(release, demo_zip,
                                                                          tmp_path, fault):
    server, url = release
    ds = guideloom.load(url)  # the manifest and the index table come before the fault
    for key, value in ONCE[fault].items():
        setattr(server.faults, key, value)
    before = server.counts.total_requests()
    remote = _records("pointcloud-op10", dataset=ds, where=_has_pointcloud)
    _assert_same(remote, _records("pointcloud-op10", data_dir=demo_zip, where=_has_pointcloud))
    assert server.faults.script == []
    assert server.counts.total_requests() > before
    assert all(np.asarray(v).any() for r in remote for k, v in r.items()
               if k != "_sim_id")  # no zero rows
    # and an export of the same view while the fault fires again
    server.counts.reset()
    for key, value in ONCE[fault].items():
        setattr(server.faults, key, value)
    clear_source_cache()
    for name, data_dir in (("local", demo_zip), ("remote", url)):
        assert guideloom.export_to_zarr("pointcloud-op10", tmp_path / f"{name}.zarr",
                                        data_dir=data_dir, where=_has_pointcloud,
                                        client="sync", show_progress=False)
    ref, got = (guideloom.load_export(tmp_path / f"{n}.zarr") for n in ("local", "remote"))
    assert list(got.sim_ids) == list(ref.sim_ids)
    for i in range(len(ref)):
        for key in ref[i]:
            np.testing.assert_array_equal(np.asarray(got[i][key]), np.asarray(ref[i][key]))


ALWAYS = {
    "reset mid-body": {"reset_after": {"/release/convex.zip": 100,
                                       "/release/concave.zip": 100}, "repeat": 0},
    "truncated": {"truncate_after": {"/release/convex.zip": 100,
                                     "/release/concave.zip": 100}, "repeat": 0},
    "wrong Content-Range": {"bad_content_range": True},
    "Range ignored": {"ignore_range": True},
    "slow": {"stall": 3.0, "stall_requests": 0},
    "503": {"script": ["503"] * 200},
}


@pytest.mark.fast_case("503")
@pytest.mark.parametrize("fault", list(ALWAYS))
def test_a_server_that_keeps_failing_ends_the_export_naming_experiment_and_url(release,
                                                                             tmp_path, fault):
    server, url = release
    # a first pass caches the manifest's archives' directories; then the member reads fail
    # (the server names versions: a server naming none has the directories read again on each
    # scan, tests/test_remote_cache.py)
    server.faults.validators = True
    ds = guideloom.load(url)
    assert _records("force-curve", dataset=ds)
    clear_source_cache()
    for key, value in ALWAYS[fault].items():
        setattr(server.faults, key, value)
    target = tmp_path / "out.zarr"
    start = time.monotonic()
    with pytest.raises((GuideloomError, OSError)) as info:  # OSError: the index table
        guideloom.export_to_zarr("pointcloud-op10", target, dataset=ds, where=_has_pointcloud,
                                 client="sync", show_progress=False)
    elapsed = time.monotonic() - start
    message = str(info.value)
    assert f"{url}/" in message, message
    if fault == "Range ignored":  # no retry changes what a server supports: fails at once
        assert "twice in a row" in message
        assert "answers HTTP Range requests" in message
    else:
        assert "after 3 attempts" in message, message
    if fault in ("reset mid-body", "truncated"):  # only the archives fail: a member's read
        assert "experiment" in message, message
        assert ".zip" in message, message
    elif ".h5" in message:  # faults on every file may fail the index table's read or an
        assert "experiment" in message, message  # archive's HEAD first: no experiment yet
    assert elapsed < 60, f"{fault}: gave up after {elapsed:.1f} s"
    with pytest.raises(Exception):  # noqa: B017 - whatever load_export raises for "absent"
        guideloom.load_export(target)


def test_remote_records_are_fetched_ahead_so_latencies_overlap(release, demo_zip, monkeypatch):
    server, url = release
    ds = guideloom.load(url)
    assert _records("force-curve", dataset=ds)  # directories and metadata now cached
    clear_source_cache()
    close_connections()
    server.faults.latency = 0.1
    server.counts.reset()
    start = time.monotonic()
    remote = _records("force-curve", dataset=ds)
    elapsed = time.monotonic() - start
    _assert_same(remote, _records("force-curve", data_dir=demo_zip))
    requests = server.counts.total_requests()
    assert requests >= len(remote)  # at least one chunk read per record
    # one after another these requests need requests x 0.1 s at the very least
    assert elapsed < 0.5 * requests * 0.1, (elapsed, requests)
    assert server.counts.connections > 1
    monkeypatch.setenv("GUIDELOOM_REMOTE_READAHEAD", "0")  # off: one request at a time
    start = time.monotonic()
    assert len(_records("force-curve", dataset=ds, sim_ids=list(range(6)))) == 6
    assert time.monotonic() - start >= 6 * 0.1
