"""Code written for GuideLoom 1.1 runs on guideloom: module paths, signatures, reader/writer API
and file backends (issue 20, items 6 to 8 and 11).

The facts checked here (module paths, names, signatures, behaviour) are GuideLoom 1.1's public
API; the tests themselves are written for guideloom.
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
import inspect
import os
import pathlib
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

import guideloom
from guideloom import (
    DocumentDataset,
    DocumentPickleFormat,
    DocumentStorage,
    StreamDataset,
    StreamNumpyFormat,
    StreamStorage,
    StreamWithMetaStorage,
)
from guideloom.errors import StorageError

ROOT = Path(__file__).resolve().parents[1]
SEED = Path("/work/shared/seeds/000_0b9d2ec8cfce518e.txt")

# GuideLoom 1.1's public modules and what each one exports (its __all__).
GUIDELOOM11_MODULES = {
    "guideloom": [
        "__version__", "DocumentDataset", "DocumentPickleFormat", "DocumentStorage",
        "StatefulDataLoader", "StreamDataset", "StreamNumpyFormat", "StreamStorage",
        "StreamWithMetaStorage", "io", "types",
    ],
    "guideloom.dataset": ["StreamDataset", "DocumentDataset"],
    "guideloom.dataset.document_dataset": [
        "DocumentDataset", "DocumentSyncReaderDataset", "DocumentAsyncReaderDataset"],
    "guideloom.dataset.stream_dataset": [
        "StreamDataset", "StreamSyncReaderDataset", "StreamAsyncReaderDataset"],
    "guideloom.filesystem": ["FileSystemDocument", "FileSystemStream"],
    "guideloom.filesystem.document": ["FileSystemDocument"],
    "guideloom.filesystem.stream": ["FileSystemStream"],
    "guideloom.io": ["MmapIO", "PosixPreadIO", "SeekIO"],
    "guideloom.io.mmap": ["MmapIO"],
    "guideloom.io.posix_pread": ["PosixPreadIO"],
    "guideloom.io.seek": ["SeekIO"],
    "guideloom.pytorch": ["StatefulDataLoader"],
    "guideloom.shuffle": ["FeistelShuffler"],
    "guideloom.shuffle.feistel": ["FeistelShuffler"],
    "guideloom.storage": ["StreamWithMetaStorage", "StreamStorage", "DocumentStorage"],
    "guideloom.storage.document_storage": ["DocumentStorage"],
    "guideloom.storage.stream_meta_storage": ["StreamWithMetaStorage"],
    "guideloom.storage.stream_storage": ["StreamStorage"],
    "guideloom.storage_format": ["DocumentPickleFormat", "StreamNumpyFormat"],
    "guideloom.storage_format.document_pickle_format": ["DocumentPickleFormat"],
    "guideloom.storage_format.stream_numpy_format": ["StreamNumpyFormat"],
    "guideloom.types": [
        "StorageFormat", "StreamWithMetaStorageFormat", "StreamStorageFormat",
        "DocumentStorageFormat", "UserBufferTypes", "StorageBufferTypes", "Vector",
        "SyncContextManager", "AsyncContextManager", "IOReaderAbstract", "IOSyncReaderAbstract",
        "IOAsyncReaderAbstract", "DatasetAbstract", "DatasetSyncReaderAbstract",
        "DatasetAsyncReaderAbstract", "StreamStorageAbstract", "StreamStorageSyncWriterAbstract",
        "StreamStorageSyncReaderAbstract", "StreamStorageAsyncReaderAbstract",
        "DocumentStorageAbstract", "DocumentStorageSyncWriterAbstract",
        "DocumentStorageSyncReaderAbstract", "DocumentStorageAsyncReaderAbstract",
        "StatefulDataLoaderStateDict",
    ],
    "guideloom.types.context_manager": ["AsyncContextManager", "SyncContextManager"],
    "guideloom.types.dataset": [
        "DatasetAbstract", "DatasetAsyncReaderAbstract", "DatasetSyncReaderAbstract"],
    "guideloom.types.document_storage": [
        "DocumentStorageAbstract", "DocumentStorageAsyncReaderAbstract",
        "DocumentStorageSyncReaderAbstract", "DocumentStorageSyncWriterAbstract"],
    "guideloom.types.document_storage_format": ["DocumentStorageFormat"],
    "guideloom.types.io_reader": [
        "IOAsyncReaderAbstract", "IOReaderAbstract", "IOSyncReaderAbstract"],
    "guideloom.types.primitive": ["StorageBufferTypes", "UserBufferTypes", "Vector"],
    "guideloom.types.stateful_dataloader": ["StatefulDataLoaderStateDict"],
    "guideloom.types.stream_storage": [
        "StreamStorageAbstract", "StreamStorageAsyncReaderAbstract",
        "StreamStorageSyncReaderAbstract", "StreamStorageSyncWriterAbstract"],
    "guideloom.types.stream_storage_format": ["StreamStorageFormat"],
    "guideloom.types.stream_with_meta_storage_format": ["StreamWithMetaStorageFormat"],
    "guideloom.version": ["__version__"],
}
TORCH_ONLY = {"StatefulDataLoader"}  # needs torch, as in 1.1
HAS_TORCH = importlib.util.find_spec("torch") is not None


# ------------------------------------------------------------------------- item 6 and 11: paths
@pytest.mark.parametrize("module_name", sorted(GUIDELOOM11_MODULES))
def test_every_guideloom11_module_path_imports_and_holds_its_names(module_name):
    if module_name == "guideloom.pytorch" and not HAS_TORCH:
        pytest.skip("guideloom.pytorch needs torch, as in GuideLoom 1.1")
    module = importlib.import_module(module_name)
    for name in GUIDELOOM11_MODULES[module_name]:
        if name in TORCH_ONLY and not HAS_TORCH:
            continue
        assert getattr(module, name) is not None, f"{module_name}.{name}"


def test_guideloom11_paths_give_the_same_objects_as_guideloom_paths():
    from guideloom import dataset, filesystem, io, storage_format, types, version
    from guideloom.shuffle import feistel
    from guideloom.storage import abstract, formats, stream_meta_storage
    from guideloom.storage import io as storage_io
    from guideloom.storage import types as storage_types

    assert dataset.StreamDataset is StreamDataset
    assert dataset.DocumentDataset is DocumentDataset
    assert io.SeekIO is storage_io.SeekIO
    assert io.PosixPreadIO is storage_io.PosixPreadIO
    assert storage_format.StreamNumpyFormat is formats.StreamNumpyFormat is StreamNumpyFormat
    assert types.StreamStorageFormat is storage_types.StreamStorageFormat
    assert types.DocumentStorageAbstract is abstract.DocumentStorageAbstract
    assert stream_meta_storage.StreamWithMetaStorage is StreamWithMetaStorage
    assert feistel.FeistelShuffler is importlib.import_module("guideloom.shuffle").FeistelShuffler
    assert version.__version__ == guideloom.__version__
    assert callable(filesystem.FileSystemStream)
    assert callable(filesystem.FileSystemDocument)


def test_guideloom11_paths_import_in_a_fresh_interpreter(tmp_path):
    """As a user script would: a new process, every 1.1 import line, nothing else loaded."""
    lines = [
        f"from {module} import {', '.join(n for n in names if n not in TORCH_ONLY)}"
        for module, names in GUIDELOOM11_MODULES.items()
        if [n for n in names if n not in TORCH_ONLY] and module != "guideloom.pytorch"
    ]
    script = tmp_path / "imports.py"
    script.write_text("\n".join(lines) + "\nprint('ok')\n")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_our_own_names_keep_working():
    from guideloom.storage import AsyncStreamReader, StreamReader  # noqa: F401
    from guideloom.storage.io import MmapIO, SeekIO, resolve_read_interface  # noqa: F401
    from guideloom.storage.types import FileReader, ReadInterface  # noqa: F401

    assert StreamNumpyFormat(dtype="<i4").stream_dtype == np.dtype("<i4")
    assert StreamNumpyFormat("<i4") == StreamNumpyFormat(stream_dtype="<i4")
    with pytest.raises(TypeError):
        StreamNumpyFormat()


# ------------------------------------------------------------------------- item 6: signatures
def test_guideloom11_signatures():
    params = inspect.signature(StreamStorage).parameters
    assert list(params)[:3] == ["storage_dir", "storage_format", "read_interface"]
    for storage in (DocumentStorage, StreamWithMetaStorage):
        assert list(inspect.signature(storage).parameters)[:2] == ["storage_dir", "storage_format"]
    assert list(inspect.signature(StreamNumpyFormat).parameters)[:2] == [
        "stream_dtype", "data_type"]
    assert "encoded_data" in inspect.signature(DocumentPickleFormat().unpack).parameters
    from guideloom.types import DocumentStorageFormat

    assert "encoded_data" in inspect.signature(DocumentStorageFormat.unpack).parameters
    from guideloom.io import PosixPreadIO

    assert inspect.signature(PosixPreadIO).parameters["advice"].kind is (
        inspect.Parameter.KEYWORD_ONLY)


def test_storages_take_storage_dir_by_keyword_and_expose_1_1_attributes(tmp_path):
    fmt = StreamNumpyFormat(np.dtype([("tokens", "<i4")]))
    storage = StreamStorage(storage_dir=tmp_path / "s", storage_format=fmt)
    assert storage.storage_dir == tmp_path / "s"
    assert storage.storage_format is fmt
    old_spelling = StreamStorage(directory=tmp_path / "s", storage_format=fmt)
    assert old_spelling.directory == storage.directory
    with pytest.raises(TypeError, match="one storage directory"):
        StreamStorage(tmp_path, fmt, directory=tmp_path)
    docs = DocumentStorage(storage_dir=tmp_path / "d", storage_format=DocumentPickleFormat())
    with docs.sync_writer() as writer:
        writer.append(0, {"a": 1})
    with docs.sync_reader() as reader:
        assert reader.read(global_index=0) == {"a": 1}


def test_stream_numpy_format_takes_data_type_and_subscripts():
    from typing import TypedDict

    class Tokens(TypedDict):
        tokens: np.ndarray

    fmt = StreamNumpyFormat(np.dtype([("tokens", "<i4")]), Tokens)
    assert fmt.pack({"tokens": np.arange(3)}).dtype == np.dtype([("tokens", "<i4")])
    assert StreamNumpyFormat[Tokens, np.void] is not None
    assert DocumentPickleFormat[dict] is not None


def test_generic_parameters_as_guideloom11_spells_them(tmp_path):
    from guideloom.types import (
        DocumentStorageFormat,
        StorageFormat,
        StreamStorageFormat,
        StreamWithMetaStorageFormat,
    )

    class Tokens(StreamStorageFormat[dict, dict, np.int32]):
        stream_dtype = np.dtype("<i4")

        def pack(self, data):
            return np.asarray(data["t"], dtype=self.stream_dtype)

        def unpack(self, stream, shard_lengths, shards):
            return {"t": stream, "shards": shards}

    assert Tokens.__orig_bases__[0].__args__ == (dict, dict, np.int32)
    assert StreamWithMetaStorageFormat[dict, dict, np.int64] is not None
    assert DocumentStorageFormat[bytes, bytes] is not None
    assert StorageFormat is not None
    storage = StreamStorage(tmp_path, Tokens())
    with storage.sync_writer() as writer:
        writer.append(1, {"t": [5, 6]})
        writer.append(0, {"t": [1, 2, 3]})
    with storage.sync_reader() as reader:
        window = reader.read(global_index=2, global_length=2)
    assert window["t"].tolist() == [3, 5]
    assert window["shards"].tolist() == [0, 1]


def test_our_classes_are_instances_of_the_guideloom11_bases(tmp_path):
    from guideloom import types

    fmt = StreamNumpyFormat(np.dtype([("tokens", "<i4")]))
    stream = StreamStorage(tmp_path / "s", fmt)
    docs = DocumentStorage(tmp_path / "d", DocumentPickleFormat())
    assert isinstance(stream, types.StreamStorageAbstract)
    assert isinstance(docs, types.DocumentStorageAbstract)
    with stream.sync_writer() as writer:
        assert isinstance(writer, types.StreamStorageSyncWriterAbstract)
        writer.append(0, {"tokens": np.arange(6)})
    with docs.sync_writer() as writer:
        assert isinstance(writer, types.DocumentStorageSyncWriterAbstract)
        writer.append(0, "x")
    with stream.sync_reader() as reader:
        assert isinstance(reader, types.StreamStorageSyncReaderAbstract)
    with docs.sync_reader() as reader:
        assert isinstance(reader, types.DocumentStorageSyncReaderAbstract)
    dataset = StreamDataset(stream, sequence_length=2)
    assert isinstance(dataset, types.DatasetAbstract)
    with dataset.sync_reader() as reader:
        assert isinstance(reader, types.DatasetSyncReaderAbstract)
        assert isinstance(reader, Sequence)
        assert [w["tokens"].tolist() for w in reversed(reader)] == [[4, 5], [2, 3], [0, 1]]
    with DocumentDataset(docs).sync_reader() as reader:
        assert isinstance(reader, Sequence)
        assert "x" in reader
        assert reader.count("x") == 1


def test_seed_tutorial_snippet_runs(tmp_path):
    """The 1.1 tutorial snippet in the seed document, run as a user script."""
    if SEED.exists():
        text = SEED.read_text()
        code = text[text.index("from pathlib import Path"):text.index("These are NumPy")]
    else:  # the same snippet, for machines without the shared seeds
        code = SNIPPET
    script = tmp_path / "tutorial.py"
    script.write_text(textwrap.dedent(code) + "\nprint('tutorial ok')\n")
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "tutorial ok" in done.stdout


SNIPPET = """
from pathlib import Path
from tempfile import TemporaryDirectory

