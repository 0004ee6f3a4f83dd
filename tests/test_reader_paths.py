"""The hot paths of ``load_export`` on npy exports: rows, ``by_sim_id`` and DataLoader batches."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import guideloom
from tests import export_helpers as helpers


@pytest.fixture(scope="module")
def npy_export(demo_zip, tmp_path_factory):
    root = tmp_path_factory.mktemp("reader") / "npy"
    guideloom.export_to_numpy("force-curve", root, data_dir=demo_zip,
                              record_transform=helpers.first_rows, client="sync")
    return root


def test_rows_are_read_only_views_equal_to_the_files(npy_export):
    export = guideloom.load_export(npy_export)
    files = {f: np.load(npy_export / f"{f}.npy") for f in export.fields}
    n = len(export)
    for i in (0, 7, n - 1, -1, -n):
        row = export[i]
        for f in export.fields:
            assert isinstance(row[f], np.ndarray)
            assert row[f].shape == files[f].shape[1:]  # scalars come as 0-d arrays
            np.testing.assert_array_equal(row[f], files[f][i])
            assert not row[f].flags.writeable  # no copy, and no silent change of the file
    np.testing.assert_array_equal(export[np.int64(3)]["force"], files["force"][3])
    for bad in (n, -n - 1):
        with pytest.raises(IndexError):
            export[bad]
    with pytest.raises(TypeError):
        export[1.0]


def test_by_sim_id_accepts_python_and_numpy_ids(npy_export):
    export = guideloom.load_export(npy_export)
    ids = export.sim_ids
    for row, sim_id in ((0, ids[0]), (5, int(ids[5])), (9, np.int32(ids[9]))):
        got = export.by_sim_id(sim_id)
        np.testing.assert_array_equal(got["force"], export[row]["force"])
        assert int(got["sim"]) == int(ids[row])
    with pytest.raises(KeyError, match="not in export"):
        export.by_sim_id(int(ids.max()) + 1000)


def test_getitems_gives_writable_rows_in_order(npy_export):
    export = guideloom.load_export(npy_export)
    order = [4, 0, 4, 11]
    rows = export.__getitems__(order)
    assert len(rows) == len(order)
    for i, row in zip(order, rows, strict=True):
        for f in export.fields:
            np.testing.assert_array_equal(row[f], export[i][f])
            assert row[f].flags.writeable


def test_torch_dataloader_batches_without_warnings(npy_export):
    torch = pytest.importorskip("torch", reason="torch is an optional dependency")
    export = guideloom.load_export(npy_export)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # e.g. torch's warning on non-writable arrays
        batches = list(torch.utils.data.DataLoader(export, batch_size=8))
    assert sum(len(b["force"]) for b in batches) == len(export)
    np.testing.assert_array_equal(batches[1]["force"][2].numpy(), export[10]["force"])


def test_a_row_out_of_range_is_named_in_the_exports_words(npy_export):
    export = guideloom.load_export(npy_export)
    n = len(export)
    for bad in (n, n + 5, -n - 1):
        with pytest.raises(IndexError, match=f"row {bad} out of range for an export of {n} rows"):
            export[bad]
    assert export[n - 1]["sim"] == export[-1]["sim"]  # the last row, both ways


def test_rows_of_a_field_subset_hold_only_those_fields(npy_export):
    export = guideloom.load_export(npy_export, fields=["force"])
    whole = guideloom.load_export(npy_export)
    for i in (0, len(export) - 1):
        row = export[i]
        assert set(row) == {"force"}
        np.testing.assert_array_equal(row["force"], whole[i]["force"])
    empty = guideloom.load_export(npy_export, fields=[])
    assert empty[0] == {}
    with pytest.raises(IndexError, match="out of range"):
        empty[len(empty)]  # no field to index: still checked


def test_rows_read_after_close_and_in_a_pickled_copy_are_the_files(npy_export):
    import pickle

    export = guideloom.load_export(npy_export)
    files = {f: np.load(npy_export / f"{f}.npy") for f in export.fields}
    blob = pickle.dumps(export)
    assert len(blob) < files["force"].nbytes  # the maps stay behind: the copy reopens them
    copy = pickle.loads(blob)
    export.close()
    for reader in (copy, export):  # the closed one opens its files again on the next read
        for i in (0, 3, -1):
            for f in files:
                np.testing.assert_array_equal(reader[i][f], files[f][i])
