"""to_jsonld() validated by mlcroissant; guideloom.load reads its own and rddac 2.0's encoding."""

from __future__ import annotations

import copy
import hashlib
import json
import logging
from pathlib import Path

import numpy as np
import pytest

import guideloom
from guideloom.croissant import timesteps_from_json_path, timesteps_to_json_path
from guideloom.errors import ManifestError
from guideloom.streaming import iter_view
from tests.conftest import REFERENCE_MANIFEST

mlc = pytest.importorskip("mlcroissant", reason="mlcroissant (test extra) is not installed")
pytestmark = pytest.mark.filterwarnings("ignore:ConjunctiveGraph is deprecated:DeprecationWarning")

RDDAC_ADDED = Path(__file__).parent / "fixtures" / "rddac2_added_views.json"

VIEWS = {
    "pure": {"force": "force_data", "sheet": "sheet_thickness_data"},
    "mixed": {"force": "force_data", "geometry": "process-parameters/geometry",
              "blankholder_force": "process-parameters/blankholder_force",
              "has_oil": "process-parameters/has_oil"},
    "sliced": {"head": ("force_data", [0, 1, 2]), "one_step": ("force_data", 5),
               "single": ("force_data", [4]), "last": ("force_data", -1)},
    "sliced-mixed": {"tail": ("force_data", [-2, -1]), "split": "process-parameters/split"},
    "columns-only": {"geometry": "process-parameters/geometry",
                     "split": "process-parameters/split"},
}


def validate(doc, data_dir=None):
    """Validate with mlcroissant; return its warnings (errors raise ValidationError).

    mlcroissant requires md5 or sha256 on every FileObject; with ``data_dir`` the real md5 of a
    file that lacks one is filled in first, as a publication would have it (the demo manifest
    carries them already).
    """
    logging.getLogger("absl").setLevel(logging.ERROR)
    doc = copy.deepcopy(doc)
    if data_dir is not None:
        doc["@context"].setdefault("md5", "cr:md5")  # the demo's context lacks the term too
    for item in doc.get("distribution", []) if data_dir is not None else []:
        if item.get("@type") == "cr:FileObject" and not {"md5", "sha256"} & set(item):
            item["md5"] = hashlib.md5((Path(data_dir) / item["name"]).read_bytes()).hexdigest()
    dataset = mlc.Dataset(jsonld=doc)
    return sorted(dataset.metadata.ctx.issues.warnings)


DEMO_WARNINGS: list[str] = []  # the demo manifest has citeAs, datePublished and checksums


def demo_validate(doc, data_dir):
    warnings = validate(doc, data_dir)
    assert [w.split("] ", 1)[-1] for w in warnings] == DEMO_WARNINGS, warnings


def with_views(ds):
    for name, fields in VIEWS.items():
        guideloom.add_view(ds, name, fields=fields)
    return ds


def records(ds, view):
    out = []
    for rec in iter_view(view, dataset=ds):
        out.append({k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in rec.items()})
    return out


def test_old_encoding_was_rejected_and_new_one_validates(demo_zip):
    ds = with_views(guideloom.load(data_dir=demo_zip))
    doc = ds.to_jsonld()
    demo_validate(doc, demo_zip)
    for name in VIEWS:  # each view kind alone validates too
        alone = with_views(guideloom.load(data_dir=demo_zip)).to_jsonld()
        alone["recordSet"] = [rs for rs in alone["recordSet"]
                              if rs["name"] not in set(VIEWS) - {name}]
        demo_validate(alone, demo_zip)
    # The previous encoding is what mlcroissant refused (the issue's two errors).
    legacy = copy.deepcopy(doc)
    sliced = next(rs for rs in legacy["recordSet"] if rs["name"] == "sliced")
    sliced["field"][0]["source"]["transform"] = [{"timesteps": [0, 1, 2]}]
    with pytest.raises(mlc.ValidationError, match="At least one transform must be defined"):
        validate(legacy, demo_zip)
    unjoined = copy.deepcopy(doc)
    for field in next(rs for rs in unjoined["recordSet"] if rs["name"] == "mixed")["field"]:
        field.pop("references", None)
    with pytest.raises(mlc.ValidationError, match="didn't declare a join"):
        validate(unjoined, demo_zip)


def test_encoding_declares_join_and_json_path(demo_zip):
    doc = with_views(guideloom.load(data_dir=demo_zip)).to_jsonld()
    by_name = {rs["name"]: rs for rs in doc["recordSet"]}
    mixed = by_name["mixed"]["field"]
    assert mixed[0]["references"] == {"field": {"@id": "process-parameters/index"}}
    assert all("references" not in f for f in mixed[1:])
    assert all("references" not in f for f in by_name["pure"]["field"])
    assert all("references" not in f for f in by_name["columns-only"]["field"])
    sliced = {f["name"]: f["source"].get("transform") for f in by_name["sliced"]["field"]}
    assert sliced == {"head": [{"jsonPath": "$[0,1,2]"}], "one_step": [{"jsonPath": "$[5]"}],
                      "single": [{"jsonPath": "$[4:5]"}], "last": [{"jsonPath": "$[-1]"}]}


