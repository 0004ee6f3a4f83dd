"""guideloom.h5native against h5py, the reference: files written by h5py in many layouts,
loose and inside a stored zip at an offset, and hostile files (bounded time, a clear error)."""

from __future__ import annotations

import itertools
import json
import os
import pickle
import struct
import time
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import guideloom
from guideloom import h5native
from guideloom.h5native import FileMeta, NativeError, NativeFormatError, NativeUnsupported
from guideloom.h5native import stats as h5stats
from guideloom.read import records
from guideloom.read.byte_source import LocalFileSource

DTYPES = ["<f4", "<f8", ">f8", "<i2", "|u1", "<i8", ">i4", "<u4"]


class CountingSource:
    """A ByteSource over bytes in memory that records every range asked for (as a remote
    source: each call a request, chunks asked for through ``read_ranges``)."""

    high_latency = True

    def __init__(self, data: bytes, name: str = "memory"):
        self.data, self._name = data, name
        self.reads: list[tuple[int, int]] = []
        self.calls = 0

    @property
    def name(self) -> str:
        return self._name

    def size(self) -> int:
        return len(self.data)

    def read(self, offset: int, size: int) -> bytes:
        return self.read_ranges([(offset, size)])[0]

    def read_ranges(self, ranges):
        self.calls += 1
        out = []
        for offset, size in ranges:
            self.reads.append((offset, size))
            if offset < 0 or offset + size > len(self.data):
                raise OSError(f"read of {size} bytes at {offset} outside {len(self.data)}")
            out.append(self.data[offset:offset + size])
        return out


