"""HTTPIO: GuideLoom shards read from a real HTTP server (tests/http_server.py) on 127.0.0.1."""

from __future__ import annotations

import asyncio
import pickle

import numpy as np
import pytest

from guideloom import (
    DocumentDataset,
    DocumentPickleFormat,
    DocumentStorage,
    StreamDataset,
    StreamNumpyFormat,
    StreamStorage,
    StreamWithMetaStorage,
)
from guideloom.storage import StorageError
from guideloom.storage.http import HTTPIO
from tests.http_server import serve
from tests.test_guideloom_parity import ConceptMeta, MyMeta

pytest.importorskip("aiohttp", reason="HTTPIO needs aiohttp (the http and test extras)")

DTYPE = np.dtype([("tokens", "<i4"), ("document_ids", "<u4")])


def write_stream(directory, shards=3, per_shard=5000, seed=0):
    rng = np.random.default_rng(seed)
    storage = StreamStorage(directory, StreamNumpyFormat(DTYPE))
    with storage.sync_writer() as writer:
        for shard in range(shards):
            for doc in range(4):
                n = per_shard // 4 + int(rng.integers(0, 50))
                writer.append(shard, {"tokens": rng.integers(0, 50_000, n),
                                      "document_ids": np.full(n, shard * 10 + doc)})
    return storage


def as_lists(window):
    return {k: v.tolist() for k, v in window.items()}


@pytest.fixture
def served(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    with serve(root) as (base, stats):
        yield root, base, stats


def test_stream_windows_equal_local_reads(served):
    root, base, stats = served
    local = write_stream(root / "tokens")
    remote = StreamStorage(f"{base}/tokens", StreamNumpyFormat(DTYPE),
                           read_interface=HTTPIO(readahead=64 << 10, tail=4096))
    with StreamDataset(local, 333).sync_reader() as reader:
        expected = [as_lists(w) for w in reader]
    with StreamDataset(remote, 333).sync_reader() as reader:
        assert len(reader) == len(expected) > 40
        got = [as_lists(reader[i]) for i in range(len(reader))]
        sample = np.random.default_rng(1).permutation(len(reader))[:25]
        shuffled = [as_lists(reader[int(i)]) for i in sample]
    assert got == expected
    assert shuffled == [expected[int(i)] for i in sample]
    # One keep-alive session serves every request; read-ahead makes windows cheaper than requests.
    assert stats.connections < stats.requests / 5, vars(stats)
    assert stats.range_requests < len(expected) + len(sample), vars(stats)


def test_async_reads_equal_local(served):
    root, base, _ = served
    local = write_stream(root / "tokens", seed=3)
    remote = StreamStorage(f"{base}/tokens", StreamNumpyFormat(DTYPE), read_interface=HTTPIO())
    with StreamDataset(local, 1000).sync_reader() as reader:
        expected = [as_lists(w) for w in reader]

    async def main():
        async with StreamDataset(remote, 1000).async_reader() as reader:
            return [as_lists(w) for w in await reader[0 : len(reader)]]

    assert asyncio.run(main()) == expected


def test_documents_and_stream_with_meta_over_http(served):
    root, base, _ = served
    documents = DocumentStorage(root / "docs", DocumentPickleFormat())
    records = [{"i": i, "blob": bytes(range(i % 256)) * 40} for i in range(30)]
    with documents.sync_writer() as writer:
        for i, record in enumerate(records):
            writer.append(i % 3, record)
    meta = StreamWithMetaStorage(root / "meta", ConceptMeta())
    with meta.sync_writer() as writer:
        writer.append(0, MyMeta(np.arange(6), [[1], [1], [2], [2], [2], [3, 4]]))
        writer.append(1, MyMeta(np.arange(6, 9), [[5], [6], [6]]))
    remote_docs = DocumentStorage(f"{base}/docs/", DocumentPickleFormat(),
                                  read_interface=HTTPIO(readahead=0))
    with DocumentDataset(documents).sync_reader() as reader:
        expected = list(reader)
    with DocumentDataset(remote_docs).sync_reader() as reader:
        assert list(reader) == expected
    remote_meta = StreamWithMetaStorage(f"{base}/meta", ConceptMeta(), read_interface=HTTPIO)

    async def main():
        async with remote_docs.async_reader() as reader:
            docs = await reader.read_many(np.arange(30)[::-1])
        async with remote_meta.async_reader() as reader:
            window = await reader.read(4, 4)
        return docs, window

    docs, window = asyncio.run(main())
    assert docs == expected[::-1]
    assert window.tokens.tolist() == [4, 5, 6, 7]
    assert window.concepts == [[2], [3, 4], [5], [6]]


def test_missing_shard_is_an_error_naming_the_url(served):
    root, base, _ = served
    write_stream(root / "tokens")
    (root / "tokens" / "shard-000001.gls").unlink()
    fmt = StreamNumpyFormat(DTYPE)
    with pytest.raises(StorageError, match=rf"{base}/tokens/shard-000001\.gls"):
        StreamStorage(f"{base}/tokens", fmt, read_interface=HTTPIO()).sync_reader()
    strict = HTTPIO(num_shards=3)
    with pytest.raises(FileNotFoundError, match=rf"{base}/tokens/shard-000001\.gls.*404"):
        StreamStorage(f"{base}/tokens", fmt, read_interface=strict).sync_reader()
    with pytest.raises(FileNotFoundError, match=rf"{base}/nowhere"):
        StreamStorage(f"{base}/nowhere", fmt, read_interface=HTTPIO()).sync_reader()


def test_server_error_is_an_error_naming_the_url(served):
    root, base, stats = served
    write_stream(root / "tokens")
    fmt = StreamNumpyFormat(DTYPE)
    stats.fail["/tokens/shard-000002.gls"] = 500
    with pytest.raises(OSError, match=rf"{base}/tokens/shard-000002\.gls.*500"):
        StreamStorage(f"{base}/tokens", fmt, read_interface=HTTPIO(num_shards=3)).sync_reader()
    stats.fail.clear()
    remote = StreamStorage(f"{base}/tokens", fmt, read_interface=HTTPIO(readahead=0, tail=64))
    reader, areader = remote.sync_reader(), remote.async_reader()
    first = reader.read(0, 10)
    stats.fail["/tokens/shard-000000.gls"] = 500  # the server breaks after the shards are open
    with pytest.raises(OSError, match=rf"{base}/tokens/shard-000000\.gls.*HTTP 500"):
        reader.read(100, 10)  # not in the tail or the last read's buffer
    with pytest.raises(OSError, match=rf"{base}/tokens/shard-000000\.gls.*HTTP 500"):
        asyncio.run(areader.read(100, 10))
    reader.close()
    areader.close()
    assert len(first["tokens"]) == 10


def test_server_ignoring_range_is_refused(served):
    root, base, stats = served
    write_stream(root / "tokens")
    stats.ignore_range = True
    with pytest.raises(OSError, match=rf"{base}/tokens/shard-000000\.gls.*Range"):
        StreamStorage(f"{base}/tokens", StreamNumpyFormat(DTYPE),
                      read_interface=HTTPIO(tail=64)).sync_reader()


def test_remote_storage_pickles_and_is_read_only(served):
    root, base, _ = served
    write_stream(root / "tokens", shards=1)
    remote = pickle.loads(pickle.dumps(
        StreamStorage(f"{base}/tokens", StreamNumpyFormat(DTYPE), read_interface=HTTPIO())))
    assert remote.directory == f"{base}/tokens"
    with remote.sync_reader() as reader:
        assert len(reader) > 0
    with pytest.raises(ValueError, match="read-only"):
        remote.sync_writer()
