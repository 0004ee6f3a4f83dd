"""StreamStorage, StreamNumpyFormat and StreamDataset."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guideloom
from guideloom import StreamDataset, StreamNumpyFormat, StreamStorage
from guideloom.storage import StorageError
from guideloom.storage.io import MmapIO, PosixPreadIO, SeekIO
from guideloom.storage.shards import shard_name

DTYPE = np.dtype([("tokens", "<i4"), ("document_ids", "<u4"), ("loss_mask", "u1")])
BACKENDS = [SeekIO, MmapIO, PosixPreadIO]


def record(tokens: list[int] | np.ndarray, doc: int) -> dict[str, np.ndarray]:
    tokens = np.asarray(tokens, dtype="<i4")
    return {
        "tokens": tokens,
        "document_ids": np.full(len(tokens), doc, dtype="<u4"),
        "loss_mask": (tokens % 2).astype("u1"),
    }


def write_shards(directory: Path, shards: list[list[np.ndarray]], dtype=DTYPE) -> np.ndarray:
    """Write ``shards`` (lists of token records) and return the concatenated structured stream."""
    storage = StreamStorage(directory, StreamNumpyFormat(dtype))
    fmt = StreamNumpyFormat(dtype)
    parts = []
    doc = 0
    with storage.sync_writer() as writer:
        for shard, records in enumerate(shards):
            writer.create(shard)
            for tokens in records:
                data = record(tokens, doc)
                writer.append(shard, data)
                parts.append(fmt.pack(data))
                doc += 1
    return np.concatenate(parts) if parts else np.zeros(0, dtype)


def test_seed_example_as_written():
    # The example of /work/shared/seeds/000_0b9d2ec8cfce518e.txt, unchanged.
    from pathlib import Path
    from tempfile import TemporaryDirectory

    import numpy as np

    from guideloom import StreamDataset, StreamNumpyFormat, StreamStorage

    dtype = np.dtype([("tokens", "<i4"), ("document_ids", "<u4"), ("loss_mask", "u1")])
    with TemporaryDirectory() as directory:
        storage = StreamStorage(Path(directory), StreamNumpyFormat(dtype))
        with storage.sync_writer() as writer:
            writer.append(
                0,
                {
                    "tokens": np.array([10, 11, 12], dtype="<i4"),
                    "document_ids": np.full(3, 7, dtype="<u4"),
                    "loss_mask": np.array([0, 1, 1], dtype="u1"),
                },
            )
            writer.append(
                1,
                {
                    "tokens": np.array([13, 14, 15, 16, 17], dtype="<i4"),
                    "document_ids": np.full(5, 8, dtype="<u4"),
                    "loss_mask": np.array([0, 1, 1, 1, 1], dtype="u1"),
                },
            )

        with StreamDataset(storage, sequence_length=4).sync_reader() as reader:
            assert len(reader) == 2
            sample = reader[0]
            assert sample["tokens"].tolist() == [10, 11, 12, 13]
            assert sample["document_ids"].tolist() == [7, 7, 7, 8]
            assert sample["loss_mask"].tolist() == [0, 1, 1, 0]

        # Change the window length without rewriting the files.
        with StreamDataset(storage, sequence_length=3).sync_reader() as reader:
            assert len(reader) == 2  # The final two tokens do not fill a sample.
            assert reader[1]["tokens"].tolist() == [13, 14, 15]


def test_public_imports():
    assert guideloom.StreamStorage is StreamStorage
    for name in ("DocumentStorage", "DocumentPickleFormat", "DocumentDataset",
                 "StreamWithMetaStorage"):
        assert getattr(guideloom, name).__module__.startswith("guideloom.storage")
    from guideloom.storage.types import (  # noqa: F401
        DocumentStorageFormat,
        FileReader,
        ReadInterface,
        StreamStorageFormat,
        StreamWithMetaStorageFormat,
    )

    assert isinstance(StreamNumpyFormat(DTYPE), StreamStorageFormat)


@pytest.mark.parametrize("backend", BACKENDS)
def test_windows_cross_record_and_shard_boundaries(tmp_path, backend):
    shards = [[np.arange(0, 5), np.arange(5, 7)], [np.arange(7, 8)], [], [np.arange(8, 20)]]
    expected = write_shards(tmp_path, shards)
    storage = StreamStorage(tmp_path, StreamNumpyFormat(DTYPE), read_interface=backend())
    with storage.sync_reader() as reader:
        assert len(reader) == reader.num_elements == 20
        assert reader.shard_lengths == [7, 1, 0, 12]
        for start in range(21):
            for length in range(21 - start):
                # read() starts inside the stream (GuideLoom 1.1's rule); read_span() may start
                # at its end with nothing to read
                window = reader.read(start, length) if start < 20 else reader.read_span(20, 0)
                for name in DTYPE.names:
                    np.testing.assert_array_equal(
                        window[name], expected[name][start : start + length]
                    )
        with pytest.raises(IndexError):
            reader.read(20, 0)
    for length in (1, 3, 7, 20):
        with StreamDataset(storage, sequence_length=length).sync_reader() as reader:
            assert len(reader) == 20 // length
            windows = reader[:]
            assert len(windows) == len(reader)
            for i, window in enumerate(windows):
                assert window["tokens"].tolist() == list(range(i * length, (i + 1) * length))


class SegmentsFormat:
    """A custom format returning the raw window and its shard segments."""

    stream_dtype = np.dtype("<i8")

    def pack(self, data):
        return np.asarray(data, dtype=self.stream_dtype)

    def unpack(self, stream, shard_lengths, shards):
        return stream, shard_lengths.tolist(), shards.tolist()


def test_custom_format_gets_shard_segments(tmp_path):
    storage = StreamStorage(tmp_path, SegmentsFormat())
    with storage.sync_writer() as writer:
        writer.append(0, [0, 1, 2])
        writer.append(1, [3])
        writer.append(2, [4, 5])
        writer.append(2, [6, 7])
    with storage.sync_reader() as reader:
        stream, lengths, shards = reader.read(1, 6)
        assert stream.tolist() == [1, 2, 3, 4, 5, 6]
        assert (lengths, shards) == ([2, 1, 3], [0, 1, 2])
        assert reader.read(4, 2)[1:] == ([2], [2])
        assert reader.read(0, 0)[1:] == ([], [])


def test_repeated_appends_extend_and_new_writer_replaces(tmp_path):
    storage = StreamStorage(tmp_path, StreamNumpyFormat("<i4"))
    with storage.sync_writer() as writer:
        writer.append(0, [1, 2])
        writer.append(0, [3])
        writer.append(1, [4])
    with storage.sync_reader() as reader:
        assert reader.read(0, 4).tolist() == [1, 2, 3, 4]
    with storage.sync_writer() as writer:
        writer.append(0, [9])
    with storage.sync_reader() as reader:
        assert reader.read(0, 2).tolist() == [9, 4]
    assert sorted(os.listdir(tmp_path)) == [shard_name(0), shard_name(1)]


def test_rejected_record_leaves_the_shard_untouched(tmp_path):
    storage = StreamStorage(tmp_path, StreamNumpyFormat("<u1"))
    with storage.sync_writer() as writer:
        writer.append(0, [1, 2])
    with storage.sync_writer() as writer:
        with pytest.raises(ValueError, match="value"):
            writer.append(0, [300])
        writer.append(1, [3])
    with storage.sync_reader() as reader:
        assert reader.read(0, len(reader)).tolist() == [1, 2, 3]


def test_failed_writer_commits_nothing(tmp_path):
    storage = StreamStorage(tmp_path, StreamNumpyFormat("<i4"))
    with storage.sync_writer() as writer:
        writer.append(0, [1, 2])
    with pytest.raises(ValueError, match="value"), storage.sync_writer() as writer:
        writer.append(0, [5, 6])
        writer.append(1, [2**40])  # does not fit <i4
    with storage.sync_reader() as reader:
        assert reader.read(0, len(reader)).tolist() == [1, 2]
    assert sorted(os.listdir(tmp_path)) == [shard_name(0)]


def test_reader_sees_old_shard_until_it_reopens(tmp_path):
    storage = StreamStorage(tmp_path, StreamNumpyFormat("<i4"), read_interface=PosixPreadIO)
    with storage.sync_writer() as writer:
        writer.append(0, [1, 2, 3])
    with storage.sync_reader() as reader:
        with storage.sync_writer() as writer:
            writer.append(0, [7, 8, 9, 10])
        assert reader.read(0, 3).tolist() == [1, 2, 3]
    with storage.sync_reader() as reader:
        assert reader.read(0, 4).tolist() == [7, 8, 9, 10]


# --- errors -------------------------------------------------------------------------------


def test_pack_errors_name_the_field():
    fmt = StreamNumpyFormat(DTYPE)
    good = record([1, 2, 3], 0)
    with pytest.raises(ValueError, match="'loss_mask'"):
        fmt.pack({k: v for k, v in good.items() if k != "loss_mask"})
    with pytest.raises(ValueError, match="'extra'"):
        fmt.pack({**good, "extra": np.zeros(3)})
    with pytest.raises(ValueError, match=r"'document_ids'.*2 elements"):
        fmt.pack({**good, "document_ids": np.zeros(2, "<u4")})
    with pytest.raises(ValueError, match="'document_ids'"):
        fmt.pack({**good, "document_ids": np.array([0, -1, 2])})
    with pytest.raises(ValueError, match="'tokens'"):
        fmt.pack({**good, "tokens": np.array([0, 2**31, 1])})
    with pytest.raises(ValueError, match="'loss_mask'"):
        fmt.pack({**good, "loss_mask": np.array([0.0, 0.5, 1.0])})
    with pytest.raises(ValueError, match="'tokens'"):
        fmt.pack({**good, "tokens": np.zeros((3, 2), "<i4")})
    with pytest.raises(ValueError, match="'tokens'"):
        fmt.pack({**good, "tokens": np.array(["a", "b", "c"])})
    # values that fit are accepted whatever their input dtype
    packed = fmt.pack({**good, "tokens": [1, 2, 3], "loss_mask": np.array([True, False, True])})
    assert packed.dtype == DTYPE
    assert packed["loss_mask"].tolist() == [1, 0, 1]


def test_gap_in_shard_numbers(tmp_path):
    storage = StreamStorage(tmp_path, StreamNumpyFormat("<i4"))
    with storage.sync_writer() as writer:
        writer.append(0, [1])
        writer.append(2, [2])
    with pytest.raises(StorageError, match=r"shard\(s\) 1 are missing"):
        storage.sync_reader()


@pytest.mark.parametrize("keep", [0, 5, 10, -1, -17, -40])
def test_truncated_shard(tmp_path, keep):
    write_shards(tmp_path, [[np.arange(10)], [np.arange(4)]])
    path = tmp_path / shard_name(1)
    data = path.read_bytes()
    path.write_bytes(data[:keep])
    for backend in BACKENDS:
        with pytest.raises(StorageError, match="not a complete GuideLoom shard"):
            StreamStorage(tmp_path, StreamNumpyFormat(DTYPE), read_interface=backend).sync_reader()


def test_dtype_mismatch_and_kind_mismatch(tmp_path):
    write_shards(tmp_path, [[np.arange(3)]])
    other = np.dtype([("tokens", ">i4"), ("document_ids", "<u4"), ("loss_mask", "u1")])
    with pytest.raises(StorageError, match="dtype"):
        StreamStorage(tmp_path, StreamNumpyFormat(other)).sync_reader()
    with pytest.raises(StorageError, match="dtype"):
        StreamStorage(tmp_path, StreamNumpyFormat("<i4")).sync_reader()
    from guideloom import DocumentPickleFormat, DocumentStorage

    with pytest.raises(StorageError, match="'stream' shard, not a 'document' shard"):
        DocumentStorage(tmp_path, DocumentPickleFormat()).sync_reader()


def test_missing_or_empty_directory(tmp_path):
    with pytest.raises(FileNotFoundError):
        StreamStorage(tmp_path / "nope", StreamNumpyFormat("<i4")).sync_reader()
    with pytest.raises(StorageError, match="no shards"):
        StreamStorage(tmp_path, StreamNumpyFormat("<i4")).sync_reader()


def test_out_of_range_and_index_types(tmp_path):
    write_shards(tmp_path, [[np.arange(10)]])
    storage = StreamStorage(tmp_path, StreamNumpyFormat(DTYPE))
    with storage.sync_reader() as reader:
        with pytest.raises(IndexError):
            reader.read_span(8, 3)  # an exact span must lie in the stream
        # read() continues at element 0 past the end (GuideLoom 1.1's cyclic read)
        assert reader.read(8, 3)["tokens"].tolist() == [8, 9, 0]
        with pytest.raises(IndexError):
            reader.read(10, 1)
        with pytest.raises(IndexError):
            reader.read(-1, 2)
        assert reader.read(np.int64(2), np.uint16(3))["tokens"].tolist() == [2, 3, 4]
    with StreamDataset(storage, sequence_length=3).sync_reader() as reader:
        assert len(reader) == 3
        with pytest.raises(IndexError):
            reader[3]
        with pytest.raises(IndexError):
            reader[np.int32(-4)]
        with pytest.raises(IndexError):
            reader.get_many([0, 3])
        with pytest.raises(TypeError):
            reader[1.0]
        assert reader[np.int64(2)]["tokens"].tolist() == [6, 7, 8]
        assert reader[-1]["tokens"].tolist() == [6, 7, 8]
        assert [w["tokens"][0] for w in reader[1:]] == [3, 6]
        many = reader.get_many(np.array([2, 0, 2]))
        assert [w["tokens"][0] for w in many] == [6, 0, 6]
        assert [w["tokens"][0] for w in reader[np.array([1, 0])]] == [3, 0]
    with pytest.raises(ValueError):
        StreamDataset(storage, sequence_length=0)


def test_writer_rejects_bad_shard_numbers(tmp_path):
    with StreamStorage(tmp_path, StreamNumpyFormat("<i4")).sync_writer() as writer:
        with pytest.raises(ValueError):
            writer.append(-1, [1])
        with pytest.raises(TypeError):
            writer.append("0", [1])
        writer.append(np.int64(0), [1])


class WrongDtypeFormat(SegmentsFormat):
    def pack(self, data):
        return np.asarray(data, dtype="<i4")


def test_custom_format_returning_wrong_dtype(tmp_path):
    from guideloom.storage import FormatContractError

    with StreamStorage(tmp_path, WrongDtypeFormat()).sync_writer() as writer:
        with pytest.raises(FormatContractError, match="dtype"):
            writer.append(0, [1, 2])


# --- concurrency, async, property --------------------------------------------------------

WORKER = textwrap.dedent(
    """
    import sys
    import numpy as np
    from guideloom import StreamNumpyFormat, StreamStorage

    directory, shard = sys.argv[1], int(sys.argv[2])
    storage = StreamStorage(directory, StreamNumpyFormat("<i8"))
    with storage.sync_writer() as writer:
        for part in range(20):
            writer.append(shard, np.arange(100) + shard * 10_000 + part * 100)
    """
)


def test_concurrent_writers_of_distinct_shards(tmp_path):
    package_root = str(Path(guideloom.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": package_root}
    processes = [
        subprocess.Popen([sys.executable, "-c", WORKER, str(tmp_path), str(shard)], env=env)
        for shard in range(4)
    ]
    assert [p.wait(timeout=60) for p in processes] == [0] * 4
    storage = StreamStorage(tmp_path, StreamNumpyFormat("<i8"))
    with storage.sync_reader() as reader:
        assert reader.num_shards == 4
        expected = np.concatenate([np.arange(2000) + s * 10_000 for s in range(4)])
        np.testing.assert_array_equal(reader.read(0, len(reader)), expected)
    assert sorted(os.listdir(tmp_path)) == [shard_name(s) for s in range(4)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_two_threads_read_the_same_reader(tmp_path, backend):
    expected = write_shards(tmp_path, [[np.arange(1000)], [np.arange(1000, 2500)]])
    storage = StreamStorage(tmp_path, StreamNumpyFormat(DTYPE), read_interface=backend)
    errors = []
    with StreamDataset(storage, sequence_length=64).sync_reader() as reader:

        def work(seed):
            rng = np.random.default_rng(seed)
            for i in rng.integers(0, len(reader), 300):
                want = expected["tokens"][i * 64 : (i + 1) * 64]
                if reader[i]["tokens"].tolist() != want.tolist():
                    errors.append(i)

        threads = [threading.Thread(target=work, args=(s,)) for s in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_async_reader(tmp_path, backend):
    expected = write_shards(tmp_path, [[np.arange(5)], [np.arange(5, 9)], [np.arange(9, 30)]])
    storage = StreamStorage(tmp_path, StreamNumpyFormat(DTYPE), read_interface=backend)

    async def main():
        async with storage.async_reader() as reader:
            assert len(reader) == 30
            windows = await asyncio.gather(*(reader.read(s, 7) for s in range(0, 23, 2)))
            with pytest.raises(IndexError):
                await reader.read(30, 1)  # starts past the end
            wrapped = await reader.read(25, 6)  # continues at element 0 (GuideLoom 1.1)
            assert wrapped["tokens"].tolist() == [*list(range(25, 30)), 0]
        return windows

    for start, window in zip(range(0, 23, 2), asyncio.run(main()), strict=True):
        assert window["tokens"].tolist() == expected["tokens"][start : start + 7].tolist()


shards_strategy = st.lists(
    st.lists(st.integers(0, 9), max_size=4), min_size=1, max_size=5
)  # per shard: record lengths


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    shards=shards_strategy,
    backend=st.sampled_from(BACKENDS),
    data=st.data(),
)
def test_any_window_equals_slice_of_concatenation(tmp_path_factory, shards, backend, data):
    directory = tmp_path_factory.mktemp("prop")
    counter = iter(range(10**6))
    records = [[np.array([next(counter) for _ in range(n)]) for n in shard] for shard in shards]
    expected = write_shards(directory, records)
    storage = StreamStorage(directory, StreamNumpyFormat(DTYPE), read_interface=backend)
    total = len(expected)
    with storage.sync_reader() as reader:
        assert len(reader) == total
        for _ in range(5):
            start = data.draw(st.integers(0, total))
            length = data.draw(st.integers(0, total - start))
            window = reader.read_span(start, length)  # exact spans; read() wraps
            for name in DTYPE.names:
                np.testing.assert_array_equal(window[name], expected[name][start : start + length])
    if total:
        length = data.draw(st.integers(1, total))
        with StreamDataset(storage, sequence_length=length).sync_reader() as reader:
            assert len(reader) == total // length
            for i, window in enumerate(reader):
                np.testing.assert_array_equal(
                    window["tokens"], expected["tokens"][i * length : (i + 1) * length]
                )


def test_storage_and_dataset_pickle_for_worker_processes(tmp_path):
    import pickle

    expected = write_shards(tmp_path, [[np.arange(10)], [np.arange(10, 16)]])
    dataset = StreamDataset(
        StreamStorage(tmp_path, StreamNumpyFormat(DTYPE), read_interface=MmapIO()), 4
    )
    clone = pickle.loads(pickle.dumps(dataset))
    assert isinstance(clone.storage.read_interface, MmapIO)
    with clone.sync_reader() as reader:
        assert len(reader) == 4
        assert reader[2]["tokens"].tolist() == expected["tokens"][8:12].tolist()