import numpy as np

from guideloom import StreamDataset, StreamNumpyFormat, StreamStorage

dtype = np.dtype([("tokens", "<i4"), ("document_ids", "<u4"), ("loss_mask", "u1")])
with TemporaryDirectory() as directory:
    storage = StreamStorage(Path(directory), StreamNumpyFormat(dtype))
    with storage.sync_writer() as writer:
        writer.append(0, {"tokens": np.array([10, 11, 12], dtype="<i4"),
                          "document_ids": np.full(3, 7, dtype="<u4"),
                          "loss_mask": np.array([0, 1, 1], dtype="u1")})
        writer.append(1, {"tokens": np.array([13, 14, 15, 16, 17], dtype="<i4"),
                          "document_ids": np.full(5, 8, dtype="<u4"),
                          "loss_mask": np.array([0, 1, 1, 1, 1], dtype="u1")})
    with StreamDataset(storage, sequence_length=4).sync_reader() as reader:
        assert len(reader) == 2
        sample = reader[0]
        assert sample["tokens"].tolist() == [10, 11, 12, 13]
        assert sample["document_ids"].tolist() == [7, 7, 7, 8]
        assert sample["loss_mask"].tolist() == [0, 1, 1, 0]
    with StreamDataset(storage, sequence_length=3).sync_reader() as reader:
        assert len(reader) == 2
        assert reader[1]["tokens"].tolist() == [13, 14, 15]
