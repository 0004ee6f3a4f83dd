"""Hostile HDF5 files against the native reader: a wrong row is worse than an error.

Each file is written by h5py and then damaged in its metadata; where h5py refuses the damaged
file the native reader must refuse it too (records then fall back to h5py, which words the
error), and where h5py reads it the native reader must return what h5py returns or the
original values. Every read must stay inside the file's bytes.
"""

from __future__ import annotations

import io
import random
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

import guideloom
from guideloom.errors import CorruptDataError
from guideloom.h5native import NativeError, NativeFormatError, open_file
from guideloom.read.byte_source import LocalFileSource
from guideloom.streaming import iter_view
from tests import export_helpers
from tests.hdf5_damage import point_chunk_at_another

PAD = 4096


class PaddedSource:
    """The file's bytes with random bytes before and after; records reads outside the file
    (every read through ``read_ranges``, as a remote source's)."""

    high_latency = True

    def __init__(self, data: bytes, seed: int = 0):
        rnd = random.Random(seed)
        self.buf = rnd.randbytes(PAD) + data + rnd.randbytes(PAD)
        self.lo, self.hi = PAD, PAD + len(data)
        self.outside: list[tuple[int, int]] = []

    @property
    def name(self) -> str:
        return "padded"

    def size(self) -> int:
        return len(self.buf)

    def read(self, offset: int, size: int, **_: object) -> bytes:
        return self.read_ranges([(offset, size)])[0]

    def read_ranges(self, ranges, **_: object) -> list[bytes]:
        out = []
        for offset, size in ranges:
            if offset < self.lo or offset + size > self.hi:
                self.outside.append((offset - self.lo, size))
            out.append(self.buf[offset:offset + size])
        return out


def _patch(data: bytes, old: bytes, new: bytes) -> bytes:
    at = data.find(old)
    assert at > 0, "the pattern must be unique"
    assert data.find(old, at + 1) < 0, "the pattern must be unique"
    return data[:at] + new + data[at + len(old):]


def _h5py_refuses(data: bytes, name: str) -> bool:
    try:
        with h5py.File(io.BytesIO(data), "r") as f:
            f[name][()]
    except Exception:
        return True
    return False


def test_rows_beyond_the_maximum_dimension_are_refused_not_served_as_fill(demo_loose, tmp_path):
    """A dataspace grown past its stored maximum (one flipped field): h5py refuses the file;
    the native reader served the extra rows as zeros (83 rows of made-up data, no error)."""
    data = tmp_path / "data"
    shutil.copytree(demo_loose, data)
    member = data / "h5" / "0000.h5"
    with h5py.File(member) as f:
        rows, cols = f["force/data"].shape
    raw = member.read_bytes()
    member.write_bytes(_patch(raw, struct.pack("<QQQQ", rows, cols, rows, cols),
                              struct.pack("<QQQQ", rows + 83, cols, rows, cols)))
    assert _h5py_refuses(member.read_bytes(), "force/data")
    with pytest.raises(NativeFormatError, match="exceed the maximum"):
        open_file(LocalFileSource(member)).read("force/data")
    with pytest.raises(CorruptDataError, match="experiment 0"):
        list(iter_view("force-curve", data_dir=data, sim_ids=[0]))


def test_compact_data_of_another_shape_is_refused(tmp_path):
    """A compact dataset whose dataspace no longer matches its bytes: h5py refuses ("size of
    compact dataset's data buffer doesn't match"); the native reader returned a (4, 1) array
    cut from the (4, 3) values."""
    path = tmp_path / "compact.h5"
    with h5py.File(path, "w") as f:
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_layout(h5py.h5d.COMPACT)
        d = h5py.h5d.create(f.id, b"cmp", h5py.h5t.STD_I32BE, h5py.h5s.create_simple((4, 3)),
                            dcpl=dcpl)
        d.write(h5py.h5s.ALL, h5py.h5s.ALL, np.arange(12, dtype=">i4").reshape(4, 3))
    damaged = _patch(path.read_bytes(), struct.pack("<QQQQ", 4, 3, 4, 3),
                     struct.pack("<QQQQ", 4, 1, 4, 1))
    assert _h5py_refuses(damaged, "cmp")
    with pytest.raises(NativeFormatError, match="compact data"):
        open_file(PaddedSource(damaged), PAD, len(damaged)).read("cmp")


