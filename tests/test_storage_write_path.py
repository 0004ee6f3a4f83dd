"""StreamStorage's write path: records gathered in a buffer read back exactly as appended."""

from __future__ import annotations

import numpy as np
import pytest

from guideloom import StreamNumpyFormat, StreamStorage
from guideloom.storage import append_file

DTYPE = np.dtype([("tokens", "<i4"), ("document_ids", "<u4")])


def _records(seed: int, count: int, longest: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    out = []
    for doc in range(count):
        n = int(rng.integers(0, longest))
        out.append({"tokens": rng.integers(-2**31, 2**31 - 1, size=n, dtype=np.int32),
                    "document_ids": np.full(n, doc, dtype="<u4")})
    return out


def _read_back(storage: StreamStorage) -> np.ndarray:
    with storage.sync_reader() as reader:
        whole = reader.read(0, len(reader))
        return np.rec.fromarrays([whole["tokens"], whole["document_ids"]], dtype=DTYPE)


@pytest.mark.parametrize("gather_bytes", [4096, 8192, 1 << 20])
def test_gathered_records_read_back_in_order(tmp_path, monkeypatch, gather_bytes):
    # tiny buffers force the paths: record larger than the buffer, buffer full, buffer reused
    monkeypatch.setattr(append_file, "CAPACITY", gather_bytes)
    records = _records(1, 300, 200)
    storage = StreamStorage(tmp_path, StreamNumpyFormat(DTYPE))
    with storage.sync_writer() as writer:
        for i, rec in enumerate(records):
            writer.append(i % 3, rec)
        assert writer.elements(1) == sum(len(r["tokens"]) for r in records[1::3])
    expected = np.concatenate([np.rec.fromarrays([r["tokens"], r["document_ids"]], dtype=DTYPE)
                               for k in range(3) for r in records[k::3]])
    got = _read_back(storage)
    assert got.tobytes() == expected.tobytes()
    with storage.sync_reader() as reader:
        assert reader.num_shards == 3
        lengths = [sum(len(r["tokens"]) for r in records[k::3]) for k in range(3)]
        assert reader.shard_lengths == lengths


def test_rejected_record_after_gathering_keeps_earlier_records(tmp_path, monkeypatch):
    monkeypatch.setattr(append_file, "CAPACITY", 4096)
    storage = StreamStorage(tmp_path, StreamNumpyFormat(DTYPE))
    good = _records(2, 20, 50)
    with storage.sync_writer() as writer:
        for rec in good[:10]:
            writer.append(0, rec)
        with pytest.raises(ValueError, match="document_ids"):
            writer.append(0, {"tokens": np.zeros(3, np.int32),
                              "document_ids": np.array([1, 2, -1])})  # -1 does not fit <u4
        with pytest.raises(ValueError, match="unexpected field"):
            writer.append(0, {**good[10], "extra": np.zeros(len(good[10]["tokens"]))})
        for rec in good[10:]:
            writer.append(0, rec)
    expected = np.concatenate([np.rec.fromarrays([r["tokens"], r["document_ids"]], dtype=DTYPE)
                               for r in good])
    assert _read_back(storage).tobytes() == expected.tobytes()


def test_pack_into_matches_pack_and_refuses_a_short_buffer():
    fmt = StreamNumpyFormat(DTYPE)
    rec = _records(3, 1, 40)[0] | {"tokens": np.arange(30, dtype=np.int64)}  # cast on packing
    rec["document_ids"] = np.full(30, 7, dtype="<u4")
    out = np.zeros(64, dtype=DTYPE)
    assert fmt.pack_into(rec, out) == 30
    assert out[:30].tobytes() == fmt.pack(rec).tobytes()
    assert (out[30:] == np.zeros(34, dtype=DTYPE)).all()
    assert fmt.pack_into(rec, np.zeros(29, dtype=DTYPE)) is None
    plain = StreamNumpyFormat("<u2")
    buf = np.zeros(5, "<u2")
    assert plain.pack_into([1, 2, 3], buf) == 3
    assert buf.tolist() == [1, 2, 3, 0, 0]


def test_early_writeback_keeps_the_shard_intact(tmp_path, monkeypatch):
    # without direct I/O (as where the file system refuses it) every byte is written buffered
    # and the write-back is started as the shard grows
    monkeypatch.setattr(append_file, "O_DIRECT", 0)
    monkeypatch.setattr(append_file, "WRITEBACK_EVERY", 1000)  # ask for writeback many times
    monkeypatch.setattr(append_file, "CAPACITY", 4096)
    calls = []
    original = append_file.AppendFile._start_writeback
    monkeypatch.setattr(append_file.AppendFile, "_start_writeback",
                        lambda self, end: (calls.append(end), original(self, end)))
    records = _records(4, 200, 300)
    storage = StreamStorage(tmp_path, StreamNumpyFormat(DTYPE))
    with storage.sync_writer() as writer:
        for rec in records:
            writer.append(0, rec)
    assert len(calls) > 10
    assert calls == sorted(calls)
    expected = np.concatenate([np.rec.fromarrays([r["tokens"], r["document_ids"]], dtype=DTYPE)
                               for r in records])
    assert _read_back(storage).tobytes() == expected.tobytes()
