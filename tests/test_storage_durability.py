"""A storage writer's close is a commit: once it returns, every shard it wrote survives a power
cut (ext4 shut down without flushing its journal, tests/power_loss.py), whole; and a writer
killed while it writes leaves the shards of the previous session as they were."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from guideloom import (
    DocumentPickleFormat,
    DocumentStorage,
    StreamNumpyFormat,
    StreamStorage,
)

ROOT = Path(__file__).resolve().parents[1]
SHARDS = 4
DTYPE = np.dtype([("tokens", "<i4"), ("document_ids", "<u4")])


def _stream_records(seed: int) -> list[tuple[int, dict[str, np.ndarray]]]:
    rng = np.random.default_rng(seed)
    out = []
    for doc in range(40):
        n = int(rng.integers(1, 9000))
        out.append((doc % SHARDS, {"tokens": rng.integers(0, 50_000, n, dtype="<i4"),
                                   "document_ids": np.full(n, doc, dtype="<u4")}))
    return out


def _write_stream(directory: Path, seed: int) -> list[np.ndarray]:
    """Write the records of ``seed``; each shard's expected stream, in order."""
    storage = StreamStorage(directory, StreamNumpyFormat(DTYPE))
    want: list[list[np.ndarray]] = [[] for _ in range(SHARDS)]
    with storage.sync_writer() as writer:
        for shard, rec in _stream_records(seed):
            writer.append(shard, rec)
            packed = np.empty(len(rec["tokens"]), DTYPE)
            packed["tokens"], packed["document_ids"] = rec["tokens"], rec["document_ids"]
            want[shard].append(packed)
    return [np.concatenate(w) for w in want]


def _read_stream(directory: Path) -> list[np.ndarray]:
    storage = StreamStorage(directory, StreamNumpyFormat(DTYPE))
    with storage.sync_reader() as reader:
        lengths = reader.shard_lengths
        starts = np.concatenate(([0], np.cumsum(lengths)))
        out = []
        for shard, n in enumerate(lengths):
            fields = reader.read(int(starts[shard]), int(n))  # {field: array}
            packed = np.empty(int(n), DTYPE)
            for name in DTYPE.names:
                packed[name] = fields[name]
            out.append(packed)
        return out


def test_a_stream_writers_shards_survive_a_power_cut_right_after_close(disk):
    directory = disk.path / "stream"
    want = _write_stream(directory, seed=1)
    disk.power_loss()  # nothing else synced the disk since close returned
    got = _read_stream(directory)
    assert len(got) == SHARDS
    for shard in range(SHARDS):
        np.testing.assert_array_equal(got[shard], want[shard])
    assert not [p.name for p in directory.iterdir() if p.name.endswith(".tmp")]


def test_a_replacing_session_survives_a_power_cut_whole(disk):
    directory = disk.path / "stream"
    _write_stream(directory, seed=1)
    os.sync()  # the first session is on disk for long
    want = _write_stream(directory, seed=2)
    disk.power_loss()
    got = _read_stream(directory)
    for shard in range(SHARDS):
        np.testing.assert_array_equal(got[shard], want[shard])


def test_document_shards_survive_a_power_cut_right_after_close(disk):
    documents = DocumentStorage(disk.path / "docs", DocumentPickleFormat())
    with documents.sync_writer() as writer:
        for i in range(30):
            writer.append(i % SHARDS, {"i": i, "text": "x" * i})
    disk.power_loss()
    reopened = DocumentStorage(disk.path / "docs", DocumentPickleFormat())
    assert len(list((disk.path / "docs").glob("shard-*.gls"))) == SHARDS
    with reopened.sync_reader() as reader:
        assert sorted(reader.read(i)["i"] for i in range(30)) == list(range(30))


KILLED_WRITER = """
import sys, numpy as np
from guideloom import StreamNumpyFormat, StreamStorage
dtype = np.dtype([("tokens", "<i4"), ("document_ids", "<u4")])
storage = StreamStorage(sys.argv[1], StreamNumpyFormat(dtype))
writer = storage.sync_writer().__enter__()
for doc in range(10_000):
    n = 4096
    writer.append(doc % 4, {"tokens": np.arange(n, dtype="<i4"),
                            "document_ids": np.full(n, doc, dtype="<u4")})
    if doc == 50:
        print("writing", flush=True)
        sys.stdin.readline()  # the test kills the process here, mid-session
"""


def test_a_writer_killed_mid_session_leaves_the_previous_shards(tmp_path):
    directory = tmp_path / "stream"
    want = _write_stream(directory, seed=3)
    proc = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(directory)],
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "writing"
        proc.kill()  # SIGKILL of the process this test started
    finally:
        proc.wait(timeout=60)
    assert proc.returncode == -9
    got = _read_stream(directory)
    for shard in range(SHARDS):
        np.testing.assert_array_equal(got[shard], want[shard])


@pytest.mark.parametrize("shards", [1, 3])
def test_close_leaves_no_temporary_files(tmp_path, shards):
    storage = StreamStorage(tmp_path / "s", StreamNumpyFormat(DTYPE))
    with storage.sync_writer() as writer:
        for shard in range(shards):
            writer.append(shard, {"tokens": np.arange(5, dtype="<i4"),
                                  "document_ids": np.zeros(5, dtype="<u4")})
    assert sorted(p.name for p in (tmp_path / "s").iterdir()
                  if not p.name.startswith(".")) == [f"shard-{i:06d}.gls" for i in range(shards)]
    assert not [p for p in (tmp_path / "s").iterdir() if p.name.endswith(".tmp")]