def _corpus(root: Path) -> list[tuple[bytes, list[str], list[tuple[int, int]]]]:
    rng = np.random.default_rng(1)
    out = []
    for lib in ("earliest", "latest"):
        path = root / f"{lib}.h5"
        with h5py.File(path, "w", libver=lib) as f:
            f.create_dataset("a/contig", data=rng.random((7, 3)))
            f.create_dataset("b/chunk", data=rng.random((50, 4)).astype("<f4"), chunks=(8, 4),
                             maxshape=(50, 4))
            f.create_dataset("b/gz", data=rng.random((40, 2)).astype("<f4"), chunks=(16, 2),
                             compression="gzip", shuffle=True)
            f.create_dataset("b/fl", data=np.arange(30, dtype="<u2").reshape(10, 3),
                             chunks=(4, 3), fletcher32=True)
            f.create_dataset("b/ext", data=rng.random(20).astype("<f4"), chunks=(5,),
                             maxshape=(None,))
            dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
            dcpl.set_layout(h5py.h5d.COMPACT)
            d = h5py.h5d.create(f.id, b"cmp", h5py.h5t.STD_I32BE,
                                h5py.h5s.create_simple((4, 3)), dcpl=dcpl)
            d.write(h5py.h5s.ALL, h5py.h5s.ALL, np.arange(12, dtype=">i4").reshape(4, 3))
            names = sorted(n for n in ("a/contig", "b/chunk", "b/gz", "b/fl", "b/ext", "cmp"))
            raw = []
            for n in names:
                ds = f[n]
                if ds.chunks:
                    for i in range(ds.id.get_num_chunks()):
                        c = ds.id.get_chunk_info(i)
                        raw.append((c.byte_offset, c.byte_offset + c.size))
                elif ds.id.get_offset() is not None:
                    raw.append((ds.id.get_offset(), ds.id.get_offset() + ds.id.get_storage_size()))
        out.append((path.read_bytes(), names, raw))
    return out


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)


@pytest.mark.slow  # 800 mutations, ~7 s; fast: test_h5native.py's random damage, the refusals
def test_damaged_metadata_never_gives_other_values_than_h5py(tmp_path):
    """800 seeded metadata mutations (bit flips, bytes and 2/4/8-byte fields set to edge values):
    the native reader reads only inside the file and returns either an error or the values
    h5py (or the undamaged file) holds; where h5py refuses a file the native reader may only
    return the original values."""
    rnd = random.Random(2126)
    corpus = _corpus(tmp_path)
    wrong, outside = [], []
    for case in range(800):
        data, names, raw = corpus[case % len(corpus)]
        meta = [i for i in range(len(data)) if not any(a <= i < b for a, b in raw)]
        b = bytearray(data)
        for _ in range(rnd.choice([1, 1, 2])):
            p = rnd.choice(meta)
            kind = rnd.random()
            if kind < 0.4:
                b[p] ^= 1 << rnd.randrange(8)
            else:
                w = rnd.choice([1, 2, 4, 8])
                old = int.from_bytes(b[p:p + w], "little")
                v = rnd.choice([0, 1, 2 ** (8 * w) - 1, len(data), old + 1, old - 1, old + 8,
                                rnd.randrange(2 ** (8 * w))]) % 2 ** (8 * w)
                b[p:p + w] = v.to_bytes(w, "little")[:len(b[p:p + w])]
        damaged = bytes(b)
        name = names[case % len(names)]
        src = PaddedSource(damaged, case)
        try:
            got = open_file(src, PAD, len(damaged)).read(name)
        except (NativeError, KeyError, IndexError):
            got = None
        outside += [(case, name, r) for r in src.outside]
        if got is None:
            continue
        with h5py.File(io.BytesIO(data), "r") as f:
            original = f[name][()]
        if _same(got, original):
            continue
        try:
            with h5py.File(io.BytesIO(damaged), "r") as f:
                ref = f[name][()]
        except Exception:
            ref = None
        if ref is None or not _same(got, ref):
            if name == "cmp" and ref is None and got.shape == original.shape:
                continue  # the compact values are metadata bytes: damaged values, as h5py would
            wrong.append((case, name, got.shape, None if ref is None else ref.shape))
    assert not outside, f"reads outside the file: {outside[:5]}"
    assert not wrong, f"values neither h5py nor the file hold: {wrong[:5]}"