def _values(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt.kind == "f":
        return (rng.standard_normal(shape) * 100).astype(dt)
    info = np.iinfo(dt)
    return rng.integers(max(info.min, -10**6), min(info.max, 10**6), shape,
                        endpoint=True).astype(dt)


def _datasets(path: Path) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    with h5py.File(path, "r") as f:
        # o[...] keeps a scalar a 0-d array of the stored dtype (o[()] gives a numpy scalar,
        # always in native byte order), as the record path returns it
        f.visititems(lambda n, o: out.__setitem__(n, o[...] if o.shape == () else o[()])
                     if isinstance(o, h5py.Dataset) else None)
    return out


def _assert_same(path: Path, source=None, base=0, size=None, rows=((0,), (1, 3))) -> None:
    """Every dataset of ``path`` reads natively exactly as h5py reads it (and rows too)."""
    expected = _datasets(path)
    assert expected
    own = None
    if source is None:
        own = source = LocalFileSource(path)
    try:
        f = h5native.open_file(source, base, size)
        for name, want in expected.items():
            got = f.read(name)
            assert got.dtype == want.dtype, name
            assert got.shape == want.shape, name
            np.testing.assert_array_equal(got, want, err_msg=name)
            if want.ndim and want.shape[0]:
                for sel in rows:
                    sel = [r for r in sel if r < want.shape[0]]
                    np.testing.assert_array_equal(f.read(name, sel), want[sel], err_msg=name)
    finally:
        if own is not None:
            own.close()


def _write(path: Path, libver: str, build) -> Path:
    with h5py.File(path, "w", libver=libver) as f:
        build(f)
    return path


# -- files written by h5py in many layouts -------------------------------------------------


CASES = list(itertools.product(
    ["earliest", "latest"],
    [{}, {"compression": "gzip", "compression_opts": 1},
     {"compression": "gzip", "compression_opts": 9, "shuffle": True},
     {"compression": "gzip", "shuffle": True, "fletcher32": True}, {"shuffle": True},
     {"fletcher32": True}],
    [(37, 5), (100,), (9, 4, 3)],
))


@pytest.mark.parametrize(("libver", "filters", "shape"), CASES)
def test_chunked_filters_and_dtypes_read_as_h5py(tmp_path, libver, filters, shape):
    def build(f):
        for i, dt in enumerate(DTYPES):
            chunks = tuple(max(1, n // 3) for n in shape)  # partial last chunks
            # at most 8 links per group: h5py's latest format goes dense beyond
            f.create_dataset(f"t{i}/c", data=_values(shape, dt, i), chunks=chunks, **filters)
            f.create_dataset(f"t{i}/one", data=_values(shape, dt, i), chunks=shape, **filters)
            f.create_dataset(f"t{i}/e", data=_values(shape, dt, i), chunks=shape,
                             maxshape=(None, *shape[1:]), **filters)
    _assert_same(_write(tmp_path / "c.h5", libver, build))


@pytest.mark.parametrize("libver", ["earliest", "latest"])
def test_contiguous_compact_scalar_and_empty_read_as_h5py(tmp_path, libver):
    def build(f):
        for i, dt in enumerate(DTYPES):
            f.create_dataset(f"t{i}/contig", data=_values((13, 3), dt, i))
            f[f"t{i}/scalar"] = _values((), dt, i)
            f.create_dataset(f"t{i}/empty", shape=(0, 4), dtype=dt)
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            dcpl.set_layout(h5py.h5d.COMPACT)
            data = _values((6, 2), dt, i)
            space = h5py.h5s.create_simple(data.shape)
            dsid = h5py.h5d.create(f.id, f"t{i}/compact".encode(),
                                   h5py.h5t.py_create(data.dtype), space, dcpl=dcpl)
            dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, data)
        f.create_dataset("t0/unwritten", shape=(4, 4), dtype="<f8", fillvalue=2.5)
    _assert_same(_write(tmp_path / "c.h5", libver, build))


@pytest.mark.parametrize("libver", ["earliest", "latest"])
def test_unallocated_chunks_read_as_the_fill_value(tmp_path, libver):
    def build(f):
        d = f.create_dataset("sparse", shape=(40, 6), chunks=(7, 4), dtype="<f4",
                             fillvalue=-1.5, compression="gzip", shuffle=True)
        d[5:9, 1:3] = 7.0  # two of 12 chunks written (rows 0-6 and 7-13, columns 0-3)
        f.create_dataset("nofill", shape=(10,), chunks=(3,), dtype="<i2")[4] = 9
        e = f.create_dataset("ext", shape=(3, 2), chunks=(2, 2), maxshape=(None, 2),
                             dtype=">f8", fillvalue=4.0)
        e[0] = [1, 2]
    path = _write(tmp_path / "s.h5", libver, build)
    _assert_same(path, rows=((0, 9, 10, 39), (8,)))
    with LocalFileSource(path) as src:
        info = h5native.open_file(src).dataset("sparse")
    assert len(info.chunks) == 2
    assert info.fill_value() == -1.5


def test_implicit_chunk_index_reads_as_h5py(tmp_path):
    def build(f):
        data = _values((20, 6), "<f8")
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((6, 4))
        dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
        dsid = h5py.h5d.create(f.id, b"implicit", h5py.h5t.py_create(data.dtype),
                               h5py.h5s.create_simple(data.shape), dcpl=dcpl)
        dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, data)
    _assert_same(_write(tmp_path / "i.h5", "latest", build))


@pytest.mark.parametrize("libver", ["earliest", "latest"])
def test_nested_groups_and_many_members(tmp_path, libver):
    def build(f):
        for a in range(3):
            for b in range(3):
                f.create_dataset(f"a{a}/b{b}/deep/x", data=_values((5,), "<f4", a * 3 + b))
        for k in range(6):  # compact (latest) or several symbol entries (earliest)
            f.create_dataset(f"flat/d{k:02d}", data=_values((2, 2), "<i8", k), chunks=(1, 2))
    _assert_same(_write(tmp_path / "g.h5", libver, build))


def test_many_members_in_an_old_style_group(tmp_path):
    """More links than one symbol node holds: a B-tree of several nodes (K=16 per node)."""
    def build(f):
        for k in range(90):
            f.create_dataset(f"many/d{k:03d}", data=np.full(3, k, "<i2"))
    _assert_same(_write(tmp_path / "m.h5", "earliest", build))


def test_v1_btree_of_many_chunks(tmp_path):
    """Enough chunks for a chunk B-tree with internal nodes."""
    def build(f):
        f.create_dataset("d", data=_values((3000, 3), "<f4"), chunks=(7, 2), compression="gzip")
    _assert_same(_write(tmp_path / "b.h5", "earliest", build), rows=((0, 500, 2999),))


def test_a_stored_zip_member_at_an_offset(tmp_path):
    def build(f):
        f.create_dataset("force/data", data=_values((300, 8), "<f4"), chunks=(150, 4),
                         compression="gzip", shuffle=True)
        f.create_dataset("c", data=_values((10,), ">f8"))
    member = _write(tmp_path / "0001.h5", "earliest", build)
    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_STORED) as z:
        z.writestr("padding.bin", os.urandom(1000))
        z.write(member, "0001.h5")
        z.writestr("after.bin", os.urandom(100))
    with zipfile.ZipFile(archive) as z:
        info = z.getinfo("0001.h5")
    raw = archive.read_bytes()
    name_len, extra_len = struct.unpack_from("<HH", raw, info.header_offset + 26)
    base = info.header_offset + 30 + name_len + extra_len
    assert raw[base:base + 8] == b"\x89HDF\r\n\x1a\n"
    with LocalFileSource(archive) as src:
        _assert_same(member, src, base, info.file_size)
    counting = CountingSource(raw)
    h5native.open_file(counting, base, info.file_size).read("force/data")
    assert all(base <= o and o + n <= base + info.file_size for o, n in counting.reads)


