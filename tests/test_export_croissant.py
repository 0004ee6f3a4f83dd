"""describe_export: a Croissant 1.1 description of a real export that mlcroissant validates."""

from __future__ import annotations

import copy
import hashlib
import json
import logging

import numpy as np
import pytest

import guideloom
from guideloom.export.publish import CROISSANT_NAME, describe_export

mlc = pytest.importorskip("mlcroissant", reason="mlcroissant (test extra) is not installed")
pytestmark = pytest.mark.filterwarnings("ignore:ConjunctiveGraph is deprecated:DeprecationWarning")


def crop_force(force):
    """Keep the first 1000 rows (the demo's force curves vary in length)."""
    return np.asarray(force)[:1000]


@pytest.fixture(scope="module")
def export(demo_zip, tmp_path_factory):
    ds = guideloom.load(data_dir=demo_zip)
    guideloom.add_view(ds, "force-export", fields={
        "force": "force_data", "head": ("force_data", [0, 1, 2]), "step": ("force_data", 4),
        "blankholder_force": "process-parameters/blankholder_force",
        "has_oil": "process-parameters/has_oil"})
    out = tmp_path_factory.mktemp("export") / "force-export"
    paths = guideloom.export_to_numpy("force-export", out, dataset=ds, client="sync",
                                      transforms={"force": crop_force},
                                      where=lambda row: row["split"] != "test")
    manifest = json.loads((out / "export.json").read_text())
    return ds, out, paths, manifest


def validate(doc):
    logging.getLogger("absl").setLevel(logging.ERROR)
    return sorted(mlc.Dataset(jsonld=copy.deepcopy(doc)).metadata.ctx.issues.warnings)


def test_description_validates_and_matches_the_files(export):
    ds, _out, paths, manifest = export
    doc = describe_export(manifest, paths, source=ds.to_jsonld())
    assert validate(doc) == []
    json.dumps(doc)  # plain JSON, ready for croissant.json
    assert CROISSANT_NAME == "croissant.json"
    files = {d["name"]: d for d in doc["distribution"]}
    assert set(files) == {f"{a}.npy" for a in paths}
    for path in paths.values():
        entry = files[path.name]
        assert entry["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert entry["contentSize"] == f"{path.stat().st_size} B"
    sets = {rs["name"]: rs for rs in doc["recordSet"]}
    assert set(sets) == {"sim_ids", *manifest["fields"]}
    sim_ids = np.load(paths["sim_ids"])
    assert manifest["count"] == len(sim_ids) > 0
    for alias in manifest["fields"]:
        array = np.load(paths[alias])
        sim_field, value = sets[alias]["field"]
        assert sim_field["source"] == {"field": {"@id": "sim_ids/sim_id"}}
        assert value["references"] == {"field": {"@id": "sim_ids/sim_id"}}
        if array.ndim > 1:
            assert value["isArray"] is True
            assert value["arrayShape"] == ",".join(map(str, array.shape[1:]))
        else:
            assert "isArray" not in value
        expected_type = {"f": "sc:Float", "i": "sc:Integer", "b": "sc:Boolean"}[array.dtype.kind]
        assert value["dataType"] == expected_type, alias
        assert array.dtype.str in value["description"]
    assert "$[0,1,2]" in sets["head"]["field"][1]["description"]
    assert "$[4]" in sets["step"]["field"][1]["description"]
    assert "test_export_croissant:crop_force" in sets["force"]["field"][1]["description"]
    properties = {p["name"]: p["value"] for p in doc["additionalProperty"]}
    assert properties["view"] == "force-export"
    assert "crop_force" in properties["transforms"]
    assert doc["license"] == ds.manifest["license"]


def test_description_without_source_and_written_beside_the_export(export):
    _, out, paths, manifest = export
    doc = describe_export(manifest, {k: str(v) for k, v in paths.items()})
    warnings = validate(doc)
    assert [w.split("] ", 1)[-1] for w in warnings] == [
        'Property "https://schema.org/license" is recommended, but does not exist.']
    target = out.parent / f"{out.name}-{CROISSANT_NAME}"
    target.write_text(json.dumps(doc, indent=1))
    assert validate(json.loads(target.read_text())) == warnings


def test_refuses_what_is_not_an_export(export):
    _, _, paths, manifest = export
    with pytest.raises(ValueError, match="not a guideloom export"):
        describe_export({"format": "other"}, paths)
    with pytest.raises(ValueError, match="no file given for field"):
        describe_export(manifest, {"sim_ids": paths["sim_ids"]})


def _storage_target(tmp_path):
    fmt = guideloom.StreamNumpyFormat(np.dtype([("force", "<f4"), ("doc", "<u4")]))
    return guideloom.StreamStorage(tmp_path / "stream", fmt)


@pytest.mark.parametrize("kind", ["npy", "npz", "zarr", "storage"])
def test_every_published_export_carries_a_valid_description(kind, demo_zip, tmp_path):
    from guideloom.workflows.demo_transforms import total_force_stream

    common = {"data_dir": demo_zip, "sim_ids": [0, 4, 9], "client": "sync"}
    if kind == "npy":
        out = tmp_path / "e"
        guideloom.export_to_numpy("force-curve", out, transforms={"force_data": crop_force},
                                  **common)
    elif kind == "npz":
        out = guideloom.export_to_numpy_per_sim("force-curve", tmp_path / "e", **common)
    elif kind == "zarr":
        out = tmp_path / "e.zarr"
        guideloom.export_to_zarr("force-curve", out, transforms={"force_data": crop_force},
                                 **common)
    else:
        out = guideloom.export_to_storage("force-curve", _storage_target(tmp_path),
                                          record_transform=total_force_stream, **common)
    doc = json.loads((out / CROISSANT_NAME).read_text())
    assert validate(doc) == []
    manifest = json.loads((out / "export.json").read_text())
    assert {rs["name"] for rs in doc["recordSet"]} == {"sim_ids", *manifest["fields"]}
    assert str(manifest["count"]) in doc["recordSet"][0]["description"]
    hashed = [d for d in doc["distribution"] if "sha256" in d]
    assert any(d["name"] == "sim_ids.npy" for d in hashed) or kind == "zarr"
    for entry in hashed:
        assert entry["sha256"] == hashlib.sha256((out / entry["name"]).read_bytes()).hexdigest()


def test_files_over_the_hash_limit_are_described_without_a_second_read(export):
    ds, _out, paths, manifest = export
    doc = describe_export(manifest, paths, source=ds.to_jsonld(), hash_limit=0)
    assert validate(doc) == []
    assert not any("sha256" in d for d in doc["distribution"])
    assert {d["includes"] for d in doc["distribution"]} == {p.name for p in paths.values()}
