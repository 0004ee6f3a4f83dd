"""The fast chunk path is bit-exact against h5py, and h5py still judges damaged data."""

from __future__ import annotations

import os
from pathlib import Path

import h5py
import numpy as np
import pytest

import guideloom
from guideloom import fastread
from guideloom.demo import make_demo_data
from guideloom.errors import CorruptDataError
from guideloom.fastread import chunks, inflate
from guideloom.read.hdf5 import open_h5py
from guideloom.read.records import RecordReader
from guideloom.read.scan import scan_locations
from guideloom.select.selection import select
from tests.zip_helpers import corrupt_member


def _values(shape: tuple[int, ...], dtype: str, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    smooth = np.cumsum(rng.normal(size=int(np.prod(shape))), dtype=np.float64).reshape(shape)
    return (smooth * 7).astype(dtype)


def _fast(path: Path, name: str, rows=None) -> tuple[np.ndarray, np.ndarray]:
    """(fast path result, h5py result); asserts the fast path took the dataset."""
    with h5py.File(path, "r") as f:
        dset = f[name]
        p = fastread.plan(dset)
        assert p is not None, "the fast path should handle this dataset"
        fast = fastread.read(p, fastread.RawSource(f.id.get_vfd_handle()), rows)
        ref = dset[()] if rows is None else dset[list(rows)]
    return fast, ref


def _same(a: np.ndarray, b: np.ndarray) -> None:
    assert a.dtype == b.dtype
    assert a.shape == b.shape
    assert a.tobytes() == b.tobytes()


@pytest.mark.parametrize("level", [1, 4, 9])
@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("fletcher32", [False, True])
@pytest.mark.parametrize(
    ("shape", "chunk", "dtype"),
    [
        ((10_000,), (3_000,), "<f4"),       # 1-D, partial last chunk
        ((301, 7), (64, 3), ">f8"),         # 2-D, partial edge chunks on both axes
        ((256, 16), (32, 16), ">i2"),       # 2-D, whole rows: decoded in place
        ((999,), (100,), "u1"),             # one-byte elements: shuffle is the identity
        ((50, 4, 3), (7, 4, 3), "<i8"),     # 3-D
    ],
)
def test_matrix_bit_exact(tmp_path, level, shuffle, fletcher32, shape, chunk, dtype):
    path = tmp_path / "m.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=_values(shape, dtype), chunks=chunk, compression="gzip",
                         compression_opts=level, shuffle=shuffle, fletcher32=fletcher32)
    fast, ref = _fast(path, "x")
    _same(fast, ref)
    rows = [0, 2, shape[0] - 1]
    fast, ref = _fast(path, "x", rows)
    _same(fast, ref)


@pytest.mark.parametrize("threads", [1, 3])
def test_thread_counts_agree(tmp_path, threads):
    path = tmp_path / "t.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=_values((2_000_000,), "<f4"), chunks=(65_536,),
                         compression="gzip", shuffle=True)
    before = fastread.decode_threads()
    fastread.set_decode_threads(threads)
    try:
        fast, ref = _fast(path, "x")
    finally:
        fastread.set_decode_threads(before)
    _same(fast, ref)


@pytest.mark.parametrize("backend", inflate.BACKENDS)
def test_every_inflate_backend(tmp_path, monkeypatch, backend):
    try:
        _, run = inflate.pick(backend)
    except (ImportError, OSError, AttributeError) as exc:
        pytest.skip(f"inflate back end {backend} is not installed here ({exc})")
    monkeypatch.setattr(inflate, "inflate_into", run)
    path = tmp_path / "b.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=_values((700, 9), ">f4"), chunks=(100, 4),
                         compression="gzip", shuffle=True)
    fast, ref = _fast(path, "x")
    _same(fast, ref)


def test_unallocated_chunks_get_the_fill_value(tmp_path):
    path = tmp_path / "u.h5"
    with h5py.File(path, "w") as f:
        d = f.create_dataset("x", shape=(100, 40), dtype="<i4", chunks=(16, 16),
                             compression="gzip", shuffle=True, fillvalue=-7)
        d[20:40, 5:30] = np.arange(500).reshape(20, 25)
        assert d.id.get_num_chunks() < 7 * 3  # some chunks were never written
    fast, ref = _fast(path, "x")
    _same(fast, ref)
    assert (fast == -7).sum() > 0
    fast, ref = _fast(path, "x", [0, 21, 99])
    _same(fast, ref)


