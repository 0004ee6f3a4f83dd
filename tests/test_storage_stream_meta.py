"""StreamWithMetaStorage with a concept-list format, and StreamDataset over it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from guideloom import StreamDataset, StreamWithMetaStorage
from guideloom.storage import FormatContractError, StorageError
from guideloom.storage.io import MmapIO, PosixPreadIO, SeekIO
from guideloom.storage.shards import shard_name
from guideloom.storage.types import StreamWithMetaStorageFormat

BACKENDS = [SeekIO, MmapIO, PosixPreadIO]


class ConceptFormat:
    """A record is a list of spans ``(tokens, concept ids)``; each span shares one concept list."""

    stream_dtype = np.dtype("<i4")

    def size(self, data):
        return sum(len(tokens) for tokens, _ in data)

    def pack(self, data):
        for span, (tokens, concepts) in enumerate(data):
            payload = np.asarray(concepts, dtype="<u4").tobytes()
            for i in range(len(tokens)):
                yield span, (payload if i == 0 else None)
        if not data:
            return np.zeros(0, self.stream_dtype)
        return np.concatenate([np.asarray(t, dtype=self.stream_dtype) for t, _ in data])

    def unpack(self, stream_data, document_shard, document_index, document_data):
        lists = [np.frombuffer(payload, dtype="<u4").tolist() for payload in document_data]
        return {
            "tokens": stream_data,
            "concepts": [lists[i] for i in document_index],
            "shards": document_shard[document_index],
            "payloads": len(document_data),
        }


def write(directory, shards, backend=SeekIO):
    """Write shards of records; return expected per-element tokens, concepts and shards."""
    storage = StreamWithMetaStorage(directory, ConceptFormat(), read_interface=backend)
    tokens, concepts, owners = [], [], []
    with storage.sync_writer() as writer:
        for shard, records in enumerate(shards):
            writer.create(shard)
            for data in records:
                writer.append(shard, data)
                for span_tokens, span_concepts in data:
                    tokens.extend(span_tokens)
                    concepts.extend([list(span_concepts)] * len(span_tokens))
                    owners.extend([shard] * len(span_tokens))
    return storage, tokens, concepts, owners


def example():
    return [
        [[([1, 2, 3], [10]), ([4], []), ([5, 6], [11, 12])], [([7], [13])]],
        [],
        [[([8, 9, 10, 11], [14, 15, 16])]],
        [[([12], [1]), ([13, 14], [1])]],
    ]


def test_format_matches_protocol():
    assert isinstance(ConceptFormat(), StreamWithMetaStorageFormat)


@pytest.mark.parametrize("backend", BACKENDS)
def test_windows_across_record_and_shard_boundaries(tmp_path, backend):
    storage, tokens, concepts, owners = write(tmp_path, example(), backend)
    total = len(tokens)
    with storage.sync_reader() as reader:
        assert len(reader) == total == 14
        for start in range(total + 1):
            for length in range(total + 1 - start):
                # read() starts inside the stream (1.1's rule); read_span() may start at its end
                got = reader.read(start, length) if start < total else reader.read_span(start, 0)
                assert got["tokens"].tolist() == tokens[start : start + length]
                assert got["concepts"] == concepts[start : start + length]
                assert got["shards"].tolist() == owners[start : start + length]
        # a window inside one span needs exactly one payload
        assert reader.read(8, 3)["payloads"] == 1
        with pytest.raises(IndexError):
            reader.read_span(10, 5)
        wrapped = reader.read(10, 5)  # continues at element 0, as GuideLoom 1.1 reads
        assert wrapped["tokens"].tolist() == tokens[10:] + tokens[:1]
        assert wrapped["concepts"] == concepts[10:] + concepts[:1]
        with pytest.raises(IndexError):
            reader.read(total, 0)
    with StreamDataset(storage, sequence_length=4).sync_reader() as reader:
        assert len(reader) == 3
        assert reader[1]["tokens"].tolist() == [5, 6, 7, 8]
        assert reader[1]["concepts"] == [[11, 12], [11, 12], [13], [14, 15, 16]]
        assert [w["tokens"][0] for w in reader.get_many([2, 0])] == [9, 1]


class Broken(ConceptFormat):
    def __init__(self, items, stream=None, size=None):
        self.items, self.stream, self.fixed_size = items, stream, size

    def size(self, data):
        return len(self.items) if self.fixed_size is None else self.fixed_size

    def pack(self, data):
        yield from self.items
        if self.stream is not None:
            return self.stream
        return np.zeros(len(self.items), self.stream_dtype)


@pytest.mark.parametrize(
    ("fmt", "message"),
    [
        (Broken([("a", b"x"), ("b", b"y"), ("a", b"z")]), "reappears"),
        (Broken([("a", None)]), "no payload"),
        (Broken([("a", b"x"), ("b", None)]), "no payload"),
        (Broken([("a", "text")]), "must be bytes"),
        (Broken([("a", b"x"), "oops"]), r"\(key, payload \| None\) pairs"),
        (Broken([("a", b"x")], size=2), "yielded 1 elements"),
        (Broken([("a", b"x"), ("a", None)], size=1), "more than"),
        (Broken([("a", b"x")], stream=np.zeros(2, "<i4")), "returned 2 elements"),
        (Broken([("a", b"x")], stream=np.zeros(1, "<i8")), "dtype"),
        (Broken([("a", b"x")], size=-1), "size"),
        (Broken([([1], b"x")]), "key"),
    ],
)
def test_contract_violations_are_clear_errors(tmp_path, fmt, message):
    storage = StreamWithMetaStorage(tmp_path, fmt)
    with pytest.raises(FormatContractError, match=message), storage.sync_writer() as writer:
        writer.append(0, None)
    assert not list(tmp_path.iterdir())  # nothing committed, no temporary files left


def test_equal_keys_in_different_records_and_ignored_later_payloads(tmp_path):
    fmt = Broken([("a", b"\x01\x00\x00\x00"), ("a", b"ignored")])
    storage = StreamWithMetaStorage(tmp_path, fmt)
    with storage.sync_writer() as writer:
        writer.append(0, None)
        writer.append(0, None)  # the same key starts a new run in a new record
    with storage.sync_reader() as reader:
        got = reader.read(0, 4)
        assert got["payloads"] == 2
        assert got["concepts"] == [[1]] * 4


def test_storage_errors(tmp_path):
    write(tmp_path, example())
    with pytest.raises(StorageError, match="'stream_meta' shard, not a 'stream' shard"):
        from guideloom import StreamNumpyFormat, StreamStorage

        StreamStorage(tmp_path, StreamNumpyFormat("<i4")).sync_reader()
    path = tmp_path / shard_name(2)
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(StorageError, match="not a complete"):
        StreamWithMetaStorage(tmp_path, ConceptFormat()).sync_reader()
    path.unlink()
    with pytest.raises(StorageError, match=r"shard\(s\) 2 are missing"):
        StreamWithMetaStorage(tmp_path, ConceptFormat()).sync_reader()


spans = st.lists(
    st.tuples(st.integers(1, 4), st.lists(st.integers(0, 2**32 - 1), max_size=3)), max_size=3
)


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    shards=st.lists(st.lists(spans, max_size=3), min_size=1, max_size=4),
    backend=st.sampled_from(BACKENDS),
    data=st.data(),
)
def test_any_window_equals_slice_of_concatenation(tmp_path_factory, shards, backend, data):
    counter = iter(range(10**6))
    layout = [
        [[([next(counter) for _ in range(n)], concepts) for n, concepts in record] for record in s]
        for s in shards
    ]
    storage, tokens, concepts, owners = write(tmp_path_factory.mktemp("meta"), layout, backend)
    total = len(tokens)
    with storage.sync_reader() as reader:
        assert len(reader) == total
        for _ in range(5):
            start = data.draw(st.integers(0, total))
            length = data.draw(st.integers(0, total - start))
            got = reader.read_span(start, length)  # exact spans; read() wraps
            assert got["tokens"].tolist() == tokens[start : start + length]
            assert got["concepts"] == concepts[start : start + length]
            assert got["shards"].tolist() == owners[start : start + length]
