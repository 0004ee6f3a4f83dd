"""The typed index table."""

from __future__ import annotations

import csv
import math

import pytest

import guideloom
from guideloom.errors import ManifestError
from guideloom.select.index import parse_bool


def test_columns_are_typed_from_manifest(demo_zip):
    index = guideloom.load(data_dir=demo_zip).index()
    row = index.row(5)
    assert type(row["index"]) is int
    assert row["index"] == 5
    assert type(row["blankholder_force"]) is int
    assert type(row["mean_punch_temp"]) is float
    assert type(row["has_oil"]) is bool
    assert type(row["has_pointcloud"]) is bool
    assert type(row["geometry"]) is str
    assert index.ids == list(range(36))


@pytest.mark.parametrize(("text", "value"), [
    ("True", True), ("False", False), ("true", True), ("false", False), ("1", True), ("0", False),
    (" true ", True),
])
def test_boolean_spellings(text, value):
    assert parse_bool(text) is value


def test_boolean_rejects_other_text():
    with pytest.raises(ValueError, match="not a boolean"):
        parse_bool("yes")


def _rewrite_csv(path, change):
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    header = list(rows[0])
    header, rows = change(header, rows)
    with path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=header)
        w.writeheader()
        w.writerows(rows)


def test_boolean_variants_in_file_and_empty_float(demo_copy):
    def change(header, rows):
        rows[0]["has_oil"], rows[1]["has_oil"], rows[2]["has_oil"] = "true", "0", "False"
        rows[3]["mean_punch_temp"] = ""
        return header, rows

    _rewrite_csv(demo_copy / "process_parameters.csv", change)
    index = guideloom.load(data_dir=demo_copy).index()
    assert [index.row(i)["has_oil"] for i in range(3)] == [True, False, False]
    assert math.isnan(index.row(3)["mean_punch_temp"])


def test_missing_id_column_is_a_clear_error(demo_copy):
    def change(header, rows):
        header = [h for h in header if h != "index"]
        return header, [{k: v for k, v in r.items() if k != "index"} for r in rows]

    _rewrite_csv(demo_copy / "process_parameters.csv", change)
    with pytest.raises(ManifestError, match="id column 'index' is missing"):
        guideloom.load(data_dir=demo_copy).index()


def test_bad_cell_names_line_and_column(demo_copy):
    def change(header, rows):
        rows[4]["blankholder_force"] = "lots"
        return header, rows

    _rewrite_csv(demo_copy / "process_parameters.csv", change)
    with pytest.raises(ManifestError, match=r"parameters.csv:6: column 'blankholder_force'"):
        guideloom.load(data_dir=demo_copy).index()


def test_repeated_ids_are_named(tmp_path):
    from guideloom.select.index import read_index

    table = tmp_path / "index.csv"
    table.write_text("index,split\n3,train\n4,val\n3,test\n7,val\n4,train\n")
    with pytest.raises(ManifestError, match=r"index\.csv: ids repeated in column 'index': "
                                            r"3, 4$"):
        read_index(table, "index", {"index": "sc:Integer", "split": "sc:Text"})