"""


# ------------------------------------------------------------------------- item 7: reader/writer
TOKENS = np.dtype([("tokens", "<i4")])


def _tokens(values):
    return {"tokens": np.asarray(values, dtype="<i4")}


class _Concepts:
    """A stream-with-metadata format: one payload per record (its id as text)."""

    stream_dtype = np.dtype("<i4")

    def size(self, data):
        return len(data[1])

    def pack(self, data):
        ident, values = data
        for _ in values:
            yield ident, str(ident).encode()
        return np.asarray(values, dtype="<i4")

    def unpack(self, stream_data, document_shard, document_index, document_data):
        return stream_data.tolist(), [bytes(document_data[i]).decode() for i in document_index]


def _three_kinds(tmp_path):
    stream = StreamStorage(tmp_path / "stream", StreamNumpyFormat(TOKENS))
    docs = DocumentStorage(tmp_path / "docs", DocumentPickleFormat())
    meta = StreamWithMetaStorage(tmp_path / "meta", _Concepts())
    return stream, docs, meta


def test_writer_length_counts_this_session_and_raises_keyerror_otherwise(tmp_path):
    stream, docs, meta = _three_kinds(tmp_path)
    with stream.sync_writer() as writer:
        writer.append(2, _tokens([1, 2, 3]))
        writer.append(2, _tokens([4]))
        writer.append(0, _tokens([]))
        assert writer.length(2) == 4
        assert writer.length(0) == 0
        with pytest.raises(KeyError):
            writer.length(1)
    with docs.sync_writer() as writer:
        writer.append(0, "a")
        writer.append(0, "b")
        assert writer.length(0) == 2
        with pytest.raises(KeyError):
            writer.length(5)
    with meta.sync_writer() as writer:
        writer.append(1, (7, [1, 2, 3]))
        assert writer.length(1) == 3
        with pytest.raises(KeyError):
            writer.length(0)
    # a new session counts from zero (1.1: "since open()")
    with stream.sync_writer() as writer:
        writer.append(2, _tokens([9]))
        assert writer.length(2) == 1


def test_explicit_open_and_close_as_guideloom11_code_calls_them(tmp_path):
    stream, _docs, _ = _three_kinds(tmp_path)
    writer = stream.sync_writer()
    writer.open()
    assert stream.storage_dir.is_dir()
    writer.append(0, _tokens([1, 2]))
    writer.close()
    reader = stream.sync_reader()
    reader.open()
    assert reader.total_length == 2
    assert reader.num_shards == 1
    reader.close()

    async def main():
        async_reader = stream.async_reader()
        await async_reader.open()
        try:
            return (await async_reader.read(0, 2))["tokens"].tolist()
        finally:
            await async_reader.close()

    assert asyncio.run(main()) == [1, 2]


def test_reader_length_of_each_shard_sync_async_and_meta(tmp_path):
    stream, docs, meta = _three_kinds(tmp_path)
    with stream.sync_writer() as writer:
        writer.append(0, _tokens([1, 2, 3]))
        writer.append(1, _tokens([4]))
    with docs.sync_writer() as writer:
        for shard, count in ((0, 2), (1, 3)):
            for i in range(count):
                writer.append(shard, i)
    with meta.sync_writer() as writer:
        writer.append(0, (1, [1, 2]))
        writer.append(1, (2, [3, 4, 5]))
    with stream.sync_reader() as r:
        assert [r.length(0), r.length(1)] == [3, 1]
        with pytest.raises(IndexError, match="out of range"):
            r.length(2)
    with meta.sync_reader() as r:
        assert [r.length(0), r.length(1)] == [2, 3]
        with pytest.raises(IndexError, match="out of range"):
            r.length(-1)
    with docs.sync_reader() as r:
        assert [r.length(0), r.length(1)] == [2, 3]

    async def main():
        async with stream.async_reader() as r:
            s = [r.length(0), r.length(1)]
        async with meta.async_reader() as r:
            m = [r.length(0), r.length(1)]
            with pytest.raises(IndexError):
                r.length(2)
        async with docs.async_reader() as r:
            d = [r.length(0), r.length(1)]
        return s, m, d

    assert asyncio.run(main()) == ([3, 1], [2, 3], [2, 3])


def test_read_takes_global_index_and_global_length_keywords(tmp_path):
    stream, docs, meta = _three_kinds(tmp_path)
    with stream.sync_writer() as writer:
        writer.append(0, _tokens(range(10)))
    with meta.sync_writer() as writer:
        writer.append(0, (5, [1, 2, 3]))
    with docs.sync_writer() as writer:
        writer.append(0, "doc")
    with stream.sync_reader() as r:
        assert r.read(global_index=3, global_length=2)["tokens"].tolist() == [3, 4]
    with meta.sync_reader() as r:
        assert r.read(global_index=1, global_length=2) == ([2, 3], ["5", "5"])
    with docs.sync_reader() as r:
        assert r.read(global_index=0) == "doc"

    async def main():
        async with stream.async_reader() as r:
            a = (await r.read(global_index=8, global_length=2))["tokens"].tolist()
        async with docs.async_reader() as r:
            b = await r.read(global_index=0)
            c = await r.read_many(global_indexes=np.array([0, 0]))
        return a, b, c

    assert asyncio.run(main()) == ([8, 9], "doc", ["doc", "doc"])


def test_sync_read_many_in_request_order_and_checked_first(tmp_path):
    docs = DocumentStorage(tmp_path, DocumentPickleFormat())
    with docs.sync_writer() as writer:
        for i in range(5):
            writer.append(i % 2, f"d{i}")  # shard 0: d0 d2 d4, shard 1: d1 d3
    with docs.sync_reader() as r:
        assert r.read_many(np.array([4, 0, 3, 3], dtype=np.int64)) == ["d3", "d0", "d1", "d1"]
        assert r.read_many(np.arange(0, dtype=np.int64)) == []
        with pytest.raises(IndexError, match="outside of size"):
            r.read_many(np.array([0, 5]))


@pytest.mark.parametrize("backend", ["SeekIO", "MmapIO", "PosixPreadIO"])
def test_reads_past_the_end_continue_at_element_zero(tmp_path, backend):
    from guideloom import io

    stream = StreamStorage(tmp_path, StreamNumpyFormat(TOKENS), getattr(io, backend)())
    with stream.sync_writer() as writer:
        writer.append(0, _tokens([0, 1, 2]))
        writer.append(1, _tokens([3, 4]))
    with stream.sync_reader() as r:
        assert r.read(3, 4)["tokens"].tolist() == [3, 4, 0, 1]
        # longer than the stream: wraps more than once
        assert r.read(4, 12)["tokens"].tolist() == [4, 0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0]
        with pytest.raises(IndexError, match="outside of size"):
            r.read(5, 1)
        with pytest.raises(IndexError):
            r.read(0, -1)

    seen = {}

    class Segments:
        stream_dtype = np.dtype("<i4")

        def pack(self, data):
            return np.asarray(data, dtype="<i4")

        def unpack(self, stream, shard_lengths, shards):
            seen["segments"] = list(zip(shards.tolist(), shard_lengths.tolist(), strict=True))
            return stream.tolist()

    plain = StreamStorage(tmp_path / "plain", Segments())
    with plain.sync_writer() as writer:
        writer.append(0, [0, 1, 2])
        writer.append(1, [3, 4])
    with plain.sync_reader() as r:
        assert r.read(4, 5) == [4, 0, 1, 2, 3]
    assert seen["segments"] == [(1, 1), (0, 3), (1, 1)]


def test_meta_reads_past_the_end_carry_their_payloads(tmp_path):
    meta = StreamWithMetaStorage(tmp_path, _Concepts())
    with meta.sync_writer() as writer:
        writer.append(0, (1, [10, 11]))
        writer.append(1, (2, [12]))
    with meta.sync_reader() as r:
        assert r.read(2, 3) == ([12, 10, 11], ["2", "1", "1"])

    async def main():
        async with meta.async_reader() as r:
            return await r.read(1, 4)

    assert asyncio.run(main()) == ([11, 12, 10, 11], ["1", "2", "1", "1"])


def test_zero_length_reads_as_guideloom11(tmp_path):
    stream, _, meta = _three_kinds(tmp_path)
    with stream.sync_writer() as writer:
        writer.append(0, _tokens([5, 6]))
    with meta.sync_writer() as writer:
        writer.append(0, (3, [7]))
    with stream.sync_reader() as r:
        assert r.read(1, 0)["tokens"].tolist() == []  # inside the stream: an empty window
        with pytest.raises(IndexError, match="outside of size"):
            r.read(2, 0)  # at the end: outside, as in 1.1
        assert r.read_span(2, 0)["tokens"].tolist() == []  # guideloom's exact span allows it
    with meta.sync_reader() as r:
        assert r.read(0, 0) == ([], [])
        with pytest.raises(IndexError):
            r.read(1, 0)
    only_empty = StreamStorage(tmp_path / "zero", StreamNumpyFormat(TOKENS))
    with only_empty.sync_writer() as writer:
        writer.append(0, _tokens([]))
    with only_empty.sync_reader() as r:
        assert r.total_length == 0
        assert r.num_shards == 1
        with pytest.raises(IndexError, match="outside of size"):
            r.read(0, 0)


def test_an_empty_writer_session_leaves_a_readable_empty_storage(tmp_path):
    stream, docs, meta = _three_kinds(tmp_path)
    for storage in (stream, docs, meta):
        with storage.sync_writer():
            pass
        with storage.sync_reader() as r:
            assert r.num_shards == 0
            assert r.total_length == 0
            with pytest.raises(IndexError, match="out of range"):
                r.length(0)
    with docs.sync_reader() as r:
        assert r.read_many(np.arange(0, dtype=np.int64)) == []
        with pytest.raises(IndexError):
            r.read(0)
    with stream.sync_reader() as r, pytest.raises(IndexError):
        r.read(0, 0)
    with StreamDataset(stream, sequence_length=4).sync_reader() as r:
        assert len(r) == 0
        assert list(r) == []

    async def main():
        async with stream.async_reader() as r:
            return r.num_shards, r.total_length

    assert asyncio.run(main()) == (0, 0)
    # the empty storage is still typed: opening it as another kind is refused
    with pytest.raises(StorageError, match="empty 'stream' storage"):
        DocumentStorage(stream.storage_dir, DocumentPickleFormat()).sync_reader()
    # an empty directory nobody wrote is still an error (a wrong path, most likely)
    (tmp_path / "nothing").mkdir()
    with pytest.raises(StorageError, match="no shards"):
        StreamStorage(tmp_path / "nothing", StreamNumpyFormat(TOKENS)).sync_reader()
    # appending later makes a normal storage
    with stream.sync_writer() as writer:
        writer.append(0, _tokens([1]))
    with stream.sync_reader() as r:
        assert r.total_length == 1


def test_a_failed_session_commits_nothing_not_even_the_empty_marker(tmp_path):
    stream = StreamStorage(tmp_path / "s", StreamNumpyFormat(TOKENS))
    with pytest.raises(RuntimeError), stream.sync_writer():
        raise RuntimeError("boom")
    with pytest.raises((FileNotFoundError, StorageError)):
        stream.sync_reader()  # no storage was committed, not even an empty one


# ------------------------------------------------------------------------- item 8: I/O backends
@pytest.mark.parametrize("backend", ["SeekIO", "MmapIO", "PosixPreadIO"])
def test_backends_have_sync_and_async_reader_factories(tmp_path, backend):
    from guideloom import io, types

    path = tmp_path / "blob.bin"
    path.write_bytes(bytes(range(100)))
    interface = getattr(io, backend)()
    assert type(interface).is_supported() is True
    assert isinstance(interface, types.IOReaderAbstract)
    make = interface.sync_reader()
    reader = make(path)
    assert isinstance(reader, types.IOSyncReaderAbstract)
    reader.open()
    try:
        assert reader.filesize() == 100
        data = reader.read(10, 5)
        assert isinstance(data, bytearray | memoryview)
        assert bytes(data) == bytes(range(10, 15))
        with pytest.raises(IndexError):
            reader.read(-1, 2)
        with pytest.raises(IndexError):
            reader.read(98, 5)  # a short read
    finally:
        reader.close()
    with pytest.raises(FileNotFoundError):
        make(tmp_path / "missing.bin").open()

    async def main():
        areader = interface.async_reader()(path)
        assert isinstance(areader, types.IOAsyncReaderAbstract)
        await areader.open()
        try:
            size = await areader.filesize()
            chunk = bytes(await areader.read(95, 5))
            with pytest.raises(IndexError):
                await areader.read(99, 2)
        finally:
            await areader.close()
        return size, chunk

    assert asyncio.run(main()) == (100, bytes(range(95, 100)))


def test_posix_pread_io_advice(tmp_path):
    from guideloom.io import PosixPreadIO

    if not PosixPreadIO.is_supported(advice=True):
        pytest.skip("no posix_fadvise here")
    interface = PosixPreadIO(advice=True)
    assert interface.advice is True
    assert PosixPreadIO().advice is False
    assert repr(interface) == "PosixPreadIO(advice=True)"
    stream = StreamStorage(tmp_path, StreamNumpyFormat(TOKENS), read_interface=interface)
    with stream.sync_writer() as writer:
        writer.append(0, _tokens(range(1000)))
    with stream.sync_reader() as r:
        assert r.read(990, 20)["tokens"].tolist() == list(range(990, 1000)) + list(range(10))
    with pytest.raises(TypeError):
        PosixPreadIO(True)  # advice is keyword-only, as in 1.1
    import pickle

    assert pickle.loads(pickle.dumps(interface)).advice is True


def test_a_backend_written_for_guideloom11_reads_our_storages(tmp_path):
    """A user's IOReaderAbstract subclass (1.1's extension point) passed as read_interface."""
    from guideloom.types import IOAsyncReaderAbstract, IOReaderAbstract, IOSyncReaderAbstract

    opened = []

    class CountingSync(IOSyncReaderAbstract):
        def __init__(self, path):
            self.path = path
            self.handle = None

        def open(self):
            if not os.path.exists(self.path):
                raise FileNotFoundError(self.path)
            self.handle = open(self.path, "rb")  # noqa: SIM115 - closed in close()
            opened.append(pathlib.Path(self.path).name)

        def close(self):
            if self.handle is not None:
                self.handle.close()
                self.handle = None

        def filesize(self):
            return os.fstat(self.handle.fileno()).st_size

        def read(self, offset, size):
            if offset < 0:
                raise IndexError(offset)
            self.handle.seek(offset)
            data = bytearray(self.handle.read(size))
            if len(data) < size:
                raise IndexError("short read")
            return data

    class Counting(IOReaderAbstract[pathlib.Path]):
        @staticmethod
        def is_supported():
            return True

        def sync_reader(self):
            return CountingSync

        def async_reader(self):  # not used by guideloom, required by the interface
            return IOAsyncReaderAbstract

    stream = StreamStorage(tmp_path, StreamNumpyFormat(TOKENS))
    with stream.sync_writer() as writer:
        writer.append(0, _tokens([1, 2, 3]))
        writer.append(1, _tokens([4, 5]))
    custom = StreamStorage(tmp_path, StreamNumpyFormat(TOKENS), read_interface=Counting())
    with custom.sync_reader() as r:
        assert r.read(2, 2)["tokens"].tolist() == [3, 4]
        assert r.read(4, 2)["tokens"].tolist() == [5, 1]
    assert sorted(opened) == ["shard-000000.gls", "shard-000001.gls"]


# ------------------------------------------------------------------------- item 9: the loader
def _documents(tmp_path, n):
    docs = DocumentStorage(tmp_path / f"docs{n}", DocumentPickleFormat())
    with docs.sync_writer() as writer:
        for i in range(n):
            writer.append(0, i)
    return DocumentDataset(docs)


def _ids(batch):
    return list(batch)


# GuideLoom 1.1's StatefulDataLoader order for 12 samples, shuffle_seed=7, epochs 0 and 1
# (produced by GuideLoom 1.1.0: see tests/test_shuffle_guideloom11.py)
ORDER_SEED7_N12 = [[2, 6, 1, 7, 9, 10, 11, 4, 5, 3, 8, 0], [6, 4, 0, 8, 7, 2, 10, 3, 11, 1, 9, 5]]


def test_loader_constructor_as_guideloom11_spells_it(tmp_path):
    torch = pytest.importorskip("torch")
    from guideloom import StatefulDataLoader

    dataset = _documents(tmp_path, 12)
    loader = StatefulDataLoader(dataset, _ids)
    assert loader.local_batch_size == 1
    assert loader.prefetch == 0
    assert loader.device == StatefulDataLoader.get_default_device()
    expected = torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() \
        else torch.device("cpu")
    assert StatefulDataLoader.get_default_device() == expected
    loader.open()
    assert len(loader) == 12
    assert loader.dataset_size == 12
    assert loader.dataset is dataset
    assert list(loader) == [[i] for i in range(12)]
    loader.close()
    loader.open()  # 1.1 code may open a closed loader again
    assert next(iter(loader)) == [0]
    loader.close()
    by_keyword = StatefulDataLoader(dataset=dataset, collate_fn=_ids, local_batch_size=5,
                                    drop_last=False, num_workers=2)
    with by_keyword:
        assert [len(b) for b in by_keyword] == [5, 5, 2]


def test_loader_is_a_dataclass_usable_with_replace(tmp_path):
    pytest.importorskip("torch")
    from guideloom import StatefulDataLoader

    dataset = _documents(tmp_path, 12)
    loader = StatefulDataLoader(dataset, _ids, local_batch_size=2, shuffle=True, shuffle_seed=7)
    names = [f.name for f in dataclasses.fields(loader)]
    assert names[:2] == ["dataset", "collate_fn"]
    assert "prefetch" in names
    assert "device" in names
    bigger = dataclasses.replace(loader, local_batch_size=4)
    assert bigger is not loader
    assert bigger.local_batch_size == 4
    assert bigger.shuffle_seed == 7
    with loader, bigger:
        assert [x for b in loader for x in b] == [x for b in bigger for x in b]
        assert len(bigger) == 3


def test_loader_state_is_where_guideloom11_keeps_it(tmp_path):
    """1.1 code (and its tests) read ``loader._state``: the epoch, the observation offset and
    whether an iterator is active; ``replace(loader)`` starts at the beginning."""
    pytest.importorskip("torch")
    from guideloom import StatefulDataLoader

    loader = StatefulDataLoader(_documents(tmp_path, 12), _ids, local_batch_size=2,
                                world_size=2, rank=1)
    assert (loader._state.epoch, loader._state.observation_offset) == (0, 0)
    assert not loader._state.active
    iterator = iter(loader)
    next(iterator), next(iterator)
    assert loader._state.active
    assert loader._state.observation_offset == 8
    fresh = dataclasses.replace(loader)
    assert not fresh._state.active
    assert fresh._state.observation_offset == 0
    assert fresh._state is not loader._state
    assert list(iterator) == [[9, 11]]
    assert not loader._state.active
    assert loader._state.epoch == 1
    assert loader._state.observation_offset == 0
    fresh.load_state_dict({**loader.state_dict(), "observation_offset": 4})
    assert (fresh._state.epoch, fresh._state.observation_offset) == (1, 4)


def test_sequence_length_where_it_does_not_apply_is_a_type_and_a_value_error(tmp_path):
    pytest.importorskip("torch")
    from guideloom import StatefulDataLoader
    from guideloom.errors import LoaderArgumentError

    docs = DocumentStorage(tmp_path / "d", DocumentPickleFormat())
    with docs.sync_writer() as writer:
        writer.append(0, 1)
    for error in (TypeError, ValueError, LoaderArgumentError):  # 1.1: TypeError; we: ValueError
        with pytest.raises(error, match="sequence_length"):
            StatefulDataLoader.from_storage(docs, _ids, sequence_length=4)


def test_loader_shuffles_in_guideloom11s_order_and_resumes(tmp_path):
    pytest.importorskip("torch")
    from guideloom import StatefulDataLoader

    dataset = _documents(tmp_path, 12)
    with StatefulDataLoader(dataset, _ids, local_batch_size=3, shuffle=True,
                            shuffle_seed=7) as loader:
        epochs = [[x for b in loader for x in b] for _ in range(2)]
    assert epochs == ORDER_SEED7_N12
    # a checkpoint written mid-epoch (as GuideLoom 1.1's state_dict looks) resumes exactly
    with StatefulDataLoader(dataset, _ids, local_batch_size=3, shuffle=True,
                            shuffle_seed=7) as loader:
        loader.load_state_dict(state_dict={"epoch": 1, "observation_offset": 6, "shuffle": True,
                                           "shuffle_seed": 7, "drop_last": True})
        rest = [x for b in loader for x in b]
    assert rest == ORDER_SEED7_N12[1][6:]


def test_loader_iterators_are_context_managers(tmp_path):
    pytest.importorskip("torch")
    from guideloom import StatefulDataLoader

    with StatefulDataLoader(_documents(tmp_path, 6), _ids, local_batch_size=2,
                            num_workers=2, prefetch=2) as loader:
        with iter(loader) as it:
            it.open()
            assert next(it) == [0, 1]
        with pytest.raises(StopIteration):
            next(it)  # closed when the block ended
        assert loader.state_dict()["observation_offset"] == 2
        assert list(loader) == [[2, 3], [4, 5]]


def test_loader_takes_any_dataset_whose_reader_is_a_sequence(tmp_path):
    """A dataset written against GuideLoom 1.1's abstract classes, opened the 1.1 way."""
    pytest.importorskip("torch")
    from guideloom import StatefulDataLoader
    from guideloom.types import DatasetAbstract, DatasetSyncReaderAbstract

    events = []

    class Squares(DatasetSyncReaderAbstract):
        def __init__(self):
            self.is_open = False

        def open(self):
            self.is_open = True
            events.append("open")

        def close(self):
            self.is_open = False
            events.append("close")

        def __len__(self):
            if not self.is_open:
                raise RuntimeError("open() was not called")
            return 7

        def __getitem__(self, index):
            if not 0 <= index < 7:
                raise IndexError(index)
            return index * index

    class SquaresDataset(DatasetAbstract):
        def sync_reader(self):
            return Squares()

        def async_reader(self):  # pragma: no cover - not used by the loader
            raise NotImplementedError

    loader = StatefulDataLoader(SquaresDataset(), _ids, local_batch_size=3, drop_last=False)
    with loader:
        assert list(loader) == [[0, 1, 4], [9, 16, 25], [36]]
    assert events.count("open") >= 1
    assert events.count("open") == events.count("close")
    # a plain list as the reader works too
    class Listed:
        def sync_reader(self):
            return ["a", "b", "c"]

    with StatefulDataLoader(Listed(), _ids, local_batch_size=2) as loader:
        assert list(loader) == [["a", "b"]]


