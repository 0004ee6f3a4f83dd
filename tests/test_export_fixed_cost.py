"""The fixed cost of an export (issue 42, item 1): its steps are measured, and what makes it
cheaper keeps every guarantee: an input's digest is reused only while its file is provably
unchanged, fsyncs issued together each still happen, and the partitions run on a given
Client with one question to the scheduler."""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import guideloom
from guideloom import config
from guideloom.export import clock
from guideloom.read.content import content_digest
from guideloom.runtime import flush

VIEW = "force-curve"


def crop_force(force):
    """The first 1000 rows (the demo's force curves vary in length)."""
    return np.asarray(force)[:1000]


def export(data: Path, target: Path, **kw):
    kw.setdefault("client", "sync")
    return guideloom.export.export(VIEW, target, kind="npy", data_dir=data, partition_size=6,
                                   transforms={"force_data": crop_force}, **kw)


def hashed_s(result) -> float:
    return sum(float(s["input_hash_s"]) for s in result.summaries)


def digests(target: Path) -> dict[str, str]:
    doc = json.loads((target / "provenance.json").read_text())
    ids = np.load(target / "sim_ids.npy").tolist()
    return {str(i): row["blake3"] for i, row in zip(ids, doc["inputs"], strict=True)}


def location(data: Path, sim_id: int):
    ds = guideloom.load(data)
    return ds.root.locations(ds)[sim_id]


@pytest.fixture
def old_data(demo_loose, tmp_path) -> Path:
    """A private copy of the loose demo data whose files last changed before the racy margin
    (a margin of 0 s: the tests' files are seconds old)."""
    data = tmp_path / "data"
    shutil.copytree(demo_loose, data)
    guideloom.clear_caches()  # no digest of another test's files
    return data


def test_the_steps_cover_the_run_without_gaps(demo_zip, tmp_path):
    began = time.perf_counter()
    result = export(demo_zip, tmp_path / "e")
    wall = time.perf_counter() - began
    steps = result.steps
    assert list(steps) == [s for s in clock.STEPS if s in steps]  # in the job's order
    assert {clock.RESOLVE, clock.LOCK, clock.SELECT, clock.PLAN, clock.STAGING, clock.RECORDS,
            clock.PROVENANCE, clock.CHECKSUMS, clock.CROISSANT, clock.FSYNC, clock.MANIFEST,
            clock.PUBLISH} <= set(steps)
    assert all(v >= 0 for v in steps.values())
    assert steps[clock.RECORDS] > 0
    # laps: together they are the call's wall time, up to the rounding and the call's frame
    assert sum(steps.values()) <= wall + 1e-3 * len(steps)
    assert sum(steps.values()) >= 0.9 * wall - 0.005
    assert clock.fixed_seconds(steps) == pytest.approx(sum(steps.values())
                                                       - steps[clock.RECORDS])
    # export.json keeps the steps up to its own writing, as the run measured them
    written = json.loads((tmp_path / "e" / "export.json").read_text())["steps"]
    assert written == {k: steps[k] for k in written}
    assert clock.MANIFEST not in written
    assert clock.FSYNC not in written


def test_the_records_and_the_scheduling_split_the_task_phase(demo_zip, tmp_path, dask_client):
    result = export(demo_zip, tmp_path / "e", client=dask_client)
    assert result.manifest["placement"]["mode"] == "client"
    spans = [(s["started"], s["started"] + s["seconds"]) for s in result.summaries]
    span = max(e for _, e in spans) - min(b for b, _ in spans)
    assert result.steps[clock.RECORDS] == pytest.approx(span, abs=2e-4)
    assert result.steps[clock.SCHEDULE] >= 0
    assert len(result.summaries) == result.manifest["n_partitions"]


def test_an_inputs_digest_is_reused_while_its_file_is_unchanged(old_data, tmp_path):
    with config.set(input_racy_s=0.0):
        first = export(old_data, tmp_path / "a")
        again = export(old_data, tmp_path / "b")
    assert hashed_s(first) > 0
    assert hashed_s(again) == 0  # every digest known: no input read for it
    assert digests(tmp_path / "b") == digests(tmp_path / "a")


def test_a_rewritten_input_is_hashed_again(old_data, tmp_path):
    with config.set(input_racy_s=0.0):
        export(old_data, tmp_path / "a")
        victim = old_data / "h5" / "0004.h5"
        before = os.stat(victim)
        blob = bytearray(victim.read_bytes())
        blob[-1] ^= 0xFF  # past the HDF5 data read: the export still reads, the bytes differ
        victim.write_bytes(bytes(blob))
        os.utime(victim, ns=(before.st_atime_ns, before.st_mtime_ns))  # size and mtime kept
        again = export(old_data, tmp_path / "b")
    fresh = content_digest(location(old_data, 4)).digest
    assert digests(tmp_path / "b")["4"] == fresh != digests(tmp_path / "a")["4"]
    rehashed = [s for s in again.summaries if float(s["input_hash_s"]) > 0]
    assert [s["index"] for s in rehashed] == [0]  # only the partition holding experiment 4


def test_a_recently_changed_input_is_never_trusted_from_the_cache(old_data, tmp_path):
    # with the default margin every file of the copy changed too recently to be trusted
    first = export(old_data, tmp_path / "a")
    again = export(old_data, tmp_path / "b")
    assert hashed_s(first) > 0
    assert hashed_s(again) > 0
    assert digests(tmp_path / "b") == digests(tmp_path / "a")