BIG_SESSION = """
import sys, numpy as np
from guideloom import StreamNumpyFormat, StreamStorage
dtype = np.dtype([("tokens", "<i4"), ("document_ids", "<u4")])
storage = StreamStorage(sys.argv[1], StreamNumpyFormat(dtype))
writer = storage.sync_writer().__enter__()
for doc in range(1200):  # ~80 MB over 3 shards: many whole buffers written directly
    writer.append(doc % 3, {"tokens": np.full(8192, -doc, dtype="<i4"),
                            "document_ids": np.full(8192, doc, dtype="<u4")})
print("writing", flush=True)
sys.stdin.readline()  # the test kills the process here: this session is never acknowledged
"""


def test_what_a_closed_writer_acknowledged_survives_a_power_cut_after_direct_writes(disk):
    """Shards larger than the write buffer (their blocks written with direct I/O while they
    grew, by the helper thread), with a kernel copy of published records in the middle: once
    ``close`` returned, a power cut loses none of it, even while another session was writing
    the same shards when the power went."""
    from guideloom.storage.copying import ShardSource

    directory = disk.path / "stream"
    storage = StreamStorage(directory, StreamNumpyFormat(DTYPE))
    rng = np.random.default_rng(7)

    def record(doc: int, n: int) -> tuple[dict[str, np.ndarray], np.ndarray]:
        rec = {"tokens": rng.integers(0, 50_000, n, dtype="<i4"),
               "document_ids": np.full(n, doc, dtype="<u4")}
        packed = np.empty(n, DTYPE)
        packed["tokens"], packed["document_ids"] = rec["tokens"], rec["document_ids"]
        return rec, packed

    first: list[list[np.ndarray]] = [[], []]
    with storage.sync_writer() as writer:  # the session whose records the next one copies
        for doc in range(60):
            rec, packed = record(doc, 8192 + doc)
            writer.append(doc % 2, rec)
            first[doc % 2].append(packed)
    os.sync()
    want: list[list[np.ndarray]] = [[], [], []]
    with storage.sync_writer() as writer:  # acknowledged when the block ends
        sources = writer.published_shards(directory)
        for doc in range(600):  # ~40 MB over 3 shards, past many 1 MiB buffers
            rec, packed = record(1000 + doc, 8192 if doc % 7 else 1 + doc)
            writer.append(doc % 3, rec)
            want[doc % 3].append(packed)
            if doc == 300:  # records of the first session copied by the kernel, mid-shard
                source = ShardSource(sources.paths[1], sources.footers[1])
                try:
                    writer.copy_records(0, source, 3, 20)
                finally:
                    source.close()
                want[0].extend(first[1][3:23])
    expected = [np.concatenate(w) for w in want]
    proc = subprocess.Popen([sys.executable, "-c", BIG_SESSION, str(directory)],
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "writing"
        proc.kill()  # SIGKILL of the process this test started: its session is unacknowledged
    finally:
        proc.wait(timeout=60)
    disk.power_loss()  # nothing synced the disk since the acknowledged close returned
    got = _read_stream(directory)
    assert len(got) == 3
    for shard in range(3):
        np.testing.assert_array_equal(got[shard], expected[shard])


def test_shards_filled_one_after_another_survive_a_power_cut_after_close(disk):
    """Each shard grown past many buffers before the next starts (as a benchmark or an export
    task writes them): several direct writes of a shard were under way at once and the writer
    filled buffers while they ran; once ``close`` returned (one fsync of all the shards
    together, then the renames), a power cut loses none of it."""
    directory = disk.path / "stream"
    storage = StreamStorage(directory, StreamNumpyFormat(DTYPE))
    rng = np.random.default_rng(11)
    want: list[list[np.ndarray]] = [[] for _ in range(SHARDS)]
    with storage.sync_writer() as writer:
        for doc in range(480):  # ~32 MB, shard by shard: 8 MB each, past many 1 MiB buffers
            n = 8192 if doc % 5 else int(rng.integers(1, 9000))
            rec = {"tokens": rng.integers(0, 50_000, n, dtype="<i4"),
                   "document_ids": np.full(n, doc, dtype="<u4")}
            writer.append(doc // 120, rec)
            packed = np.empty(n, DTYPE)
            packed["tokens"], packed["document_ids"] = rec["tokens"], rec["document_ids"]
            want[doc // 120].append(packed)
    disk.power_loss()  # nothing synced the disk since close returned
    got = _read_stream(directory)
    assert len(got) == SHARDS
    for shard in range(SHARDS):
        np.testing.assert_array_equal(got[shard], np.concatenate(want[shard]))


def test_a_shard_that_cannot_be_flushed_publishes_no_shard_of_the_session(tmp_path,
                                                                        monkeypatch):
    """The close fsyncs every sealed shard before it renames any: one fsync failing (EIO
    from the disk) raises naming that shard's file, and the session publishes nothing (the
    previous shards stay whole, no temporary file is left)."""
    import errno

    from guideloom.runtime import flush

    directory = tmp_path / "s"
    before = _write_stream(directory, seed=1)
    storage = StreamStorage(directory, StreamNumpyFormat(DTYPE))
    writer = storage.sync_writer()
    for shard, rec in _stream_records(seed=2):
        writer.append(shard, rec)
    doomed = writer._shards[2].file.fileno()
    real = flush._fsync

    def failing(fd: int) -> OSError | None:
        if fd == doomed:
            return OSError(errno.EIO, "Input/output error")
        return real(fd)

    monkeypatch.setattr(flush, "_fsync", failing)
    with pytest.raises(OSError, match=r"cannot flush .*\.shard-000002\.gls\..*\.tmp"):
        writer.close()
    monkeypatch.undo()
    got = _read_stream(directory)
    for shard in range(SHARDS):
        np.testing.assert_array_equal(got[shard], before[shard])
    assert not [p for p in directory.iterdir() if p.name.endswith(".tmp")]
