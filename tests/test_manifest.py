"""Manifest parsing, views, add_view and to_jsonld."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

import guideloom
from guideloom.croissant import DatasetSpec
from guideloom.demo import VIEWS
from guideloom.errors import ManifestError
from guideloom.read.files import short_type
from guideloom.workflow.filters import check_value
from tests.conftest import REFERENCE_MANIFEST


def test_demo_manifest_parses_views_field_map_and_index(demo_zip):
    ds = guideloom.load(data_dir=demo_zip)
    assert set(ds.views) == set(VIEWS)
    assert ds.id_column == "index"
    assert ds.index_file == "process_parameters.csv"
    assert ds.field_map["force_data"].h5_path == "force/data"
    assert ds.columns["has_oil"].data_type == "sc:Boolean"
    assert ds.archives == ("concave.zip", "convex.zip")
    view = ds.view("pointcloud-op10")
    assert view.aliases == ("pointcloud_op10_z", "pointcloud_op10_luminescence")
    assert [f.h5_path for f in view.fields] == ["pointcloud/op10/z", "pointcloud/op10/luminescence"]


@pytest.mark.skipif(not REFERENCE_MANIFEST.is_file(),
                    reason="shared/reference (published RDDAC manifest) is not beside this repo")
def test_real_published_manifest():
    ds = guideloom.load(data_dir=REFERENCE_MANIFEST.parent, source=REFERENCE_MANIFEST)
    assert set(ds.views) == {"force-curve", "pointcloud-op10", "pointcloud-op20",
                             "sheet-thickness", "oil-thickness", "thickness"}
    assert ds.index_file == "process_parameters.csv"
    assert ds.id_column == "index"
    assert ds.field_map_id == "field-map"
    assert ds.field_map["pointcloud_op20_z"].h5_path == "pointcloud/op20/z"
    assert ds.field_map["oil_thickness_data"].h5_path == "oil_thickness/data"
    assert {c: ds.columns[c].data_type for c in ("index", "mean_punch_temp", "has_oil", "split")} \
        == {"index": "sc:Integer", "mean_punch_temp": "sc:Float", "has_oil": "sc:Boolean",
            "split": "sc:Text"}
    assert set(ds.archives) == {"concave.zip", "convex.zip", "sample.zip"}
    thickness = ds.view("thickness")
    assert [f.h5_path for f in thickness.fields] == ["sheet_thickness/data", "oil_thickness/data"]
    guideloom.add_view(ds, "force-and-geometry", fields={
        "force": "force_data", "geometry": "process-parameters/geometry"})
    doc = ds.to_jsonld()
    assert doc["recordSet"][-1]["name"] == "force-and-geometry"
    assert json.loads(REFERENCE_MANIFEST.read_text()) != doc  # the file itself is untouched


def test_unknown_view_lists_existing_views(demo_zip):
    ds = guideloom.load(data_dir=demo_zip)
    with pytest.raises(ValueError, match="unknown view 'nope'") as info:
        ds.view("nope")
    for name in VIEWS:
        assert name in str(info.value)


def test_add_view_resolves_all_reference_forms_and_keeps_disk_manifest(demo_zip):
    before = (demo_zip / "metadata.json").read_bytes()
    ds = guideloom.load(data_dir=demo_zip)
    out = guideloom.add_view(ds, "force-signals", fields={
        "force": "force_data",
        "force2": "field-map/force_data",
        "geometry": "process-parameters/geometry",
        "first": ("force_data", 0),
        "some": ("force_data", [5, 1, np.int64(3)]),
        "all": ("force_data", None),
    })
    assert out is ds
    view = ds.view("force-signals")
    by_alias = {f.alias: f for f in view.fields}
    assert by_alias["force"].h5_path == by_alias["force2"].h5_path == "force/data"
    assert by_alias["geometry"].column == "geometry"
    assert not by_alias["geometry"].is_h5
    assert by_alias["first"].timesteps == 0
    assert by_alias["some"].timesteps == (5, 1, 3)
    assert by_alias["all"].timesteps is None
    guideloom.add_view(ds, "second", fields={"oil": "oil_thickness_data"})
    assert {"force-signals", "second"} <= set(ds.views)  # repeated calls accumulate
    assert (demo_zip / "metadata.json").read_bytes() == before
    assert "force-signals" not in guideloom.load(data_dir=demo_zip).views


def test_add_view_rejects_bad_references(demo_zip):
    ds = guideloom.load(data_dir=demo_zip)
    with pytest.raises(ValueError, match=r"'bad'.*'no_such_field'"):
        guideloom.add_view(ds, "v", fields={"bad": "no_such_field"})
    with pytest.raises(ValueError, match="process-parameters/no_column"):
        guideloom.add_view(ds, "v", fields={"c": "process-parameters/no_column"})
    with pytest.raises(ValueError, match="bool"):
        guideloom.add_view(ds, "v", fields={"f": ("force_data", True)})
    with pytest.raises(ValueError, match="not an int"):
        guideloom.add_view(ds, "v", fields={"f": ("force_data", [1, False])})
    with pytest.raises(ValueError, match="HDF5 fields only"):
        guideloom.add_view(ds, "v", fields={"g": ("process-parameters/geometry", 1)})
    with pytest.raises(ValueError, match="published"):
        guideloom.add_view(ds, "force-curve", fields={"f": "force_data"})
    assert "v" not in ds.views


def test_to_jsonld_added_view_has_published_shape_and_round_trips(demo_zip):
    ds = guideloom.load(data_dir=demo_zip)
    guideloom.add_view(ds, "force-signals", fields={
        "force": "force_data", "split": "process-parameters/split", "head": ("force_data", [0, 1])})
    doc = ds.to_jsonld()
    published = next(rs for rs in doc["recordSet"] if rs["name"] == "force-curve")
    added = next(rs for rs in doc["recordSet"] if rs["name"] == "force-signals")
    assert set(added) == set(published) - {"description"}
    # the view mixes HDF5 fields and index columns: its first HDF5 field declares the join
    assert set(added["field"][0]) - {"references"} == set(published["field"][0])
    assert added["field"][0]["references"] == {"field": {"@id": "process-parameters/index"}}
    assert added["field"][0]["source"] == {"field": {"@id": "field-map/force_data"}}
    assert added["field"][1]["source"] == {"field": {"@id": "process-parameters/split"}}
    # the document loads again, with the added view now published
    again = guideloom.load(data_dir=demo_zip, source=json.loads(json.dumps(doc)))
    assert again.view("force-signals").fields == ds.view("force-signals").fields


def test_dataset_spec_overrides_index_file_id_column_and_member_names(demo_loose, tmp_path):
    # same data, renamed: index file, id column and unpadded member names come from the spec
    import shutil

    root = tmp_path / "renamed"
    shutil.copytree(demo_loose, root)
    manifest = json.loads((root / "metadata.json").read_text())
    manifest["distribution"][0]["name"] = "runs.csv"
    del manifest["recordSet"][0]["key"]
    (root / "process_parameters.csv").rename(root / "runs.csv")
    for f in (root / "h5").iterdir():
        f.rename(f.with_name(f"{int(f.stem)}.h5"))  # 0042.h5 -> 42.h5
    with pytest.raises(ManifestError, match="has no key"):
        guideloom.load(data_dir=root, source=manifest)
    spec = DatasetSpec(index_file="runs.csv", id_column="index")
    ds = guideloom.load(data_dir=root, source=manifest, spec=spec)
    rec = next(guideloom.streaming.iter_view("force-curve", dataset=ds, sim_ids=[7]))
    assert rec["_sim_id"] == 7
    with guideloom.open_h5(7, data_dir=demo_loose) as f:
        np.testing.assert_array_equal(rec["force_data"], f["force/data"][()])


def test_bad_manifest_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="manifest not found"):
        guideloom.load(data_dir=tmp_path)
    (tmp_path / "metadata.json").write_text("{not json")
    with pytest.raises(ManifestError, match="not valid JSON"):
        guideloom.load(data_dir=tmp_path)
    (tmp_path / "metadata.json").write_text(json.dumps({"recordSet": []}))
    with pytest.raises(ManifestError, match="no recordSet"):
        guideloom.load(data_dir=tmp_path)



SCHEMA_ORG_SPELLINGS = ["sc:", "https://schema.org/", "http://schema.org/"]


@pytest.mark.parametrize("prefix", SCHEMA_ORG_SPELLINGS)
def test_every_schema_org_spelling_types_ids_and_columns(demo_copy, prefix):
    manifest = demo_copy / "metadata.json"
    text = manifest.read_text()
    spelled = re.sub(r'"sc:(Integer|Float|Boolean|Text)"', rf'"{prefix}\1"', text)
    assert spelled.count(f'"{prefix}Integer"') == text.count('"sc:Integer"') > 0
    manifest.write_text(spelled)
    ds = guideloom.load(data_dir=demo_copy)
    assert ds.id_column_type == f"{prefix}Integer"
    guideloom.add_view(ds, "params", fields={
        "force": "force_data",
        "bhf": "process-parameters/blankholder_force",
        "oil": "process-parameters/has_oil",
        "temp": "process-parameters/mean_punch_temp",
    })
    records = list(guideloom.iter_view("params", dataset=ds, data_dir=demo_copy,
                                       where=lambda row: row["blankholder_force"] >= 300))
    csv_rows = (demo_copy / "process_parameters.csv").read_text().splitlines()
    header = csv_rows[0].split(",")
    wanted = [int(r.split(",")[header.index("index")]) for r in csv_rows[1:]
              if int(r.split(",")[header.index("blankholder_force")]) >= 300]
    assert [r["_sim_id"] for r in records] == wanted
    assert len(wanted) == 24
    assert all(type(r["_sim_id"]) is int and type(r["bhf"]) is int for r in records)
    assert all(type(r["oil"]) is bool and type(r["temp"]) is float for r in records)


@pytest.mark.parametrize("prefix", SCHEMA_ORG_SPELLINGS)
def test_one_helper_shortens_schema_org_types(prefix):
    assert short_type(f"{prefix}Integer") == "sc:Integer"
    assert short_type(f" {prefix}Boolean ") == "sc:Boolean"
    assert short_type(None) == "sc:Text"
    assert short_type("cr:Float") == "cr:Float"  # not schema.org: left as it is
    assert check_value(3, f"{prefix}Integer") is None
    assert check_value("3", f"{prefix}Integer") == "an integer"
