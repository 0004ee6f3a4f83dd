"""iter_view and open_h5 over both layouts, filters, missing and damaged data."""

from __future__ import annotations

import shutil
import warnings
import zipfile

import h5py
import numpy as np
import pytest

import guideloom
from guideloom.errors import CorruptDataError, MissingDataWarning, MissingFieldError
from tests.zip_helpers import corrupt_member


def test_seed_section_2_runs_as_written(demo_zip, capsys):
    DATA_DIR = demo_zip
    ds = guideloom.load(data_dir=DATA_DIR)
    guideloom.add_view(ds, 'force-signals', fields={
        'force': 'force_data',                                        # (n, 8) HDF5 table
        'geometry': 'process-parameters/geometry',                    # CSV columns ride along
        'blankholder_force': 'process-parameters/blankholder_force',
        'split': 'process-parameters/split',
    })
    for rec in guideloom.streaming.iter_view('force-signals', data_dir=DATA_DIR, dataset=ds,
                                             sim_ids=[0]):
        for alias, value in rec.items():
            arr = np.asarray(value)
            if arr.ndim:
                print(f'  {alias:18s} shape={arr.shape}  dtype={arr.dtype}')
            else:
                print(f'  {alias:18s} = {value!r}')
        break
    out = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in out] == [
        "force", "geometry", "blankholder_force", "split", "_sim_id"]
    assert "dtype=float32" in out[0]
    assert ", 8)" in out[0]
    assert out[1].endswith("'concave'")
    assert out[2].endswith("= 100")
    assert out[4].endswith("= 0")


def _by_id(records):
    return {r["_sim_id"]: r for r in records}


def test_zip_and_loose_layouts_give_identical_records(demo_zip, demo_loose):
    zipped = _by_id(guideloom.streaming.iter_view("pointcloud-op10", data_dir=demo_zip,
                                                  where=lambda r: r["has_pointcloud"]))
    loose = _by_id(guideloom.streaming.iter_view("pointcloud-op10", data_dir=demo_loose,
                                                 where=lambda r: r["has_pointcloud"]))
    assert zipped.keys() == loose.keys()
    assert len(zipped) > 20
    for sim_id, rec in zipped.items():
        for alias in ("pointcloud_op10_z", "pointcloud_op10_luminescence"):
            np.testing.assert_array_equal(rec[alias], loose[sim_id][alias])
            assert rec[alias].shape == (100 * 160,)
            assert rec[alias].dtype == np.float32
    # the values look like measurements: not constant, some unmeasured zero pixels
    z = zipped[0]["pointcloud_op10_z"]
    assert 0.05 < np.mean(z == 0) < 0.6
    assert np.std(z[z > 0]) > 1.0


def test_records_match_plain_h5py(demo_loose):
    recs = list(guideloom.streaming.iter_view("thickness", data_dir=demo_loose,
                                              where=lambda r: r["has_oil"]))
    assert recs
    for rec in recs:
        with h5py.File(demo_loose / "h5" / f"{rec['_sim_id']:04d}.h5") as f:
            np.testing.assert_array_equal(rec["sheet_thickness_data"], f["sheet_thickness/data"])
            np.testing.assert_array_equal(rec["oil_thickness_data"], f["oil_thickness/data"])
            assert f.attrs["has_oil"]


def test_filters_combine_and_sim_ids_keep_their_order(demo_zip):
    index = guideloom.load(data_dir=demo_zip).index()
    train = [i for i in index.ids if index.row(i)["split"] == "train"]
    got = [r["_sim_id"] for r in guideloom.streaming.iter_view(
        "force-curve", data_dir=demo_zip, where=lambda row: row["split"] == "train")]
    assert got == train
    wanted = [30, 2, 17, 5]
    got = [r["_sim_id"] for r in guideloom.streaming.iter_view(
        "force-curve", data_dir=demo_zip, sim_ids=wanted, sim_ids_order="sim_ids")]
    assert got == wanted
    both = [r["_sim_id"] for r in guideloom.streaming.iter_view(
        "force-curve", data_dir=demo_zip, sim_ids=wanted, sim_ids_order="sim_ids",
        where=lambda row: row["split"] == "train")]
    assert both == [i for i in wanted if i in train]
    assert [r["_sim_id"] for r in guideloom.streaming.iter_view(
        "force-curve", data_dir=demo_zip, sim_ids=np.array([3, 4]))] == [3, 4]