def test_a_chunk_key_beyond_the_maximum_shape_is_refused_not_served_as_fill(demo_loose, tmp_path):
    """One B-tree key of the force table moved far past the dataset (a damaged coordinate):
    HDF5 (h5py) and the native reader both dropped the chunk and served its 559 x 4 values as
    zeros without an error. No HDF5 writer puts a chunk beyond the maximum shape: the record
    is refused."""
    data = tmp_path / "data"
    shutil.copytree(demo_loose, data)
    member = data / "h5" / "0000.h5"
    with h5py.File(member) as f:
        ds = f["force/data"]
        chunk = next(ds.id.get_chunk_info(i) for i in range(ds.id.get_num_chunks())
                     if ds.id.get_chunk_info(i).chunk_offset == (0, 4))
    key = struct.pack("<IIQQQ", chunk.size, chunk.filter_mask, 0, 4, 0)
    member.write_bytes(_patch(member.read_bytes(), key, struct.pack(
        "<IIQQQ", chunk.size, chunk.filter_mask, 0, 4 + (1 << 62), 0)))
    with h5py.File(member) as f:
        assert not f["force/data"][:559, 4:].any()  # HDF5 reads the chunk as fill
    with pytest.raises(NativeFormatError, match="beyond the dataset's maximum shape"):
        open_file(LocalFileSource(member)).read("force/data")
    with pytest.raises(CorruptDataError, match="experiment 0"):
        list(iter_view("force-curve", data_dir=data, sim_ids=[0]))