def test_the_demo_data_reads_as_h5py_loose_and_zipped(demo_loose, demo_zip):
    for path in sorted((demo_loose / "h5").glob("*.h5"))[:6]:
        _assert_same(path)
    archive = sorted(demo_zip.glob("*.zip"))[0]
    with zipfile.ZipFile(archive) as z:
        infos = [i for i in z.infolist() if i.filename.endswith(".h5")][:4]
        blobs = {i.filename: z.read(i) for i in infos}
    raw = archive.read_bytes()
    for i in infos:
        name_len, extra_len = struct.unpack_from("<HH", raw, i.header_offset + 26)
        base = i.header_offset + 30 + name_len + extra_len
        loose = Path(archive.parent / f"_{i.filename}")
        loose.write_bytes(blobs[i.filename])
        try:
            _assert_same(loose, CountingSource(raw), base, i.file_size)
        finally:
            loose.unlink()


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(
    shape=st.lists(st.integers(1, 23), min_size=1, max_size=3),
    data=st.data(),
    dtype=st.sampled_from(DTYPES),
    libver=st.sampled_from(["earliest", "latest"]),
    gzip=st.sampled_from([None, 1, 6]),
    shuffle=st.booleans(),
    fletcher32=st.booleans(),
)
def test_random_chunked_datasets_and_rows(tmp_path_factory, shape, data, dtype, libver, gzip,
                                          shuffle, fletcher32):
    chunks = tuple(data.draw(st.integers(1, n)) for n in shape)
    rows = sorted(data.draw(st.sets(st.integers(0, shape[0] - 1), max_size=shape[0])))
    path = tmp_path_factory.mktemp("h") / "r.h5"
    values = _values(tuple(shape), dtype)
    with h5py.File(path, "w", libver=libver) as f:
        f.create_dataset("d", data=values, chunks=chunks, compression=gzip,
                         shuffle=shuffle, fletcher32=fletcher32)
    with LocalFileSource(path) as src:
        f = h5native.open_file(src)
        np.testing.assert_array_equal(f.read("d"), values)
        np.testing.assert_array_equal(f.read("d", rows), values[rows])


@pytest.mark.parametrize("written", [None, (4500,), (10, 2100, 4999)],
                         ids=["every-page", "one-page", "three-pages"])
def test_a_paged_fixed_array_index_reads_as_h5py(tmp_path, written):
    """More chunks than one fixed-array page holds (1,024): the data block's bitmap says
    which pages are written; the unwritten pages' chunks read as the fill value."""
    path = tmp_path / "paged.h5"
    values = _values((5000,), "<f4")
    with h5py.File(path, "w", libver="latest") as f:
        d = f.create_dataset("d", shape=(5000,), dtype="<f4", chunks=(1,), fillvalue=-1,
                             compression="gzip", shuffle=True)
        if written is None:
            d[...] = values
        else:
            for i in written:
                d[i] = values[i]
        f.create_dataset("e", data=_values((6, 11, 16), "<f8"), chunks=(1, 1, 1))
    with h5py.File(path, "r") as f:
        want = {name: f[name][()] for name in ("d", "e")}
    with LocalFileSource(path) as src:
        f = h5native.open_file(src)
        for name, values in want.items():
            np.testing.assert_array_equal(f.read(name), values)
        np.testing.assert_array_equal(f.read("d", [0, 4500, 4999]), want["d"][[0, 4500, 4999]])