def test_loader_still_takes_guideloom_sources(tmp_path):
    pytest.importorskip("torch")
    from guideloom import StatefulDataLoader

    class Range:
        def __len__(self):
            return 5

        def fetch(self, indices):
            return [int(i) * 10 for i in indices]

    with StatefulDataLoader(Range(), _ids, device="cpu", local_batch_size=2) as loader:
        assert list(loader) == [[0, 10], [20, 30]]
    with StatefulDataLoader(source=Range(), collate_fn=_ids, local_batch_size=5) as loader:
        assert list(loader) == [[0, 10, 20, 30, 40]]
    with pytest.raises(TypeError, match="sync_reader"):
        StatefulDataLoader(object(), _ids)
    storage = StreamStorage(tmp_path / "s", StreamNumpyFormat(TOKENS))
    with storage.sync_writer() as writer:
        writer.append(0, _tokens(range(8)))
    with StatefulDataLoader.from_storage(storage, _ids, sequence_length=4) as loader:
        assert [[w["tokens"].tolist() for w in b] for b in loader] == [[[0, 1, 2, 3]],
                                                                       [[4, 5, 6, 7]]]


def test_loader_open_refuses_a_dataset_smaller_than_one_global_batch(tmp_path):
    pytest.importorskip("torch")
    from guideloom import StatefulDataLoader

    loader = StatefulDataLoader(_documents(tmp_path, 3), _ids, local_batch_size=2, world_size=2)
    with pytest.raises(ValueError, match="fewer than one global batch"):
        loader.open()
    loader.close()