def test_filter_mask_that_skips_filters(tmp_path):
    path = tmp_path / "mask.h5"
    data = _values((4, 1000), "<f4")
    with h5py.File(path, "w") as f:
        d = f.create_dataset("x", shape=data.shape, dtype=data.dtype, chunks=(1, 1000),
                             compression="gzip", shuffle=True)
        d[0] = data[0]  # through the whole pipeline
        shuffled = data[1].view(np.uint8).reshape(1000, 4).T.copy().tobytes()
        d.id.write_direct_chunk((1, 0), shuffled, filter_mask=0b10)  # deflate skipped
        d.id.write_direct_chunk((2, 0), data[2].tobytes(), filter_mask=0b11)  # both skipped
        import zlib

        d.id.write_direct_chunk((3, 0), zlib.compress(data[3].tobytes()), filter_mask=0b01)
        masks = sorted(d.id.get_chunk_info(i).filter_mask for i in range(4))
        assert masks == [0, 1, 2, 3]
    fast, ref = _fast(path, "x")
    _same(fast, ref)
    _same(fast, data)


def test_big_endian_and_in_place_decoding_match(tmp_path):
    path = tmp_path / "be.h5"
    with h5py.File(path, "w") as f:
        for dtype in (">f4", ">u8", ">i4", "<f2", "|b1"):
            data = _values((5_000,), "f8") > 0 if dtype == "|b1" else _values((5_000,), dtype)
            f.create_dataset(dtype.replace("|", "").replace(">", "be").replace("<", "le"),
                             data=data, chunks=(1_024,), compression="gzip", shuffle=True)
    with h5py.File(path, "r") as f:
        names = list(f)
    for name in names:
        fast, ref = _fast(path, name)
        _same(fast, ref)


def test_other_layouts_fall_back_to_h5py(tmp_path):
    path = tmp_path / "other.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("contiguous", data=np.arange(100.0))
        f.create_dataset("lzf", data=np.arange(1000.0), chunks=(100,), compression="lzf")
        f.create_dataset("scaleoffset", data=np.arange(1000), chunks=(100,), scaleoffset=0)
        f.create_dataset("vlen", data=["a", "bc", "def"], dtype=h5py.string_dtype(),
                         chunks=(2,), compression="gzip")
    with h5py.File(path, "r") as f:
        raw = fastread.RawSource(f.id.get_vfd_handle())
        for name in f:
            assert fastread.plan(f[name]) is None, name
            got = fastread.read_dataset(f[name], raw)
            want = f[name][()]
            assert got.dtype == want.dtype
            assert (got == want).all()


def test_low_level_dataset_ids_read_like_h5py_for_every_kind_of_type(tmp_path):
    """The record path hands ``read_dataset`` a bare ``DatasetID``; plain numbers are read by
    one low-level call, everything else still by h5py, and both give what ``dset[()]`` gives."""
    path = tmp_path / "kinds.h5"
    enum = h5py.enum_dtype({"RED": 0, "GREEN": 1}, basetype="i1")
    with h5py.File(path, "w") as f:
        f.create_dataset("f8", data=np.arange(12.0).reshape(3, 4))
        f.create_dataset("big_endian", data=np.arange(10, dtype=">i4"))
        f.create_dataset("bool", data=np.array([True, False, True]))
        f.create_dataset("bytes", data=np.array([b"ab", b"c", b"def"]))
        f.create_dataset("enum", data=np.array([0, 1, 1], "i1"), dtype=enum)
        f.create_dataset("compound", data=np.array([(1, 2.5), (3, 4.5)],
                                                   dtype=[("a", "<i4"), ("b", "<f8")]))
        f.create_dataset("scalar", data=np.float32(3.5))
        f.create_dataset("empty", shape=(0, 3), dtype="<f4")
        f.create_dataset("vlen", data=["a", "bc"], dtype=h5py.string_dtype())
        f.create_dataset("chunked", data=_values((5_000,), "<f4"), chunks=(1_000,),
                         compression="gzip", shuffle=True)
    with h5py.File(path, "r") as f:
        raw = fastread.RawSource(f.id.get_vfd_handle())
        for name in f:
            want = f[name][()]
            dsid = h5py.h5d.open(f.id, name.encode())
            got = fastread.read_dataset(dsid, raw)
            assert type(got) is type(want), name
            assert np.asarray(got).dtype == np.asarray(want).dtype, name
            assert np.array_equal(np.asarray(got), np.asarray(want)), name
            if name == "big_endian":
                assert got.dtype == np.dtype(">i4")
        buf = np.full((3, 4), -1.0)
        assert fastread.read_dataset(h5py.h5d.open(f.id, b"f8"), None, out=buf) is buf
        assert np.array_equal(buf, f["f8"][()])
        records = np.zeros(2, f["compound"].dtype)  # h5py's own path also fills a given buffer
        assert fastread.read_dataset(h5py.h5d.open(f.id, b"compound"), None, out=records) \
            is records
        assert np.array_equal(records, f["compound"][()])


