"""Code written for GuideLoom 1.1 runs on guideloom: module paths, signatures, reader/writer API
and file backends (issue 20, items 6 to 8 and 11).

The facts checked here (module paths, names, signatures, behaviour) are GuideLoom 1.1's public
API; the tests themselves are written for guideloom.
"""

from __future__ import annotations

import importlib
import inspect
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
    "guideloom.dataset.document_dataset": ["DocumentDataset"],
    "guideloom.dataset.stream_dataset": ["StreamDataset"],
    "guideloom.filesystem": ["FileSystemDocument", "FileSystemStream"],
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

    assert dataset.StreamDataset is StreamDataset and dataset.DocumentDataset is DocumentDataset
    assert io.SeekIO is storage_io.SeekIO and io.PosixPreadIO is storage_io.PosixPreadIO
    assert storage_format.StreamNumpyFormat is formats.StreamNumpyFormat is StreamNumpyFormat
    assert types.StreamStorageFormat is storage_types.StreamStorageFormat
    assert types.DocumentStorageAbstract is abstract.DocumentStorageAbstract
    assert stream_meta_storage.StreamWithMetaStorage is StreamWithMetaStorage
    assert feistel.FeistelShuffler is importlib.import_module("guideloom.shuffle").FeistelShuffler
    assert version.__version__ == guideloom.__version__
    assert callable(filesystem.FileSystemStream) and callable(filesystem.FileSystemDocument)


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
    assert storage.storage_dir == tmp_path / "s" and storage.storage_format is fmt
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
    assert window["t"].tolist() == [3, 5] and window["shards"].tolist() == [0, 1]


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
        assert isinstance(reader, Sequence) and "x" in reader and reader.count("x") == 1


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