# ------------------------------------------------------------------------- item 11: renames
# GuideLoom 1.1 name (module, name) -> the guideloom class now behind it
RENAMED = {
    ("guideloom.dataset.stream_dataset", "StreamSyncReaderDataset"): "StreamDatasetReader",
    ("guideloom.dataset.stream_dataset", "StreamAsyncReaderDataset"): "AsyncStreamDatasetReader",
    ("guideloom.dataset.document_dataset", "DocumentSyncReaderDataset"): "DocumentDatasetReader",
    ("guideloom.dataset.document_dataset", "DocumentAsyncReaderDataset"):
        "AsyncDocumentDatasetReader",
}


@pytest.mark.parametrize(("where", "ours"), sorted(RENAMED.items()))
def test_names_guideloom_renamed_keep_their_guideloom11_path(where, ours):
    from guideloom import storage

    module, name = where
    assert getattr(importlib.import_module(module), name) is getattr(storage, ours)


def test_renamed_reader_classes_are_what_the_datasets_return(tmp_path):
    from guideloom.dataset.document_dataset import DocumentSyncReaderDataset
    from guideloom.dataset.stream_dataset import StreamAsyncReaderDataset, StreamSyncReaderDataset

    stream = StreamStorage(tmp_path / "s", StreamNumpyFormat(TOKENS))
    with stream.sync_writer() as writer:
        writer.append(0, _tokens(range(4)))
    with StreamDataset(stream, 2).sync_reader() as reader:
        assert isinstance(reader, StreamSyncReaderDataset)
    assert isinstance(StreamDataset(stream, 2).async_reader(), StreamAsyncReaderDataset)
    with DocumentDataset(_documents(tmp_path, 2).storage).sync_reader() as reader:
        assert isinstance(reader, DocumentSyncReaderDataset)


