"""An export reads a local input once for its content digest and decodes it from there (issue
38): the digest is :func:`content_digest`'s, the rows are the plain path's, a change while the
export reads is still caught, an input over ``input_hold_mb`` is hashed beside its decode as
before, and a truncated input fails naming the experiment.

Every file is real (demo data written by :func:`guideloom.make_demo_data`), read by the real
native reader or h5py.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

import guideloom
from guideloom import config
from guideloom.errors import CorruptDataError, ExperimentReadError
from guideloom.read.content import Hasher, ReadCheck, content_digest, hold_limit
from guideloom.read.locations import HeldLocation, Location
from guideloom.read.records import RecordReader

VIEW = "pointcloud-op10"
HOLD_MB = 256.0  # the held path is opt-in (input_hold_mb defaults to 0): these tests turn it on


@pytest.fixture(autouse=True)
def _hold_inputs(monkeypatch):
    monkeypatch.setenv("GUIDELOOM_INPUT_HOLD_MB", str(HOLD_MB))  # child processes too
    with config.set(input_hold_mb=HOLD_MB):
        yield


def _locations(data: Path) -> dict[int, Location]:
    ds = guideloom.load(data_dir=data)
    return ds.root.locations(ds)


def _with_scans(data: Path) -> list[int]:
    table = guideloom.load(data_dir=data).index()
    return [int(row[table.id_column]) for row in table.rows if row["has_pointcloud"]]


def _read(loc: Location, data: Path) -> dict[str, np.ndarray]:
    ds = guideloom.load(data_dir=data)
    return RecordReader(ds.views[VIEW]).read(loc, {})


@pytest.fixture
def loose(demo_loose, tmp_path) -> Path:
    target = tmp_path / "loose"
    shutil.copytree(demo_loose, target)
    return target


@pytest.fixture
def zipped(demo_copy) -> Path:
    return demo_copy


@pytest.mark.parametrize("layout", ["loose", "zipped"])
def test_a_held_input_has_content_digests_digest_and_is_decoded_from_memory(layout, request):
    data = request.getfixturevalue(layout)
    sim_id = _with_scans(data)[0]
    loc = _locations(data)[sim_id]
    plain = _read(loc, data)
    hasher = Hasher()
    try:
        hashing = hasher.start(loc)
        held = hashing.location
        assert isinstance(held, HeldLocation)
        assert held.held is not None
        assert hashing.result().digest == content_digest(loc).digest
        assert hashing.result().nbytes == content_digest(loc).nbytes
        assert held.held.digest == hashing.result().digest
        # the file's bytes zeroed (same size): the held location still reads the bytes held
        path = Path(loc.path)
        size = path.stat().st_size
        with open(path, "r+b") as fh:
            fh.write(bytes(size))
        again = _read(held, data)
        for alias, value in plain.items():
            np.testing.assert_array_equal(again[alias], value)
        with pytest.raises(ExperimentReadError):
            _read(loc, data)  # the file itself is no HDF5 any more
    finally:
        hasher.close()


@pytest.mark.parametrize("layout", ["loose", "zipped"])
def test_rows_and_digests_equal_the_plain_paths(layout, request, tmp_path):
    data = request.getfixturevalue(layout)
    ids = _with_scans(data)[:8]
    digests, rows = {}, {}
    for limit in (hold_limit(), 0):
        out = tmp_path / f"out-{limit}"
        with config.set(input_hold_mb=limit / (1 << 20)):
            result = guideloom.export.export(VIEW, out, kind="npy", data_dir=data, sim_ids=ids,
                                             client="sync", partition_size=3)
        digests[limit] = {k: v for s in result.summaries
                          for k, v in s["input_digests"].items()}
        exp = guideloom.load_export(out)
        rows[limit] = [exp[i] for i in range(len(exp))]
    assert digests[hold_limit()] == digests[0]
    assert len(digests[0]) == len(ids)
    locs = _locations(data)
    assert digests[0] == {str(i): content_digest(locs[i]).digest for i in ids}
    for ours, plain in zip(rows[hold_limit()], rows[0], strict=True):
        assert ours.keys() == plain.keys()
        for alias in plain:
            np.testing.assert_array_equal(ours[alias], plain[alias])


def test_an_input_over_the_limit_is_hashed_beside_its_decode(loose):
    loc = _locations(loose)[_with_scans(loose)[0]]
    size = Path(loc.path).stat().st_size
    for limit in (size - 1, 0):
        hasher = Hasher(limit=limit)
        try:
            hashing = hasher.start(loc)
            assert hashing.location is loc  # read from the file, hashed on the helper thread
            assert hashing.result().digest == content_digest(loc).digest
        finally:
            hasher.close()
    hasher = Hasher(limit=size)  # exactly the limit: held
    try:
        assert hasher.start(loc).location.held is not None
    finally:
        hasher.close()


def test_a_deflated_member_is_hashed_beside_its_decode(zipped):
    from tests.zip_helpers import rebuild_archive

    data = zipped
    for archive in data.glob("*.zip"):
        rebuild_archive(archive, compression=8)  # deflated
    loc = _locations(data)[_with_scans(data)[0]]
    assert not loc.stored
    hasher = Hasher()
    try:
        hashing = hasher.start(loc)
        assert hashing.location is loc
        assert hashing.result().digest == content_digest(loc).digest
    finally:
        hasher.close()


def test_a_file_changed_after_its_held_read_is_caught(loose):
    loc = _locations(loose)[_with_scans(loose)[0]]
    check = ReadCheck(loc, racy_ns=0)
    hasher = Hasher()
    try:
        hashing = hasher.start(loc)
        assert hashing.location.held is not None
        path = Path(loc.path)
        data = bytearray(path.read_bytes())
        data[-1] ^= 0xFF
        path.write_bytes(bytes(data))  # same size, other bytes
        with pytest.raises(ExperimentReadError, match=rf"experiment {loc.sim_id}: .* changed "
                                                      "while the export read it"):
            check.end(hashing.result())
    finally:
        hasher.close()


def test_a_racy_input_is_hashed_again_from_the_file_not_from_memory(loose, monkeypatch):
    """A file changed within ``input_racy_s`` of the read is hashed again after the decode;
    that second hash reads the file (it would prove nothing if it read the bytes held)."""
    import guideloom.read.content as content

    loc = _locations(loose)[_with_scans(loose)[0]]
    seen: list[Location] = []
    real = content.content_digest

    def recording(where: Location) -> content.Hashed:
        seen.append(where)
        return real(where)

    monkeypatch.setattr(content, "content_digest", recording)
    check = ReadCheck(loc, racy_ns=10**18)  # every file is "racy"
    hasher = Hasher()
    try:
        hashing = hasher.start(loc)
        assert hashing.location.held is not None
        assert not seen
        check.end(hashing.result())  # unchanged: the same digest again
    finally:
        hasher.close()
    assert seen == [loc]
    assert seen[0].held is None


def test_a_member_truncated_under_its_listing_fails_naming_the_experiment(zipped):
    locs = _locations(zipped)
    loc = locs[_with_scans(zipped)[0]]
    with open(loc.path, "r+b") as fh:
        fh.truncate(loc.header_offset + 200)  # the local header stays, the data is cut
    hasher = Hasher()
    try:
        with pytest.raises(ExperimentReadError,
                           match=rf"experiment {loc.sim_id}: .*{loc.member}: only \d+ of its "
                                 rf"{loc.size} bytes could be read .*ends early"):
            hasher.start(loc)
    finally:
        hasher.close()


def test_a_truncated_loose_file_fails_naming_the_experiment(loose, tmp_path):
    sim_id = _with_scans(loose)[1]
    path = loose / "h5" / f"{sim_id:04d}.h5"
    with open(path, "r+b") as fh:
        fh.truncate(os.path.getsize(path) // 2)
    with pytest.raises(CorruptDataError, match=rf"experiment {sim_id}\b.*{path.name}"):
        guideloom.export.export(VIEW, tmp_path / "out", kind="npy", data_dir=loose,
                                sim_ids=[sim_id], client="sync")


def test_the_buffer_is_reused_only_when_nothing_reads_it_any_more(loose):
    ids = _with_scans(loose)
    locs = _locations(loose)
    first, second = (locs[i] for i in ids[:2])
    hasher = Hasher()
    try:
        held = hasher.start(first).location.held
        assert held is not None
        first_buffer = held.data.obj
        kept = np.frombuffer(held.data, np.uint8)[:64]  # a reader keeps a view of its bytes
        before = kept.copy()
        nxt = hasher.start(second).location.held
        assert nxt is not None
        with pytest.raises(ValueError):
            held.data[0]  # the last input's own view is released: it reads no more
        np.testing.assert_array_equal(kept, before)  # a new buffer: the kept view is intact
        assert np.shares_memory(kept, np.frombuffer(nxt.data, np.uint8)) is False
        assert nxt.data.obj is not first_buffer
        del kept
        buffer_then = nxt.data.obj
        last = hasher.start(second).location.held  # nothing kept: the same buffer again
        assert last is not None
        assert last.data.obj is buffer_then
    finally:
        hasher.close()


def test_verify_crc_checks_the_held_bytes_of_a_damaged_member(zipped, tmp_path):
    ids = _with_scans(zipped)[:2]
    loc = _locations(zipped)[ids[0]]
    with open(loc.path, "r+b") as fh:  # one byte in the middle of the member's data
        fh.seek(loc.header_offset + loc.size // 2)
        byte = fh.read(1)
        fh.seek(-1, os.SEEK_CUR)
        fh.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(CorruptDataError, match=rf"experiment {ids[0]}: .*CRC"):
        guideloom.export.export(VIEW, tmp_path / "out", kind="npy", data_dir=zipped,
                                sim_ids=ids, client="sync", verify_crc=True)


def test_a_memory_source_hands_out_its_bytes_in_place_and_copies_on_read():
    from guideloom.read.byte_source import LocalFileSource, MemorySource

    buf = bytearray(range(256)) * 4
    src = MemorySource(memoryview(buf)[100:], "held", base=100)
    assert src.size() == len(buf)
    view = src.view(150, 10)
    assert view is not None
    assert bytes(view) == bytes(buf[150:160])
    assert np.shares_memory(np.frombuffer(view, np.uint8), np.frombuffer(buf, np.uint8))
    assert view.readonly
    copy = src.read(150, 10)
    assert isinstance(copy, bytes)
    assert copy == bytes(buf[150:160])
    for offset, size in ((99, 2), (len(buf) - 5, 6)):
        with pytest.raises(OSError, match="outside the bytes held"):
            src.view(offset, size)
    with LocalFileSource(__file__) as local:
        assert local.view(0, 10) is None  # a file's bytes are read, not held


def test_the_native_reader_decodes_held_chunks_in_place(tmp_path):
    """The point of holding an input: its chunks are decoded where they lie in the buffer.
    Only metadata is copied out of a memory source (a change that copies the chunks again,
    e.g. into a scratch buffer through ``readinto``, fails here)."""
    import h5py

    from guideloom.h5native import open_file
    from guideloom.read.byte_source import MemorySource

    class Counting(MemorySource):
        copied = 0

        def read(self, offset: int, size: int) -> bytes:
            Counting.copied += size
            return super().read(offset, size)

        def readinto(self, buffer, offset: int) -> int:
            got = super().readinto(buffer, offset)
            Counting.copied += got
            return got

    values = np.random.default_rng(0).random(1 << 20, dtype=np.float32)  # 4 MiB
    path = tmp_path / "f.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("z", data=values, chunks=(1 << 14,), compression="gzip",
                         shuffle=True)
        stored = f["z"].id.get_storage_size()
    blob = path.read_bytes()
    source = Counting(memoryview(bytearray(blob)), "f.h5")
    np.testing.assert_array_equal(open_file(source).read("z"), values)
    assert stored > 2 << 20
    assert Counting.copied < 256 << 10  # the metadata blocks, not the 64 chunks


def test_a_finished_partitions_buffer_serves_the_next_one(loose):
    """An op10 partition may hold one experiment: its hasher's buffer goes to the next
    hasher (its pages mapped already), unless a view of it is still alive."""
    from guideloom.runtime.caches import cache

    loc = _locations(loose)[_with_scans(loose)[0]]
    spare = cache("input_buffers")
    guideloom.clear_caches()

    def buffer(hasher: Hasher) -> object:
        held = hasher.start(loc).location.held
        assert held is not None
        return held.data.obj  # the bytearray the bytes were read into

    first = Hasher()
    used = buffer(first)
    first.close()
    assert [spare.get(k) for k in spare.keys()] == [used]  # noqa: SIM118
    second = Hasher()
    assert buffer(second) is used  # taken out of the cache
    assert spare.keys() == []
    held = second.start(loc).location.held
    assert held is not None
    kept = np.frombuffer(held.data, np.uint8)  # a reader's array on the buffer
    second.close()  # so it is not given to the next hasher
    assert spare.keys() == []
    third = Hasher()
    try:
        assert buffer(third) is not used
    finally:
        third.close()
    assert kept.size > 0
