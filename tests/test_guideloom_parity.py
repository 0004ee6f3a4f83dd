"""GuideLoom 1.1 API parity: async readers, generic format classes and FeistelShuffler names."""

from __future__ import annotations

import asyncio
import json
import textwrap
from dataclasses import dataclass
from pathlib import Path

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
from guideloom.shuffle import FeistelShuffler
from guideloom.storage import AsyncDocumentReader, AsyncStreamWithMetaReader
from guideloom.storage.io import MmapIO, PosixPreadIO, SeekIO
from guideloom.storage.types import (
    DocumentStorageFormat,
    StreamStorageFormat,
    StreamWithMetaStorageFormat,
)

BACKENDS = [SeekIO, MmapIO, PosixPreadIO]


# --- generic format classes, written the way GuideLoom's docs write them -------------------------


@dataclass
class MyDoc:
    title: str
    tokens: list[int]


class MyDocs(DocumentStorageFormat[MyDoc]):
    """JSON documents typed as ``MyDoc``."""

    def pack(self, data: MyDoc) -> bytes:
        return json.dumps({"title": data.title, "tokens": data.tokens}).encode()

    def unpack(self, encoded: bytes, shard: int) -> MyDoc:
        return MyDoc(**json.loads(encoded))


class TwoTypeDocs(DocumentStorageFormat[str, int]):
    """GuideLoom 1.1's two-argument spelling: stores ``str``, reads back its length."""

    def pack(self, data: str) -> bytes:
        return data.encode()

    def unpack(self, encoded: bytes, shard: int) -> int:
        return len(encoded)


@dataclass
class MyMeta:
    tokens: np.ndarray
    concepts: list[list[int]]


class ConceptMeta(StreamWithMetaStorageFormat[MyMeta]):
    """A record is a ``MyMeta`` whose per-token concept lists are stored once per run."""

    stream_dtype = np.dtype("<i4")

    def size(self, data: MyMeta) -> int:
        return len(data.tokens)

    def pack(self, data: MyMeta):
        for concepts in data.concepts:
            payload = np.asarray(concepts, dtype="<u4").tobytes()
            yield tuple(concepts), payload
        return np.asarray(data.tokens, dtype=self.stream_dtype)

    def unpack(self, stream_data, document_shard, document_index, document_data) -> MyMeta:
        lists = [np.frombuffer(p, dtype="<u4").tolist() for p in document_data]
        return MyMeta(stream_data, [lists[i] for i in document_index])


def test_generic_formats_subscript_and_keep_their_protocol():
    assert MyDocs.__orig_bases__[0].__args__[0] is MyDoc
    assert TwoTypeDocs.__orig_bases__[0].__args__ == (str, int)
    assert ConceptMeta.__orig_bases__[0].__args__[0] is MyMeta
    assert StreamStorageFormat[dict, dict] is not None
    assert isinstance(MyDocs(), DocumentStorageFormat)
    assert isinstance(ConceptMeta(), StreamWithMetaStorageFormat)
    assert not isinstance(MyDocs(), StreamWithMetaStorageFormat)  # no size/stream_dtype


def test_generic_formats_store_and_read(tmp_path):
    docs = DocumentStorage(tmp_path / "docs", MyDocs())
    with docs.sync_writer() as writer:
        writer.append(0, MyDoc("a", [1, 2]))
        writer.append(1, MyDoc("b", [3]))
    with docs.sync_reader() as reader:
        assert reader.read(1) == MyDoc("b", [3])
    lengths = DocumentStorage(tmp_path / "lengths", TwoTypeDocs())
    with lengths.sync_writer() as writer:
        writer.append(0, "hello")
    with lengths.sync_reader() as reader:
        assert reader.read(0) == 5

    meta = StreamWithMetaStorage(tmp_path / "meta", ConceptMeta())
    with meta.sync_writer() as writer:
        writer.append(0, MyMeta(np.array([5, 6, 7]), [[1], [1], [2, 3]]))
    with meta.sync_reader() as reader:
        window = reader.read(1, 2)
    assert isinstance(window, MyMeta)
    assert window.tokens.tolist() == [6, 7]
    assert window.concepts == [[1], [2, 3]]