def test_index_columns_are_typed_scalars(demo_zip):
    ds = guideloom.load(data_dir=demo_zip)
    guideloom.add_view(ds, "cols", fields={"f": ("force_data", [2, 0]),
                                            "oil": "process-parameters/has_oil",
                                            "temp": "process-parameters/mean_punch_temp"})
    rec = next(guideloom.streaming.iter_view("cols", dataset=ds, sim_ids=[4]))
    assert type(rec["oil"]) is bool
    assert type(rec["temp"]) is float
    with guideloom.open_h5(4, data_dir=demo_zip) as f:
        full = f["force/data"][()]
    np.testing.assert_array_equal(rec["f"], full[[2, 0]])


def test_unknown_view_fails_and_unknown_ids_warn_at_call_time(demo_zip):
    with pytest.raises(ValueError, match=r"unknown view 'force'.*force-curve"):
        guideloom.streaming.iter_view("force", data_dir=demo_zip)
    # ids not in the index table are skipped with a warning naming them and the file (rddac)
    with pytest.warns(MissingDataWarning, match="999.*not present in process_parameters.csv"):
        records = guideloom.streaming.iter_view("force-curve", data_dir=demo_zip,
                                                sim_ids=[1, 999])
    assert [r["_sim_id"] for r in records] == [1]


def test_missing_files_are_skipped_with_one_warning(demo_copy):
    # remove 12 experiments from the archive: rewrite concave.zip without them
    archive = demo_copy / "concave.zip"
    with zipfile.ZipFile(archive) as zf:
        members = sorted(zf.namelist())
        keep = members[12:]
        dropped = sorted(int(m[:-3]) for m in members[:12])
        payload = {m: zf.read(m) for m in keep}
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_STORED) as zf:
        for m, data in payload.items():
            zf.writestr(m, data)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = [r["_sim_id"] for r in guideloom.streaming.iter_view("force-curve",
                                                                   data_dir=demo_copy)]
    missing_warnings = [w for w in caught if issubclass(w.category, MissingDataWarning)]
    assert len(missing_warnings) == 1
    message = str(missing_warnings[0].message)
    assert "12 experiment(s)" in message
    assert str(dropped[0]) in message
    assert "more" in message
    assert sorted(got) == sorted(set(range(36)) - set(dropped))


def test_missing_hdf5_path_names_id_file_path_and_suggests_where(demo_zip):
    index = guideloom.load(data_dir=demo_zip).index()
    no_oil = next(i for i in index.ids if not index.row(i)["has_oil"])
    with pytest.raises(MissingFieldError) as info:
        list(guideloom.streaming.iter_view("oil-thickness", data_dir=demo_zip, sim_ids=[no_oil]))
    msg = str(info.value)
    assert f"experiment {no_oil}" in msg
    assert f"{no_oil:04d}.h5" in msg
    assert ".zip" in msg
    assert "'oil_thickness/data'" in msg
    assert "where=lambda row: row['has_oil']" in msg
    assert info.value.sim_id == no_oil
    assert info.value.h5_path == "oil_thickness/data"
    ok = list(guideloom.streaming.iter_view("oil-thickness", data_dir=demo_zip,
                                            where=lambda row: row["has_oil"]))
    assert len(ok) == sum(index.row(i)["has_oil"] for i in index.ids)


def test_corrupt_member_header_names_id_and_archive(demo_copy):
    corrupt_member(demo_copy / "concave.zip", "0003.h5", 0)
    records = guideloom.streaming.iter_view("force-curve", data_dir=demo_copy, sim_ids=[2, 3])
    assert next(records)["_sim_id"] == 2
    with pytest.raises(CorruptDataError, match=r"experiment 3: .*concave.zip::0003.h5") as info:
        next(records)
    assert info.value.sim_id == 3


def test_corrupt_compressed_chunk_names_id_archive_and_path(demo_copy):
    with guideloom.open_h5(1, data_dir=demo_copy) as f:
        offset = f["pointcloud/op10/z"].id.get_chunk_info(0).byte_offset
    corrupt_member(demo_copy / "concave.zip", "0001.h5", offset + 16, b"\x00" * 256)
    with pytest.raises(CorruptDataError, match=r"experiment 1: .*0001.h5.*'pointcloud/op10/z'"):
        list(guideloom.streaming.iter_view("pointcloud-op10", data_dir=demo_copy, sim_ids=[1]))


def test_first_record_arrives_without_walking_other_members(demo_copy):
    # damage every other member's data: the first record must still arrive
    with zipfile.ZipFile(demo_copy / "concave.zip") as zf:
        names = sorted(zf.namelist())
    for name in names[1:]:
        corrupt_member(demo_copy / "concave.zip", name, 0)
    first = next(guideloom.streaming.iter_view("force-curve", data_dir=demo_copy))
    assert first["_sim_id"] == 0