# -- metadata records -------------------------------------------------------------------------


def test_meta_round_trips_and_a_second_open_reads_no_metadata(tmp_path):
    def build(f):
        f.create_dataset("force/data", data=_values((300, 8), "<f4"), chunks=(150, 4),
                         compression="gzip", shuffle=True)
        f.create_dataset("big", data=_values((20000,), "<f8"))  # data beyond the first block
    path = _write(tmp_path / "m.h5", "earliest", build)
    raw = path.read_bytes()
    first = CountingSource(raw)
    f = h5native.open_file(first)
    want = {p: f.read(p) for p in ("force/data", "big")}
    meta = f.meta
    for copy in (FileMeta.from_json(meta.to_json()), pickle.loads(pickle.dumps(meta))):
        assert copy == meta
        second = CountingSource(raw)
        g = h5native.open_file(second, meta=copy)
        for p, values in want.items():
            np.testing.assert_array_equal(g.read(p), values)
        info = g.dataset("force/data")
        chunk_ranges = {(a, s) for _o, _m, a, s in info.chunks}
        big = g.dataset("big")
        assert set(second.reads) == chunk_ranges | {(big.address, big.nbytes)}
    assert json.loads(meta.to_json())["datasets"]["force/data"]["chunk_shape"] == [150, 4]
    with pytest.raises(NativeFormatError):
        FileMeta.from_json('{"version": 99}')


def test_chunks_are_fetched_in_one_call(tmp_path):
    def build(f):
        f.create_dataset("pad", data=_values((40000,), "<f8"))
        f.create_dataset("d", data=_values((2000, 10), "<f8"), chunks=(100, 10),
                         compression="gzip")
    raw = _write(tmp_path / "o.h5", "earliest", build).read_bytes()
    src = CountingSource(raw)
    f = h5native.open_file(src)
    f.dataset("d")
    before = src.calls
    f.read("d")
    assert src.calls == before + 1  # every chunk outside the first block in one read_ranges


class PreadCounting(LocalFileSource):
    """A local file whose reads into buffers (the chunk path's ``pread``) are recorded."""

    def __init__(self, path: Path):
        super().__init__(path)
        self.preads: list[tuple[int, int]] = []

    def readinto(self, buffer, offset: int) -> int:
        self.preads.append((offset, len(buffer)))
        return super().readinto(buffer, offset)


def test_local_chunks_are_read_in_one_pread_per_run_of_neighbours(tmp_path):
    """A local file's chunks come in one ``pread`` per run of neighbours, with exactly the
    bytes of one ``pread`` per chunk; a gap over the limit starts a new read."""
    from guideloom.fastread.chunks import Chunk
    from guideloom.h5native import file as native_file

    def build(f):
        f.create_dataset("pad", data=_values((40000,), "<f8"))
        f.create_dataset("d", data=_values((2000, 10), "<f8"), chunks=(100, 10),
                         compression="gzip", shuffle=True)
        f.create_dataset("e", data=_values((300, 7), "<i4"), chunks=(30, 7))
    path = _write(tmp_path / "o.h5", "earliest", build)
    with h5py.File(path, "r") as ref:
        want = {name: ref[name][()] for name in ("d", "e")}
    src = PreadCounting(path)
    try:
        f = h5native.open_file(src)
        info = f.dataset("d")
        assert len(info.chunks) == 20
        f.read("e")  # its metadata and chunks, to count what d alone costs
        before = len(src.preads)
        np.testing.assert_array_equal(f.read("d"), want["d"])
        assert len(src.preads) == before + 1  # 20 neighbouring chunks: one pread
        np.testing.assert_array_equal(f.read("e"), want["e"])

        chunks = [Chunk(o, m, a, n) for o, m, a, n in info.chunks]
        one_each = {c.address: src.read(f.base + c.address, c.size) for c in chunks}
        for gap in (native_file.LOCAL_GAP, 0):
            src.preads.clear()
            got = f._local_chunks(chunks, gap)
            assert {a: bytes(v) for a, v in got.items()} == one_each
            for (start, n), (next_start, _) in itertools.pairwise(src.preads):
                assert next_start - (start + n) > gap  # closer runs would have been merged
            assert sum(n for _, n in src.preads) <= (
                max(c.address + c.size for c in chunks) - min(c.address for c in chunks))
        # chunks far apart (a gap over the limit between each two) come in reads of their own
        apart = chunks[::2]
        src.preads.clear()
        got = f._local_chunks(apart, gap=0)
        assert {a: bytes(v) for a, v in got.items()} == {c.address: one_each[c.address]
                                                          for c in apart}
        assert sorted(src.preads) == sorted((f.base + c.address, c.size) for c in apart)
    finally:
        src.close()