def test_verify_inputs_hashes_every_input(old_data, tmp_path):
    with config.set(input_racy_s=0.0):
        export(old_data, tmp_path / "a")
        again = export(old_data, tmp_path / "b", verify_inputs=True)
    assert all(float(s["input_hash_s"]) > 0 for s in again.summaries)


def test_fsyncs_issued_together_each_happen_and_report_their_errors(tmp_path):
    paths = [tmp_path / f"f{k}" for k in range(5)]
    fds = []
    try:
        for p in paths:
            fds.append(os.open(p, os.O_CREAT | os.O_WRONLY, 0o600))
            os.write(fds[-1], b"x" * 100)
        assert flush.fsync_all(fds) == [None] * 5
        closed = os.dup(fds[2])
        os.close(closed)  # a descriptor that no longer exists: its own error, the rest done
        results = flush.fsync_all([fds[0], closed, fds[1]])
        assert results[0] is None
        assert results[2] is None
        assert isinstance(results[1], OSError)
    finally:
        for fd in fds:
            os.close(fd)
    with pytest.raises(OSError, match="missing"):  # the error names the file
        flush.fsync_paths([str(paths[0]), str(tmp_path / "missing")])


def test_the_fsync_threads_stop_before_forking_workers(demo_zip, tmp_path):
    from guideloom.cluster.forked import fork_problem

    export(demo_zip, tmp_path / "a")  # the fsync helpers ran in this process
    assert fsync_threads()
    problem = fork_problem()  # (other threads of the test process may still be a reason)
    assert not fsync_threads()
    assert problem is None or "guideloom-fsync" not in problem
    export(demo_zip, tmp_path / "b")  # and they start again when needed
    assert fsync_threads()


def fsync_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("guideloom-fsync")]


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_a_cached_npy_header_reads_as_numpy_reads_it(tmp_path, version):
    from guideloom.formats.npy_header import read_npy_header

    path = tmp_path / "a.npy"
    array = np.arange(24, dtype=">i4").reshape(2, 3, 4)
    with open(path, "wb") as fh:
        np.lib.format.write_array(fh, array, version=version)
    for _ in range(2):  # parsed, then from the cache
        with open(path, "rb") as fh:
            header = read_npy_header(fh)
            assert fh.tell() == header.offset
        with open(path, "rb") as fh:
            major, _ = np.lib.format.read_magic(fh)
            shape, fortran, dtype = (np.lib.format.read_array_header_1_0 if major == 1 else
                                     np.lib.format.read_array_header_2_0)(fh)
            assert (header.shape, header.fortran, header.dtype, header.offset, header.major) \
                == (shape, fortran, dtype, fh.tell(), major)
    blob = path.read_bytes()
    damaged = tmp_path / "b.npy"
    damaged.write_bytes(blob.replace(b"'descr'", b"'dexcr'"))  # same length, numpy refuses it
    with open(damaged, "rb") as fh, pytest.raises(ValueError, match="dexcr"):
        read_npy_header(fh)


FRESH_PROCESS_EXPORT = """
import json, sys
import numpy as np
import guideloom

def crop_force(force):
    return np.asarray(force)[:1000]

result = guideloom.export.export("force-curve", sys.argv[2], kind="npy", data_dir=sys.argv[1],
                                 partition_size=6, transforms={"force_data": crop_force},
                                 client="sync")
print(json.dumps(sum(float(s["input_hash_s"]) for s in result.summaries)))
"""


def _export_in_a_fresh_process(data: Path, target: Path, cache: Path) -> float:
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root), "GUIDELOOM_CACHE_DIR": str(cache),
           "GUIDELOOM_INPUT_RACY_S": "0"}
    done = subprocess.run([sys.executable, "-c", FRESH_PROCESS_EXPORT, str(data), str(target)],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return float(done.stdout.strip().splitlines()[-1])


def test_a_digest_one_process_recorded_is_reused_by_the_next_only_while_provable(old_data,
                                                                                 tmp_path):
    """The digests live on in the user's private cache (``GUIDELOOM_CACHE_DIR``, 0700) under
    the same key as in a process (path, member, the file's full stat), so a fresh process
    exporting the same files hashes nothing; a file rewritten with its size and mtime put
    back has another ctime, so it is hashed again, and a damaged cache entry is ignored."""
    cache = tmp_path / "cache"
    assert _export_in_a_fresh_process(old_data, tmp_path / "a", cache) > 0
    assert _export_in_a_fresh_process(old_data, tmp_path / "b", cache) == 0
    assert digests(tmp_path / "b") == digests(tmp_path / "a")
    victim = old_data / "h5" / "0004.h5"
    before = os.stat(victim)
    blob = bytearray(victim.read_bytes())
    blob[-1] ^= 0xFF
    victim.write_bytes(bytes(blob))
    os.utime(victim, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert _export_in_a_fresh_process(old_data, tmp_path / "c", cache) > 0
    fresh = content_digest(location(old_data, 4)).digest
    assert digests(tmp_path / "c")["4"] == fresh != digests(tmp_path / "a")["4"]
    assert {k: v for k, v in digests(tmp_path / "c").items() if k != "4"} == {
        k: v for k, v in digests(tmp_path / "a").items() if k != "4"}
    for entry in (cache / "remote").glob("*.json"):  # a damaged entry is ignored, not trusted
        doc = json.loads(entry.read_text())
        if doc["kind"] == "input-digest":
            doc["payload"]["digest"] = "0" * 64
            entry.write_text(json.dumps(doc))
    assert _export_in_a_fresh_process(old_data, tmp_path / "d", cache) > 0
    assert digests(tmp_path / "d") == digests(tmp_path / "c")
