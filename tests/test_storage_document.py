"""DocumentStorage, DocumentPickleFormat and DocumentDataset."""

from __future__ import annotations

import json

import numpy as np
import pytest

from guideloom import DocumentDataset, DocumentPickleFormat, DocumentStorage
from guideloom.storage import FormatContractError, StorageError
from guideloom.storage.io import MmapIO, PosixPreadIO, SeekIO
from guideloom.storage.shards import shard_name
from guideloom.storage.types import DocumentStorageFormat

BACKENDS = [SeekIO, MmapIO, PosixPreadIO]


def documents():
    return [
        {"id": 0, "tokens": np.arange(5)},
        {"id": 1, "text": "x" * 1000},
        {"id": 2},
        {"id": 3, "tokens": np.arange(3, dtype=np.uint16)},
        {"id": 4, "nested": [1, (2, 3)]},
    ]


def write(directory, layout):
    storage = DocumentStorage(directory, DocumentPickleFormat())
    docs = documents()
    with storage.sync_writer() as writer:
        for shard, ids in enumerate(layout):
            writer.create(shard)
            for i in ids:
                writer.append(shard, docs[i])
    return storage


def same(a, b):
    assert a.keys() == b.keys()
    for key in a:
        if isinstance(a[key], np.ndarray):
            np.testing.assert_array_equal(a[key], b[key])
            assert a[key].dtype == b[key].dtype
        else:
            assert a[key] == b[key]


@pytest.mark.parametrize("backend", BACKENDS)
def test_documents_across_shards(tmp_path, backend):
    write(tmp_path, [[0, 1], [], [2], [3, 4]])
    storage = DocumentStorage(tmp_path, DocumentPickleFormat(), read_interface=backend)
    docs = documents()
    with storage.sync_reader() as reader:
        assert len(reader) == 5
        assert reader.num_shards == 4
        for i in range(5):
            same(reader.read(i), docs[i])
        with pytest.raises(IndexError):
            reader.read(5)
    with DocumentDataset(storage).sync_reader() as reader:
        assert len(reader) == 5
        same(reader[np.int64(3)], docs[3])
        same(reader[-1], docs[4])
        assert [d["id"] for d in reader[1:4]] == [1, 2, 3]
        assert [d["id"] for d in reader.get_many(np.array([4, 0, 4]))] == [4, 0, 4]
        with pytest.raises(IndexError):
            reader[5]
        with pytest.raises(IndexError):
            reader.get_many([0, -6])


class JsonFormat:
    """A custom document format that records the shard it was read from."""

    def pack(self, data):
        return json.dumps(data).encode()

    def unpack(self, encoded, shard):
        return {"shard": shard, **json.loads(encoded)}


def test_custom_document_format(tmp_path):
    fmt = JsonFormat()
    assert isinstance(fmt, DocumentStorageFormat)
    storage = DocumentStorage(tmp_path, fmt)
    with storage.sync_writer() as writer:
        writer.append(1, {"a": 1})
        writer.append(0, {"a": 0})
        writer.append(1, {"a": 2})
    with DocumentDataset(storage).sync_reader() as reader:
        assert reader[:] == [{"shard": 0, "a": 0}, {"shard": 1, "a": 1}, {"shard": 1, "a": 2}]


class NotBytesFormat(JsonFormat):
    def pack(self, data):
        return data


def test_document_errors(tmp_path):
    with DocumentStorage(tmp_path, NotBytesFormat()).sync_writer() as writer:
        with pytest.raises(FormatContractError, match="bytes"):
            writer.append(0, {"a": 1})
    write(tmp_path, [[0], [1, 2]])
    path = tmp_path / shard_name(1)
    path.write_bytes(path.read_bytes()[:-3])
    with pytest.raises(StorageError, match="not a complete"):
        DocumentStorage(tmp_path, DocumentPickleFormat()).sync_reader()
    (tmp_path / shard_name(1)).unlink()
    write(tmp_path / "gap", [[0], [], [1]])
    (tmp_path / "gap" / shard_name(1)).unlink()
    with pytest.raises(StorageError, match="missing"):
        DocumentDataset(DocumentStorage(tmp_path / "gap", DocumentPickleFormat())).sync_reader()


def test_pickle_format_is_documented_as_trusted_only():
    assert "trust" in DocumentPickleFormat.__doc__