def test_a_damaged_shuffle_parameter_is_refused_in_bounded_time(demo_loose, tmp_path):
    """The shuffle filter's element size set to 67,108,868 (two flipped bytes): the native
    reader looped over 67 million byte planes (minutes per chunk) and HDF5 returns the bytes
    still shuffled, without an error. The record is refused at once, naming the experiment."""
    data = tmp_path / "data"
    shutil.copytree(demo_loose, data)
    member = data / "h5" / "0000.h5"
    raw = member.read_bytes()
    old = b"shuffle\0" + struct.pack("<I", 4)
    member.write_bytes(raw.replace(old, b"shuffle\0" + struct.pack("<I", 67108868), 1))
    with h5py.File(member) as f, h5py.File(demo_loose / "h5" / "0000.h5") as g:
        assert not np.array_equal(f["force/data"][()], g["force/data"][()])  # HDF5: wrong data
    script = ("import sys\nfrom guideloom.errors import CorruptDataError\n"
              "from guideloom.streaming import iter_view\n"
              "try:\n    list(iter_view('force-curve', data_dir=sys.argv[1], sim_ids=[0]))\n"
              "except CorruptDataError as exc:\n    print('refused:', exc)\n")
    done = subprocess.run([sys.executable, "-c", script, str(data)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert "refused: experiment 0" in done.stdout, done.stdout + done.stderr
    assert "shuffle filter" in done.stdout


def test_a_moved_chunk_address_in_an_extensible_array_is_refused(tmp_path):
    """A chunk address inside an extensible array index block changed (the block's checksum no
    longer matches; h5py refuses): the native reader read that chunk from elsewhere in the
    file and returned other values without an error."""
    path = tmp_path / "ext.h5"
    values = np.arange(20, dtype="<f4")
    with h5py.File(path, "w", libver="latest") as f:
        f.create_dataset("d", data=values, chunks=(5,), maxshape=(None,))
        addr = f["d"].id.get_chunk_info(1).byte_offset
    raw = path.read_bytes()
    index = raw.find(b"EAIB")
    at = raw.find(struct.pack("<Q", addr), index)
    assert index > 0
    assert at > index
    damaged = raw[:at] + struct.pack("<Q", 256) + raw[at + 8:]
    assert _h5py_refuses(damaged, "d")
    with pytest.raises(NativeFormatError, match="checksum"):
        open_file(PaddedSource(damaged), PAD, len(damaged)).read("d")


def test_compact_data_for_an_empty_shape_is_refused(tmp_path):
    """A compact (4, 3) dataset whose dataspace says (4, 0): h5py refuses, the native reader
    returned an empty array (an experiment with no rows instead of an error)."""
    path = tmp_path / "compact.h5"
    with h5py.File(path, "w") as f:
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_layout(h5py.h5d.COMPACT)
        d = h5py.h5d.create(f.id, b"cmp", h5py.h5t.STD_I32BE, h5py.h5s.create_simple((4, 3)),
                            dcpl=dcpl)
        d.write(h5py.h5s.ALL, h5py.h5s.ALL, np.arange(12, dtype=">i4").reshape(4, 3))
    damaged = _patch(path.read_bytes(), struct.pack("<QQQQ", 4, 3, 4, 3),
                     struct.pack("<QQQQ", 4, 0, 4, 3))
    assert _h5py_refuses(damaged, "cmp")
    with pytest.raises(NativeFormatError, match="compact data"):
        open_file(PaddedSource(damaged), PAD, len(damaged)).read("cmp")



def test_a_datatype_message_of_version_zero_is_not_read_as_integers(tmp_path):
    """One byte of a float32 dataset's datatype message zeroed (version 1 class float becomes
    version 0 class fixed-point): h5py refuses ("bad version number for datatype message"); the
    native reader served the float32 values as uint32 integers without an error."""
    path = tmp_path / "f.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("d", data=np.linspace(0.5, 3.5, 12, dtype="<f4").reshape(4, 3))
    float32 = bytes([0x11, 0x20, 0x1F, 0x00]) + struct.pack("<I", 4)  # v1 float, LE, 4 bytes
    damaged = _patch(path.read_bytes(), float32, b"\0" + float32[1:])
    assert _h5py_refuses(damaged, "d")
    with pytest.raises(NativeFormatError, match="datatype message of version 0"):
        open_file(PaddedSource(damaged), PAD, len(damaged)).read("d")


def test_a_chunk_index_entry_pointing_at_another_chunks_bytes_is_refused(demo_loose, tmp_path):
    """One B-tree entry of the force table pointed at another chunk's bytes (address and size
    of that chunk, its own coordinates kept): HDF5 (h5py) serves the other chunk's rows twice
    without an error (issue 30, C9). Overlapping chunk extents are damage: the record is
    refused, naming the experiment and the file."""
    data = tmp_path / "data"
    shutil.copytree(demo_loose, data)
    member = data / "h5" / "0000.h5"
    with h5py.File(member) as f:
        original = f["force/data"][()]
        rows, cols = f["force/data"].chunks
    assert len(original.shape) == 2
    assert point_chunk_at_another(member, "force/data") == ((0, 0), (0, cols))
    with h5py.File(member) as f:  # HDF5: the first chunk's rows served twice, no error
        served = f["force/data"][()]
    width = min(cols, original.shape[1] - cols)
    assert np.array_equal(served[:rows, cols:cols + width], original[:rows, :width])
    assert not np.array_equal(served, original)
    with pytest.raises(NativeFormatError, match="overlap those of chunk"):
        open_file(LocalFileSource(member)).read("force/data")
    with pytest.raises(CorruptDataError, match="experiment 0") as info:
        list(iter_view("force-curve", data_dir=data, sim_ids=[0]))
    assert str(member) in str(info.value)
    assert "overlap" in str(info.value)


def _lzf_force(member: Path) -> np.ndarray:
    """Rewrite ``force/data`` of ``member`` with the LZF filter (which the native reader lacks:
    h5py reads it) in chunks of 4 columns; return its values."""
    with h5py.File(member, "a") as f:
        values = f["force/data"][()]
        del f["force/data"]
        f["force"].create_dataset("data", data=values, chunks=(values.shape[0], 4),
                                  compression="lzf")
    return values


@pytest.mark.parametrize("path", ["GUIDELOOM_NATIVE=0", "LZF"])
def test_a_chunk_entry_pointing_at_another_chunks_bytes_is_refused_on_the_h5py_path(
        demo_loose, tmp_path, monkeypatch, path):
    """The same damage read through h5py: with ``GUIDELOOM_NATIVE=0`` (a gzip dataset, the
    fast path's chunk decoder) or by default for a filter the native reader lacks (LZF: h5py
    decodes). h5py served the first chunk's values in the second's place (issue 38); its
    chunk index is now checked as the native reader checks its own, and the error names the
    experiment, the file and the dataset."""
    data = tmp_path / "data"
    shutil.copytree(demo_loose, data)
    member = data / "h5" / "0000.h5"
    if path == "LZF":
        original = _lzf_force(member)
    else:
        monkeypatch.setenv("GUIDELOOM_NATIVE", "0")
        with h5py.File(member) as f:
            original = f["force/data"][()]
    intact = next(iter_view("force-curve", data_dir=data, sim_ids=[0]))["force_data"]
    np.testing.assert_array_equal(intact, original)  # this path reads the intact file
    first, second = point_chunk_at_another(member, "force/data")
    with h5py.File(member) as f:  # HDF5 serves the damaged index without an error
        served = f["force/data"][()]
        rows, width = f["force/data"].chunks
    assert first == (0, 0)
    assert second == (0, width)
    shown = min(width, original.shape[1] - width)
    np.testing.assert_array_equal(served[:rows, width:width + shown], original[:rows, :shown])
    with pytest.raises(CorruptDataError) as info:
        list(iter_view("force-curve", data_dir=data, sim_ids=[0]))
    assert info.value.sim_id == 0
    assert info.value.file == str(member)
    assert info.value.h5_path == "force/data"
    assert f"chunk {second}" in str(info.value)
    assert f"chunk {first}" in str(info.value)
    with pytest.warns(guideloom.SkippedDataWarning, match="0"):
        guideloom.export_to_numpy("force-curve", tmp_path / "skip", data_dir=data,
                                  sim_ids=[0, 1], client="sync", on_error="skip",
                                  record_transform=export_helpers.first_rows)
    assert guideloom.load_export(tmp_path / "skip").sim_ids.tolist() == [1]