def test_loose_files_win_over_zip_members(demo_copy, demo_loose):
    (demo_copy / "h5").mkdir()
    replacement = demo_copy / "h5" / "0005.h5"
    shutil.copy(demo_loose / "h5" / "0005.h5", replacement)
    with h5py.File(replacement, "r+") as f:
        f["force/data"][0, 0] = -123.0
    rec = next(guideloom.streaming.iter_view("force-curve", data_dir=demo_copy, sim_ids=[5]))
    assert rec["force_data"][0, 0] == -123.0
    with guideloom.open_h5(5, data_dir=demo_copy) as f:
        assert f.filename == str(replacement)


def test_open_h5_from_zip_and_errors(demo_zip):
    with guideloom.open_h5(7, data_dir=demo_zip) as f:
        assert isinstance(f, h5py.File)
        assert int(f.attrs["index"]) == 7
        assert f["force/data"].shape[1] == 8
    with pytest.raises(KeyError, match="999"), guideloom.open_h5(999, data_dir=demo_zip):
        pass


@pytest.mark.parametrize("layout", ["stored member", "deflated member", "loose file"])
def test_open_h5_returns_a_file_that_closes_what_it_opened(layout, demo_copy, demo_loose):
    data_dir = demo_loose if layout == "loose file" else demo_copy
    if layout == "deflated member":  # rewrite the archive with compressed members
        archive = demo_copy / "concave.zip"
        with zipfile.ZipFile(archive) as zf:
            payload = {m: zf.read(m) for m in zf.namelist()}
        with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for m, data in payload.items():
                zf.writestr(m, data)
    # the README's spelling: a plain call returning an h5py.File, closed by the caller
    f = guideloom.open_h5(7, data_dir=data_dir)
    assert isinstance(f, h5py.File)
    assert int(f.attrs["index"]) == 7
    held = getattr(f, "fileobj", None)  # the member's file object (None for a loose file)
    assert (held is None) == (layout == "loose file")
    f.close()
    assert not f.id.valid
    assert held is None or held.closed
    # the same call as a context manager: the with-block closes both
    with guideloom.open_h5(7, data_dir=data_dir) as g:
        rows = g["force/data"].shape[0]
        held = getattr(g, "fileobj", None)
        assert held is None or not held.closed
    assert rows > 0
    assert not g.id.valid
    assert held is None or held.closed


def test_demo_data_is_deterministic(tmp_path):
    a = guideloom.make_demo_data(tmp_path / "a", n=4, layout="loose", seed=3)
    b = guideloom.make_demo_data(tmp_path / "b", n=4, layout="loose", seed=3)
    c = guideloom.make_demo_data(tmp_path / "c", n=4, layout="loose", seed=4)
    for i in range(4):
        with h5py.File(a.data_dir / "h5" / f"{i:04d}.h5") as fa, \
             h5py.File(b.data_dir / "h5" / f"{i:04d}.h5") as fb, \
             h5py.File(c.data_dir / "h5" / f"{i:04d}.h5") as fc:
            np.testing.assert_array_equal(fa["force/data"], fb["force/data"])
            assert fa["force/data"].shape != fc["force/data"].shape or \
                not np.array_equal(fa["force/data"], fc["force/data"])
            assert fa["force/data"].compression == "gzip"
            assert dict(fa.attrs)["index"] == i
    assert (a.data_dir / "process_parameters.csv").read_bytes() == \
        (b.data_dir / "process_parameters.csv").read_bytes()


def test_corrupt_loose_file_names_id_and_file(demo_loose, tmp_path):
    root = tmp_path / "data"
    shutil.copytree(demo_loose, root)
    damaged = root / "h5" / "0009.h5"
    damaged.write_bytes(b"not an hdf5 file" * 100)
    with pytest.raises(CorruptDataError, match=r"experiment 9: .*h5/0009.h5 is damaged") as info:
        list(guideloom.streaming.iter_view("force-curve", data_dir=root, sim_ids=[8, 9]))
    assert info.value.file == str(damaged)


def test_two_loose_files_for_one_id_are_an_error_naming_both(demo_loose, tmp_path):
    import shutil

    from guideloom.errors import ManifestError

    data = tmp_path / "data"
    shutil.copytree(demo_loose, data)
    shutil.copy(data / "h5" / "0002.h5", data / "h5" / "2.h5")
    with pytest.raises(ManifestError, match=r"two loose files hold experiment 2: .*0002\.h5 "
                                            r"and .*/2\.h5; keep one of them"):
        list(guideloom.streaming.iter_view("force-curve", data_dir=data))