# ------------------------------------------------------------------------- guideloom.filesystem
def test_filesystem_stream_and_document_at_shard_level(tmp_path):
    from guideloom.filesystem import FileSystemDocument, FileSystemStream

    dtype = np.dtype("<i8")
    fs = FileSystemStream(tmp_path / "fs")
    with fs.sync_writer(dtype) as writer:
        writer.append(0, np.arange(5, dtype="<i8"))
        writer.append(1, np.arange(10, 13, dtype=">i8"))  # big-endian is stored little-endian
        writer.append(0, np.arange(5, 7, dtype="<i8"))
        assert writer.length(0) == 7
        assert writer.length(1) == 3
        assert writer.length(4) == 0
    with fs.sync_reader(dtype) as reader:
        assert reader.num_shards() == 2
        assert [reader.length(0), reader.length(1)] == [7, 3]
        assert reader.read(0, 4, 3).tolist() == [4, 5, 6]
        assert reader.read(1, 0, 3).tolist() == [10, 11, 12]
        with pytest.raises(IndexError):
            reader.read(1, 2, 5)
    # the same files open as a StreamStorage (guideloom's shard layout)
    with StreamStorage(tmp_path / "fs", StreamNumpyFormat("<i8")).sync_reader() as reader:
        assert reader.read(5, 4).tolist() == [5, 6, 10, 11]

    docs = FileSystemDocument(tmp_path / "docs")
    with docs.sync_writer() as writer:
        writer.append(0, b"alpha")
        writer.append(0, memoryview(b"beta"))
        writer.append(1, b"")
        assert writer.length(0) == 2
    with docs.sync_reader() as reader:
        assert reader.num_shards() == 2
        assert reader.length(1) == 1
        assert bytes(reader.get(0, 1)) == b"beta"
        assert bytes(reader.get(1, 0)) == b""
        requests = np.array([(1, 0), (0, 0)], dtype=[("shard", "<i8"), ("shard_index", "<i4")])
        assert [bytes(b) for b in reader.get_many(requests)] == [b"", b"alpha"]
        with pytest.raises(IndexError):
            reader.get(0, 2)

    async def main():
        async with fs.async_reader(dtype) as reader:
            return (await reader.read(0, 0, 2)).tolist(), await reader.num_shards()

    assert asyncio.run(main()) == ([0, 1], 2)