def _corrupt_chunk(path: Path, name: str, index: int = 1) -> None:
    with h5py.File(path, "r") as f:
        info = f[name].id.get_chunk_info(index)
    with open(path, "r+b") as fh:
        fh.seek(info.byte_offset + info.size // 2)
        fh.write(b"\x00" * min(64, info.size // 3))


@pytest.mark.parametrize("fletcher32", [False, True])
def test_corrupt_chunk_is_refused_and_h5py_reports_it(tmp_path, fletcher32):
    path = tmp_path / "bad.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=_values((50_000,), "<f4"), chunks=(10_000,),
                         compression="gzip", shuffle=True, fletcher32=fletcher32)
    _corrupt_chunk(path, "x")
    with h5py.File(path, "r") as f:
        p = fastread.plan(f["x"])
        raw = fastread.RawSource(f.id.get_vfd_handle())
        with pytest.raises(fastread.FastReadError):
            fastread.read(p, raw)
        with pytest.raises(OSError):
            fastread.read_dataset(f["x"], raw, min_bytes=0)


def test_corrupt_chunk_in_a_loose_file_names_experiment_and_file(tmp_path):
    make_demo_data(tmp_path, n=2, layout="loose", seed=3)
    victim = tmp_path / "h5" / "0001.h5"
    _corrupt_chunk(victim, "force/data", 0)
    with pytest.raises(CorruptDataError, match=r"experiment 1: .*0001.h5.*'force/data'") as info:
        list(guideloom.streaming.iter_view("force-curve", data_dir=tmp_path))
    assert info.value.sim_id == 1
    assert info.value.file.endswith("0001.h5")


@pytest.fixture(scope="module")
def real_layout(tmp_path_factory) -> Path:
    """``make-demo-data --scan-shape 2000 3200 --n 2``, zipped."""
    root = tmp_path_factory.mktemp("real_layout")
    make_demo_data(root, n=2, scan_shape=(2000, 3200), layout="zip", seed=0)
    return root


def _dataset_names(f: h5py.File) -> list[str]:
    names: list[str] = []
    f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
    return names


def test_real_layout_from_zip_members(real_layout):
    ds = guideloom.load(data_dir=real_layout)
    locations = scan_locations(ds, real_layout)
    checked = 0
    for loc in locations.values():
        opened = open_h5py(loc)
        fid, raw = opened.fid, opened.raw
        assert raw is not None
        assert raw.start > 0
        with h5py.File(fid) as f:
            for name in _dataset_names(f):
                p = fastread.plan(f[name])
                assert p is not None, name
                _same(fastread.read(p, raw), f[name][()])
                if name.startswith("pointcloud/"):  # the published layout: 512 chunks of 50 KB
                    assert f[name].id.get_num_chunks() == 512
                    assert f[name].chunks == (12_500,)
                checked += 1
    assert checked >= 4


def test_records_match_plain_h5py(real_layout):
    ds = guideloom.load(data_dir=real_layout)
    view = ds.view("pointcloud-op10")
    sel = select(ds, real_layout, where=lambda r: r["has_pointcloud"])
    assert sel.locations
    reader = RecordReader(view)
    for loc, row in zip(sel.locations, sel.rows, strict=True):
        record = reader.read(loc, row)
        with guideloom.open_h5(loc.sim_id, data_dir=real_layout) as f:
            for vf in view.fields:
                if vf.is_h5:
                    _same(record[vf.alias], f[vf.h5_path][()])


@pytest.mark.parametrize("h5_path", ["force/data", "pointcloud/op10/z"])
def test_corrupt_chunk_in_zip_member_names_experiment_and_file(real_layout, tmp_path, h5_path):
    import shutil

    data = tmp_path / "data"
    shutil.copytree(real_layout, data)
    ds = guideloom.load(data_dir=data)
    view = next(name for name in ("force-curve", "pointcloud-op10")
                if h5_path in [vf.h5_path for vf in ds.view(name).fields])
    index = ds.index()
    sim_id = next(i for i in index.ids if index.row(i)["has_pointcloud"])
    loc = scan_locations(ds, data)[sim_id]
    with guideloom.open_h5(sim_id, data_dir=data) as f:
        info = f[h5_path].id.get_chunk_info(1)
        big = f[h5_path].id.get_storage_size() >= fastread.FAST_MIN_BYTES
    assert big == (h5_path != "force/data")  # both the fast path and h5py's are exercised
    corrupt_member(Path(loc.path), loc.member, info.byte_offset + 8, b"\x07" * 32)
    with pytest.raises(CorruptDataError,
                       match=rf"experiment {sim_id}: .*{loc.member}.*'{h5_path}'") as caught:
        list(guideloom.streaming.iter_view(view, data_dir=data, sim_ids=[sim_id]))
    assert caught.value.sim_id == sim_id
    assert caught.value.h5_path == h5_path


def test_chunk_outside_the_member_is_refused(tmp_path):
    path = tmp_path / "short.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=_values((4_000,), "<f4"), chunks=(1_000,), compression="gzip")
    with h5py.File(path, "r") as f:
        p = fastread.plan(f["x"])
        size = os.path.getsize(path)
        last = max(c.address + c.size for c in p.chunks)
        short = fastread.RawSource(f.id.get_vfd_handle(), 0, last - 1)
        with pytest.raises(chunks.FastReadError, match="outside"):
            fastread.read(p, short)
        _same(fastread.read(p, fastread.RawSource(f.id.get_vfd_handle(), 0, size)), f["x"][()])


def _read_in_child(path: str, name: str, conn) -> None:
    with h5py.File(path, "r") as f:
        data = fastread.read(fastread.plan(f[name]), fastread.RawSource(f.id.get_vfd_handle()))
    conn.send_bytes(data.tobytes())
    conn.close()


def test_decoding_threads_work_in_a_forked_child(tmp_path):
    import multiprocessing

    path = tmp_path / "fork.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=_values((1_500_000,), "<f4"), chunks=(100_000,),
                         compression="gzip", shuffle=True)
    before = fastread.decode_threads()
    fastread.set_decode_threads(2)
    try:
        parent, _ = _fast(path, "x")  # the parent's pool now has a thread
        ctx = multiprocessing.get_context("fork")
        receive, send = ctx.Pipe(duplex=False)
        child = ctx.Process(target=_read_in_child, args=(str(path), "x", send), daemon=True)
        child.start()
        send.close()
        if not receive.poll(120):
            child.kill()
            pytest.fail("the forked child did not finish decoding (its pool was the parent's)")
        got = receive.recv_bytes()
        child.join()
    finally:
        fastread.set_decode_threads(before)
    assert child.exitcode == 0
    assert got == parent.tobytes()


@pytest.mark.parametrize("size", [2, 3, 4, 8])
@pytest.mark.parametrize("n", [1, 7, 65_537])
def test_unshuffle_matches_the_definition(size, n):
    """Byte k of element i sits at plane k, position i; the fast interleave undoes exactly that
    (3-byte elements take the strided path)."""
    from guideloom.fastread.chunks import _unshuffle

    data = np.random.default_rng(size * n).integers(0, 256, n * size, dtype=np.uint8)
    planes = np.ascontiguousarray(data.reshape(n, size).T).reshape(-1)
    out = np.zeros_like(data)
    _unshuffle(planes, out, size)
    assert out.tobytes() == data.tobytes()


@pytest.mark.parametrize("compression", ["gzip", None])  # fast path, and h5py's read_direct
def test_read_dataset_into_a_reused_buffer(tmp_path, compression):
    path = tmp_path / "r.h5"
    with h5py.File(path, "w") as f:
        for k in range(3):
            f.create_dataset(f"x{k}", data=_values((4_000, 64), "<f4", seed=k), chunks=(500, 64),
                             compression=compression, shuffle=compression is not None)
    buf = np.full((4_000, 64), np.nan, "<f4")
    with h5py.File(path, "r") as f:
        source = fastread.RawSource(f.id.get_vfd_handle())
        for k in range(3):  # each read overwrites the whole buffer
            got = fastread.read_dataset(f[f"x{k}"], source, out=buf, min_bytes=0)
            assert got is buf
            _same(got, f[f"x{k}"][()])
        # a buffer of another shape or dtype is not used: a new array comes back
        for wrong in (np.empty((4_000, 63), "<f4"), np.empty((4_000, 64), ">f4")):
            got = fastread.read_dataset(f["x0"], source, out=wrong, min_bytes=0)
            assert got is not wrong
            _same(got, f["x0"][()])
        # rows and a buffer: the buffer does not fit a selection, so it is not used
        got = fastread.read_dataset(f["x1"], source, [3, 9], out=buf, min_bytes=0)
        assert got is not buf
        _same(got, f["x1"][[3, 9]])


def test_plan_read_checks_its_out_buffer(tmp_path):
    path = tmp_path / "o.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=_values((1_000,), "<f8"), chunks=(100,), compression="gzip")
    with h5py.File(path, "r") as f:
        p = fastread.plan(f["x"])
        with pytest.raises(ValueError, match="expected C-contiguous"):
            fastread.read(p, fastread.RawSource(f.id.get_vfd_handle()),
                          out=np.empty(2_000, "<f8")[::2])


@pytest.mark.parametrize("dtype", ["<i2", "<f4", ">f4", "<f8"])
@pytest.mark.parametrize("threads", [1, 3])
def test_many_small_shuffled_chunks_with_gaps_and_masks(tmp_path, dtype, threads):
    """The published layout (hundreds of small shuffle+deflate chunks) is inflated in runs and
    unshuffled per run; a run ends at an unwritten chunk, at a chunk whose mask skips a filter,
    and at the partial last chunk."""
    path = tmp_path / "small.h5"
    data = _values((300_500,), dtype)
    size = np.dtype(dtype).itemsize
    with h5py.File(path, "w") as f:
        d = f.create_dataset("x", shape=data.shape, dtype=dtype, chunks=(1_000,),
                             compression="gzip", shuffle=True, fillvalue=3)
        for lo in range(0, 300_500, 1_000):
            if lo // 1_000 in (7, 8, 150):
                continue  # never written: the fill value
            d[lo:lo + 1_000] = data[lo:lo + 1_000]
        # chunk 40 stored shuffled but not deflated
        block = data[40_000:41_000].view(np.uint8).reshape(1_000, size).T.copy().tobytes()
        d.id.write_direct_chunk((40_000,), block, filter_mask=0b10)
    before = fastread.decode_threads()
    fastread.set_decode_threads(threads)
    try:
        fast, ref = _fast(path, "x")
    finally:
        fastread.set_decode_threads(before)
    _same(fast, ref)
    assert (fast[7_000:9_000] == 3).all()
    assert (fast[150_000:151_000] == 3).all()
    _same(fast[40_000:41_000], data[40_000:41_000])


@pytest.fixture
def grid_taken(monkeypatch) -> list[bool]:
    """What each call of the grid decoder answered (True: it decoded the dataset)."""
    taken: list[bool] = []
    real = chunks._decode_grid

    def spy(*args):
        taken.append(real(*args))
        return taken[-1]

    monkeypatch.setattr(chunks, "_decode_grid", spy)
    return taken


@pytest.mark.parametrize(
    ("shape", "chunk", "dtype"),
    [
        ((1117, 8), (559, 4), "<f4"),       # the seed's force table: edge chunk on axis 0
        ((1118, 8), (559, 4), "<f4"),       # an exact grid: decoded straight into the output
        ((301, 7), (64, 3), ">f8"),         # partial edge chunks on both axes
        ((9, 10, 11), (4, 5, 3), "<i2"),    # 3-D, edges on every axis
    ],
)
def test_small_datasets_decode_as_one_grid_bit_exact(tmp_path, grid_taken, shape, chunk, dtype):
    """A small dataset of several chunks that are not runs of the output (shuffle, deflate)
    is decoded as one grid of chunks: the grid path is taken, and its bytes are h5py's."""
    path = tmp_path / "grid.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=_values(shape, dtype), chunks=chunk, compression="gzip",
                         shuffle=True)
    fast, ref = _fast(path, "x")
    _same(fast, ref)
    assert grid_taken == [True]


def test_grid_decoding_leaves_other_layouts_to_the_chunk_path(tmp_path, grid_taken):
    """Chunks with checksums, with a filter skipped, or a dataset with an unallocated chunk
    take the general path (the grid declines them), and read as h5py reads them."""
    path = tmp_path / "other.h5"
    data = _values((40, 6), "<f4")
    with h5py.File(path, "w") as f:
        f.create_dataset("sum", data=data, chunks=(16, 4), compression="gzip", shuffle=True,
                         fletcher32=True)
        d = f.create_dataset("mask", shape=data.shape, dtype=data.dtype, chunks=(20, 3),
                             compression="gzip", shuffle=True)
        d[...] = data
        d.id.write_direct_chunk((0, 0), data[:20, :3].copy().tobytes(), filter_mask=0b11)
        d = f.create_dataset("gap", shape=data.shape, dtype=data.dtype, chunks=(20, 3),
                             compression="gzip", shuffle=True)
        d[:20] = data[:20]
    for name in ("sum", "mask", "gap"):
        fast, ref = _fast(path, name)
        _same(fast, ref)
    assert grid_taken == [False, False, False]