TYPED = """
    from dataclasses import dataclass

    import numpy as np

    from guideloom import DocumentStorage
    from guideloom.storage import StreamWithMetaStorage
    from guideloom.storage.types import DocumentStorageFormat, StreamWithMetaStorageFormat


    @dataclass
    class MyDoc:
        title: str


    class MyDocs(DocumentStorageFormat[MyDoc]):
        def pack(self, data: MyDoc) -> bytes:
            return data.title.encode()

        def unpack(self, encoded: bytes, shard: int) -> MyDoc:
            return MyDoc(encoded.decode())


    class MyMeta:
        pass


    class Meta(StreamWithMetaStorageFormat[MyMeta]):
        stream_dtype = np.dtype("<i4")

        def size(self, data: MyMeta) -> int:
            return 0

        def pack(self, data: MyMeta):  # type: ignore[no-untyped-def]
            yield from ()

        def unpack(self, stream_data, document_shard, document_index, document_data) -> MyMeta:
            return MyMeta()


    storage = DocumentStorage("d", MyDocs())
    reveal_type(storage.sync_reader().read(0))


    async def first() -> None:
        reveal_type(await storage.async_reader().read(0))


    reveal_type(StreamWithMetaStorage("m", Meta()).sync_reader().read(0, 1))
    wrong: int = storage.sync_reader().read(0)
"""


@pytest.mark.slow  # a mypy run: ~25 s
def test_type_checker_sees_document_and_metadata_types(tmp_path, monkeypatch):
    mypy = pytest.importorskip("mypy.api", reason="mypy (test extra) is not installed")
    check = tmp_path / "typed.py"
    check.write_text(textwrap.dedent(TYPED))
    monkeypatch.chdir(Path(__file__).resolve().parents[1])  # mypy finds guideloom from here
    out, err, status = mypy.run(
        [str(check), "--no-incremental", "--cache-dir", str(tmp_path / "cache"),
         "--follow-imports=silent", "--ignore-missing-imports", "--no-error-summary"]
    )
    lines = [line for line in out.splitlines() if "typed.py" in line]
    revealed = [line for line in lines if "Revealed type" in line]
    assert len(revealed) == 3, out + err
    assert '"typed.MyDoc"' in revealed[0], revealed
    assert '"typed.MyDoc"' in revealed[1], revealed
    assert '"typed.MyMeta"' in revealed[2], revealed
    errors = [line for line in lines if ": error:" in line]
    assert len(errors) == 1, out
    assert '"MyDoc"' in errors[0], out
    assert '"int"' in errors[0], out
    assert status == 1


# --- async readers -----------------------------------------------------------------------------


def _documents(tmp_path, backend):
    storage = DocumentStorage(tmp_path / "docs", DocumentPickleFormat(), read_interface=backend)
    records = [{"i": i, "payload": list(range(i))} for i in range(11)]
    with storage.sync_writer() as writer:
        for i, record in enumerate(records):
            writer.append(0 if i < 4 else (1 if i < 5 else 3), record)
        writer.create(2)  # an empty shard in the middle
    return storage, records


@pytest.mark.parametrize("backend", BACKENDS)
def test_document_storage_async_reader(tmp_path, backend):
    storage, records = _documents(tmp_path, backend)

    async def main():
        async with storage.async_reader() as reader:
            assert isinstance(reader, AsyncDocumentReader)
            assert len(reader) == reader.total_length == 11
            assert reader.num_shards == 4
            assert [reader.length(s) for s in range(4)] == [4, 1, 0, 6]
            together = await asyncio.gather(*(reader.read(i) for i in range(11)))
            last = await reader.read(-1)
            many = await reader.read_many(np.array([10, 0, 4, 4], dtype=np.int64))
            with pytest.raises(IndexError):
                await reader.read(11)
            with pytest.raises(IndexError):
                await reader.read_many([0, 99])
            return together, last, many

    together, last, many = asyncio.run(main())
    assert together == records
    assert last == records[-1]
    assert many == [records[10], records[0], records[4], records[4]]