def test_absent_paths_are_key_errors(tmp_path):
    path = _write(tmp_path / "k.h5", "earliest", lambda f: f.create_dataset("a/b", data=[1]))
    with LocalFileSource(path) as src:
        f = h5native.open_file(src)
        for missing in ("a/c", "x", "a/b/c", "a"):
            with pytest.raises(KeyError):
                f.dataset(missing)


# -- what the native reader leaves to h5py ---------------------------------------------------


def test_unsupported_features_raise_native_unsupported(tmp_path):
    def build(f):
        f.create_dataset("lzf", data=np.arange(100.0), chunks=(10,), compression="lzf")
        f.create_dataset("strings", data=np.array([b"ab", b"cd"]))
        f.create_dataset("two_unlimited", data=np.ones((4, 4)), chunks=(2, 2),
                         maxshape=(None, None))
        f["soft"] = h5py.SoftLink("/lzf")
        f["ext"] = h5py.ExternalLink("other.h5", "/x")
        for k in range(30):  # dense link storage
            f.create_dataset(f"dense/d{k}", data=[k])
    path = _write(tmp_path / "u.h5", "latest", build)
    with LocalFileSource(path) as src:
        f = h5native.open_file(src)
        for name in ("lzf", "strings", "two_unlimited", "soft", "ext", "dense/d3"):
            with pytest.raises(NativeUnsupported):
                f.read(name)


def test_a_user_block_is_left_to_h5py(tmp_path):
    path = tmp_path / "ub.h5"
    with h5py.File(path, "w", userblock_size=512) as f:
        f["d"] = np.arange(5)
    with LocalFileSource(path) as src, pytest.raises(NativeUnsupported):
        h5native.open_file(src).read("d")


# -- hostile input ----------------------------------------------------------------------------


def _hostile(raw: bytes, path: str = "d", limit: float = 2.0) -> BaseException | None:
    """Read ``path`` of ``raw``: returns the error (a NativeError or KeyError) or None."""
    src = CountingSource(raw)
    t0 = time.perf_counter()
    try:
        h5native.open_file(src).read(path)
    except (NativeError, KeyError) as exc:
        return exc
    finally:
        assert time.perf_counter() - t0 < limit
        assert all(o >= 0 and o + n <= len(raw) for o, n in src.reads)
    return None


@pytest.fixture
def chunked_file(tmp_path) -> bytes:
    def build(f):
        f.create_dataset("d", data=_values((3000, 3), "<f4"), chunks=(7, 2), compression="gzip",
                         shuffle=True, fletcher32=True)
    return _write(tmp_path / "h.h5", "earliest", build).read_bytes()