def test_storages_and_datasets_subscript_with_guideloom11s_parameters():
    stream = StreamStorage[dict, dict, np.void]
    meta = StreamWithMetaStorage[dict, dict, np.int64]
    docs = DocumentStorage[str, str]
    assert stream.__origin__ is StreamStorage
    assert meta.__args__[2] is np.int64
    assert docs.__args__ == (str, str)
    assert StreamDataset[dict].__origin__ is StreamDataset
    assert DocumentDataset[str].__origin__ is DocumentDataset


def test_read_many_refuses_negative_indexes_as_guideloom11(tmp_path):
    docs = DocumentStorage(tmp_path, DocumentPickleFormat())
    with docs.sync_writer() as writer:
        writer.append(0, "a")
        writer.append(0, "b")
    with docs.sync_reader() as reader:
        assert reader.read(-1) == "b"  # a single read still counts back (guideloom's own)
        with pytest.raises(IndexError, match="outside of size"):
            reader.read_many(np.array([-1]))

    async def main():
        async with docs.async_reader() as reader:
            with pytest.raises(IndexError, match="outside of size"):
                await reader.read_many(np.array([0, -1]))
            return await reader.read_many([1, 0])

    assert asyncio.run(main()) == ["b", "a"]


def test_one_file_readers_name_short_and_negative_reads_as_guideloom11(tmp_path):
    from guideloom.io import SeekIO

    path = tmp_path / "f.bin"
    path.write_bytes(b"abc")
    with SeekIO().sync_reader()(path) as reader:
        with pytest.raises(IndexError, match="shorter than requested size"):
            reader.read(2, 2)
        with pytest.raises(IndexError, match="cannot have negative offset"):
            reader.read(-1, 1)