def test_round_trip_gives_the_same_records(demo_zip):
    ds = with_views(guideloom.load(data_dir=demo_zip))
    doc = json.loads(json.dumps(ds.to_jsonld()))
    again = guideloom.load(data_dir=demo_zip, source=doc)
    for name in VIEWS:
        assert again.view(name).fields == ds.view(name).fields, name
        first = records(ds, name)
        assert len(first) == 36
        assert records(again, name) == first, name
    demo_validate(again.to_jsonld(), demo_zip)
    assert again.to_jsonld()["recordSet"] == doc["recordSet"]  # stable: views stay record sets


def test_reads_rddac2_encoding_with_the_same_records(demo_zip):
    """rddac 2.0's serialisation of three added views (tests/fixtures, generated by rddac)."""
    rddac = json.loads(RDDAC_ADDED.read_text())["recordSet"]
    manifest = json.loads((demo_zip / "metadata.json").read_text())
    manifest["recordSet"].extend(copy.deepcopy(rddac))
    manifest["@context"]["jsonPath"] = "cr:jsonPath"  # rddac's manifest declares it, the demo not
    demo_validate(manifest, demo_zip)
    theirs = guideloom.load(data_dir=demo_zip, source=manifest)
    ours = guideloom.load(data_dir=demo_zip)
    guideloom.add_view(ours, "pure", fields={
        "force": "force_data", "sheet": "sheet_thickness_data"})
    guideloom.add_view(ours, "mixed", fields={
        "force": "force_data", "geometry": "process-parameters/geometry",
        "blankholder_force": "process-parameters/blankholder_force"})
    guideloom.add_view(ours, "sliced", fields={
        "first_rows": ("force_data", [0, 1, 2]), "row_five": ("force_data", 5),
        "split": "process-parameters/split"})
    for name in ("pure", "mixed", "sliced"):
        assert records(theirs, f"rddac-{name}") == records(ours, name), name
    # and we write what rddac writes (record-set ids and names aside)
    written = {rs["name"]: rs for rs in ours.to_jsonld()["recordSet"]}
    for theirs_rs in rddac:
        mine = written[theirs_rs["name"].removeprefix("rddac-")]
        for a, b in zip(mine["field"], theirs_rs["field"], strict=True):
            transform = b["source"].get("transform")
            if isinstance(transform, dict):  # mlcroissant's to_json unwraps one-item lists
                b = {**b, "source": {**b["source"], "transform": [transform]}}
            assert {k: v for k, v in a.items() if k != "@id"} == \
                {k: v for k, v in b.items() if k != "@id"}


@pytest.mark.skipif(not REFERENCE_MANIFEST.is_file(),
                    reason="the published RDDAC manifest is not in /work/shared/reference")
def test_published_manifest_with_added_views_validates(tmp_path):
    manifest = json.loads(REFERENCE_MANIFEST.read_text())
    assert validate(manifest) == []
    ds = guideloom.load(data_dir=tmp_path, source=REFERENCE_MANIFEST)
    for name, fields in VIEWS.items():
        guideloom.add_view(ds, name, fields=fields)
    doc = ds.to_jsonld()
    assert validate(doc) == []
    again = guideloom.load(data_dir=tmp_path, source=doc)
    assert {n: again.view(n).fields for n in VIEWS} == {n: ds.view(n).fields for n in VIEWS}
    rddac = json.loads(RDDAC_ADDED.read_text())["recordSet"]
    with_rddac = json.loads(REFERENCE_MANIFEST.read_text())
    with_rddac["recordSet"].extend(rddac)
    parsed = guideloom.load(data_dir=tmp_path, source=with_rddac)
    sliced = {f.alias: f.timesteps for f in parsed.view("rddac-sliced").fields}
    assert sliced == {"first_rows": (0, 1, 2), "row_five": 5, "split": None}


@pytest.mark.parametrize("steps", [None, 0, 7, -1, (3,), (-1,), (-4,), (0, 2, 4), (9, 1), (-2, -1)])
def test_json_path_round_trip(steps):
    expression = timesteps_to_json_path(steps)
    assert (None if expression is None else timesteps_from_json_path(expression)) == steps


@pytest.mark.parametrize("expression", ["$.force", "$[a]", "$[]", "$[3:]", "$[2:-1]", "$[1,]"])
def test_unsupported_json_path_is_refused(expression):
    with pytest.raises(ManifestError, match="unsupported jsonPath"):
        timesteps_from_json_path(expression)


def test_demo_manifest_is_valid_croissant_with_checksums(demo_zip):
    import json

    doc = json.loads((demo_zip / "metadata.json").read_text())
    logging.getLogger("absl").setLevel(logging.ERROR)
    issues = mlc.Dataset(jsonld=copy.deepcopy(doc)).metadata.ctx.issues
    assert not issues.errors, (issues.errors, issues.warnings)
    assert not issues.warnings, (issues.errors, issues.warnings)
    for entry in doc["distribution"]:
        if entry["@type"] == "cr:FileObject":
            data = (demo_zip / entry["contentUrl"]).read_bytes()
            assert entry["md5"] == hashlib.md5(data, usedforsecurity=False).hexdigest()
            assert entry["contentSize"] == f"{len(data)} B"