def test_a_truncated_file_is_a_clear_error(chunked_file):
    for cut in (10, 40, 200, 1000, len(chunked_file) // 2, len(chunked_file) - 1):
        exc = _hostile(chunked_file[:cut])
        assert isinstance(exc, NativeFormatError), cut


def _btree_nodes(raw: bytes) -> list[int]:
    return [i for i in range(len(raw) - 5) if raw[i:i + 4] == b"TREE" and raw[i + 4] == 1]


def test_a_chunk_btree_cycle_is_detected(chunked_file):
    raw = bytearray(chunked_file)
    nodes = _btree_nodes(raw)
    internal = [n for n in nodes if raw[n + 5] > 0]
    assert internal
    node = internal[0]
    # point its first child back at itself
    key = 8 + 8 * 3
    struct.pack_into("<Q", raw, node + 8 + 16 + key, node)
    exc = _hostile(bytes(raw))
    assert isinstance(exc, NativeFormatError)
    assert "B-tree" in str(exc)


def test_offsets_beyond_the_end_are_errors(chunked_file):
    raw = bytearray(chunked_file)
    leaf = next(n for n in _btree_nodes(raw) if raw[n + 5] == 0)
    struct.pack_into("<Q", raw, leaf + 8 + 16 + 8 + 8 * 3, len(raw) + 10)  # a chunk address
    exc = _hostile(bytes(raw))
    assert isinstance(exc, NativeFormatError)
    assert "outside" in str(exc)


def test_a_corrupt_chunk_fails_its_checksum(chunked_file):
    raw = bytearray(chunked_file)
    with h5py.File(__import__("io").BytesIO(bytes(raw)), "r") as f:
        info = f["d"].id.get_chunk_info(3)
    raw[info.byte_offset + 5] ^= 0xFF
    assert isinstance(_hostile(bytes(raw)), NativeFormatError)


def test_absurd_dimensions_are_refused_without_allocating(tmp_path):
    path = _write(tmp_path / "a.h5", "earliest",
                  lambda f: f.create_dataset("d", data=np.arange(6.0).reshape(2, 3)))
    raw = bytearray(path.read_bytes())
    with h5py.File(path, "r") as f:
        header = f["d"].id.get_offset()  # the data's address; find the dataspace message
    assert header
    # the dataspace message (type 1) of a v1 object header holds the dims as 8-byte lengths
    pattern = struct.pack("<QQ", 2, 3)
    at = raw.find(pattern)
    assert at > 0
    struct.pack_into("<QQ", raw, at, 1 << 40, 1 << 40)
    exc = _hostile(bytes(raw))
    assert isinstance(exc, NativeFormatError)


@pytest.mark.parametrize("flip", range(0, 400, 7))
def test_bad_checksums_in_v2_metadata(tmp_path, flip):
    path = _write(tmp_path / "v2.h5", "latest",
                  lambda f: f.create_dataset("g/d", data=np.arange(50.0), chunks=(10,)))
    raw = bytearray(path.read_bytes())
    if flip >= len(raw):
        return
    with h5py.File(path, "r") as f:
        data_ranges = [(c.byte_offset, c.byte_offset + c.size) for c in
                       (f["g/d"].id.get_chunk_info(i) for i in range(5))]
    if any(a <= flip < b for a, b in data_ranges):
        return  # raw data carries no checksum here
    raw[flip] ^= 0x10
    exc = _hostile(bytes(raw), "g/d")
    if exc is None:  # an unused byte (padding, free space): the data must still be right
        with LocalFileSource(path) as src:
            np.testing.assert_array_equal(h5native.open_file(src).read("g/d"),
                                          np.arange(50.0))


def test_random_damage_gives_only_native_errors(chunked_file):
    rng = np.random.default_rng(1)
    end = min(len(chunked_file), 6000)  # metadata sits at the start
    for _ in range(300):
        raw = bytearray(chunked_file)
        for at in rng.integers(0, end, 3):
            raw[at] = int(rng.integers(0, 256))
        _hostile(bytes(raw))  # any other exception type fails the test


# -- the record path --------------------------------------------------------------------------


def test_iter_view_reads_natively_and_matches_h5py(demo_zip, demo_loose, monkeypatch):
    for root in (demo_zip, demo_loose):
        ds = guideloom.load(data_dir=root)
        h5stats.NATIVE_STATS.reset()
        native = list(guideloom.streaming.iter_view("force-curve", dataset=ds))
        stats = h5stats.native_stats()
        assert stats["native"] == len(native) > 0, stats
        assert stats["fallbacks"] == 0, stats
        monkeypatch.setenv(records.NATIVE_ENV, "0")
        h5stats.NATIVE_STATS.reset()
        plain = list(guideloom.streaming.iter_view("force-curve", dataset=ds))
        assert h5stats.native_stats()["native"] == 0
        monkeypatch.delenv(records.NATIVE_ENV)
        assert len(plain) == len(native)
        for a, b in zip(native, plain, strict=True):
            assert a.keys() == b.keys()
            for k in a:
                np.testing.assert_array_equal(a[k], b[k])
                assert np.asarray(a[k]).dtype == np.asarray(b[k]).dtype


def test_a_file_native_cannot_read_falls_back_to_h5py(demo_copy):
    """An lzf-compressed force table: h5py reads it, the fallback is counted."""
    ds = guideloom.load(data_dir=demo_copy)
    ident = ds.index().ids[0]
    target = demo_copy / "h5" / f"{ident:04d}.h5"
    target.parent.mkdir(exist_ok=True)
    values = _values((50, 8), "<f4")
    with h5py.File(target, "w") as f:
        f.create_dataset("force/data", data=values, chunks=(10, 8), compression="lzf")
    loose_ds = guideloom.load(data_dir=demo_copy)
    h5stats.NATIVE_STATS.reset()
    rec = next(guideloom.streaming.iter_view("force-curve", dataset=loose_ds, sim_ids=[ident]))
    np.testing.assert_array_equal(rec[next(k for k in rec if k != "_sim_id")], values)
    stats = h5stats.native_stats()
    assert stats["fallbacks"] == 1
    assert any("NativeUnsupported" in r for r in stats["reasons"])


def test_an_extensible_array_beyond_its_index_block_reads_or_is_unsupported(tmp_path):
    values = _values((100, 3), "<f8")

    def build(f):
        d = f.create_dataset("d", shape=(0, 3), maxshape=(None, 3), chunks=(10, 3),
                             dtype="<f8", compression="gzip")
        for start in range(0, 100, 10):  # appended chunk by chunk, as loggers write
            d.resize(start + 10, axis=0)
            d[start:start + 10] = values[start:start + 10]
    path = _write(tmp_path / "ea.h5", "latest", build)
    with LocalFileSource(path) as src:
        try:
            got = h5native.open_file(src).read("d")
        except NativeUnsupported:
            return
    np.testing.assert_array_equal(got, values)


@pytest.mark.parametrize("damage", ["chunk", "btree", "truncate"])
def test_damaged_files_give_the_h5py_paths_error_message(demo_copy, monkeypatch, damage):
    """The native reader gives up on a damaged file; h5py re-reads it and words the error, so
    the user sees the same message with the native reader on and off."""
    ds = guideloom.load(data_dir=demo_copy)
    ident = ds.index().ids[0]
    target = demo_copy / "h5" / f"{ident:04d}.h5"
    target.parent.mkdir(exist_ok=True)
    values = _values((300, 8), "<f4")
    with h5py.File(target, "w") as f:
        f.create_dataset("force/data", data=values, chunks=(100, 4), compression="gzip",
                         shuffle=True)
        info = f["force/data"].id.get_chunk_info(2)
    raw = bytearray(target.read_bytes())
    if damage == "chunk":
        raw[info.byte_offset + info.size // 2:info.byte_offset + info.size // 2 + 16] = b"\0" * 16
    elif damage == "btree":
        at = raw.find(b"TREE", raw.find(b"TREE") + 4)  # the chunk index (after the group's)
        raw[at:at + 4] = b"XXXX"
    else:
        raw = raw[:info.byte_offset + 10]
    target.write_bytes(bytes(raw))
    loose = guideloom.load(data_dir=demo_copy)
    messages = {}
    for native in ("1", "0"):
        monkeypatch.setenv(records.NATIVE_ENV, native)
        h5stats.NATIVE_STATS.reset()
        with pytest.raises(guideloom.errors.ExperimentReadError) as info_:
            next(guideloom.streaming.iter_view("force-curve", dataset=loose, sim_ids=[ident]))
        messages[native] = str(info_.value)
        if native == "1":
            assert h5stats.native_stats()["fallbacks"] == 1
    assert messages["1"] == messages["0"]
    assert str(ident) in messages["1"]
    assert str(target) in messages["1"]