def test_loader_epoch_ends_when_the_iterator_is_exhausted_as_guideloom11(tmp_path):
    """A checkpoint after the last batch, before StopIteration, resumes with nothing left."""
    pytest.importorskip("torch")
    from guideloom import StatefulDataLoader

    dataset = _documents(tmp_path, 12)
    options = {"local_batch_size": 3, "shuffle": True, "shuffle_seed": 7}
    with StatefulDataLoader(dataset, _ids, **options) as loader:
        it = iter(loader)
        got = [x for _ in range(4) for x in next(it)]  # every batch of epoch 0, not exhausted
        assert got == ORDER_SEED7_N12[0]
        state = loader.state_dict()
        assert (state["epoch"], state["observation_offset"]) == (0, 12)
        with pytest.raises(StopIteration):
            next(it)
        assert loader.state_dict()["epoch"] == 1
        assert loader.epoch == 1
    resumed = StatefulDataLoader(dataset, _ids, **options)
    resumed.load_state_dict(state)
    with resumed:
        assert list(resumed) == []  # the rest of epoch 0
        assert [x for b in resumed for x in b] == ORDER_SEED7_N12[1]


def test_loader_checks_and_warnings_as_guideloom11_words_them(tmp_path):
    pytest.importorskip("torch")
    from guideloom import StatefulDataLoader

    dataset = _documents(tmp_path, 10)
    with pytest.raises(ValueError, match="less than 1"):
        StatefulDataLoader(dataset, _ids, world_size=0)
    with pytest.raises(ValueError, match="less than 0"):
        StatefulDataLoader(dataset, _ids, rank=-1)
    with pytest.raises(ValueError, match="world_size"):
        StatefulDataLoader(dataset, _ids, rank=2, world_size=2)
    with pytest.warns(UserWarning, match="not all workers will be utilized"):
        StatefulDataLoader(dataset, _ids, num_workers=8, prefetch=2).close()
    with pytest.raises(TypeError, match="unsupported storage type"):
        StatefulDataLoader.from_storage(object(), _ids)
    stream = StreamStorage(tmp_path / "s", StreamNumpyFormat(TOKENS))
    with stream.sync_writer() as writer:
        writer.append(0, _tokens(range(8)))
    with StatefulDataLoader.from_storage(stream, _ids, sequence_length=4) as loader:
        assert isinstance(loader.dataset, StreamDataset)  # 1.1 code reads loader.dataset


def test_cluster_children_get_the_folder_holding_the_package_not_the_package():
    """guideloom.types and guideloom.io would shadow the standard library's types and io if
    the package folder itself were put on a child's PYTHONPATH."""
    from guideloom.cluster import local_procs

    entries = local_procs._package_pythonpath()
    for entry in entries:
        assert (Path(entry) / "guideloom" / "__init__.py").is_file()
        assert not (Path(entry) / "types" / "__init__.py").is_file()