def _concept_records():
    return [
        [MyMeta(np.arange(4), [[1], [1], [2], [2]]), MyMeta(np.arange(4, 6), [[7, 8], [9]])],
        [MyMeta(np.arange(6, 13), [[3]] * 3 + [[4, 5]] * 4)],
        [],
        [MyMeta(np.arange(13, 16), [[6], [6], [6]])],
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_stream_with_meta_async_reader_equals_sync(tmp_path, backend):
    storage = StreamWithMetaStorage(tmp_path, ConceptMeta(), read_interface=backend)
    with storage.sync_writer() as writer:
        for shard, records in enumerate(_concept_records()):
            writer.create(shard)
            for record in records:
                writer.append(shard, record)
    ranges = [(s, n) for s in range(16) for n in range(0, 17 - s)]
    with storage.sync_reader() as reader:
        expected = [reader.read(s, n) for s, n in ranges]

    async def main():
        async with storage.async_reader() as reader:
            assert isinstance(reader, AsyncStreamWithMetaReader)
            assert len(reader) == reader.total_length == 16
            assert reader.num_shards == 4
            got = await asyncio.gather(*(reader.read(s, n) for s, n in ranges))
            with pytest.raises(IndexError):
                await reader.read(16, 1)  # starts past the end
            return got

    for (start, length), want, got in zip(ranges, expected, asyncio.run(main()), strict=True):
        assert got.tokens.tolist() == want.tokens.tolist() == list(range(start, start + length))
        assert got.concepts == want.concepts


@pytest.mark.parametrize("backend", BACKENDS)
def test_dataset_async_readers_equal_sync(tmp_path, backend):
    dtype = np.dtype([("tokens", "<i4"), ("mask", "u1")])
    stream = StreamStorage(tmp_path / "s", StreamNumpyFormat(dtype), read_interface=backend)
    with stream.sync_writer() as writer:
        writer.append(0, {"tokens": np.arange(10), "mask": np.arange(10) % 2})
        writer.append(1, {"tokens": np.arange(10, 23), "mask": np.arange(13) % 3})
    meta = StreamWithMetaStorage(tmp_path / "m", ConceptMeta(), read_interface=backend)
    with meta.sync_writer() as writer:
        for shard, records in enumerate(_concept_records()):
            writer.create(shard)
            for record in records:
                writer.append(shard, record)
    documents, records = _documents(tmp_path, backend)
    views = [StreamDataset(stream, 4), StreamDataset(meta, 3), DocumentDataset(documents)]

    def plain(sample):
        if isinstance(sample, dict):
            return {k: getattr(v, "tolist", lambda v=v: v)() for k, v in sample.items()}
        if isinstance(sample, MyMeta):
            return (sample.tokens.tolist(), sample.concepts)
        return sample

    for view in views:
        with view.sync_reader() as reader:
            n = len(reader)
            expected = [plain(reader[i]) for i in range(n)]

        async def main(view=view, n=n):
            async with view.async_reader() as reader:
                assert len(reader) == n
                one = [plain(await reader[i]) for i in range(n)]
                negative = plain(await reader[-1])
                numpy_int = plain(await reader[np.int64(1)])
                sliced = [plain(s) for s in await reader[1:n:2]]
                many = [plain(s) for s in await reader.get_many(np.array([n - 1, 0]))]
                listed = [plain(s) for s in await reader[[0, n - 1]]]
                iterated = [plain(s) async for s in reader]
                with pytest.raises(IndexError):
                    await reader[n]
                with pytest.raises(IndexError):
                    await reader.get_many([0, n])
                return one, negative, numpy_int, sliced, many, listed, iterated

        one, negative, numpy_int, sliced, many, listed, iterated = asyncio.run(main())
        assert one == expected == iterated, view
        assert negative == expected[-1]
        assert numpy_int == expected[1]
        assert sliced == expected[1:n:2]
        assert many == [expected[-1], expected[0]]
        assert listed == [expected[0], expected[-1]]


# --- FeistelShuffler: GuideLoom's method set ---------------------------------------------------


@pytest.mark.parametrize("length", [0, 1, 2, 7, 64, 1000])
def test_shuffler_guideloom_names(length):
    shuffler = FeistelShuffler(length, np.random.default_rng(5), 5)
    assert shuffler.length == len(shuffler) == length
    assert shuffler.rounds == 5
    image = [shuffler.shuffle(i) for i in range(length)]
    assert sorted(image) == list(range(length))
    assert all(isinstance(y, int) for y in image)
    assert [shuffler.unshuffle(y) for y in image] == list(range(length))
    assert image == np.asarray(shuffler(np.arange(length))).tolist()
    for outside in (-1, length):
        with pytest.raises(IndexError):
            shuffler.shuffle(outside)
        with pytest.raises(IndexError):
            shuffler.unshuffle(outside)


def test_shuffler_from_seed():
    a = FeistelShuffler.from_seed(500, 3)
    b = FeistelShuffler.from_seed(500, seed=3, rounds=5)  # GuideLoom 1.1's default rounds
    c = FeistelShuffler.from_seed(500, 4)
    order = [a.shuffle(i) for i in range(500)]
    assert order == [b.shuffle(i) for i in range(500)]
    assert order != [c.shuffle(i) for i in range(500)]
    assert order != list(range(500))
    fresh = FeistelShuffler.from_seed(50)  # OS entropy
    assert sorted(fresh.shuffle(i) for i in range(50)) == list(range(50))
    with pytest.raises(ValueError):
        FeistelShuffler(10, np.random.default_rng(0), rounds=2)
