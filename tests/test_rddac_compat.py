"""Code written for rddac 2.0 / ddacs 3.2 runs on guideloom: load, the mlcroissant face of the
dataset, the croissant and h5_tools helpers, the dataset spec and the PyTorch dataset names."""

from __future__ import annotations

import dataclasses
import importlib
import json
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

import guideloom
from guideloom.croissant import (
    DatasetSpec,
    dataset_name,
    field_map,
    process_parameters_descriptions,
)
from tests.conftest import REFERENCE_MANIFEST

needs_reference = pytest.mark.skipif(not REFERENCE_MANIFEST.is_file(),
                                     reason="shared/reference (published manifest) is absent")


# --- item 2: load's argument orders and the mlcroissant face --------------------------------

def test_load_takes_rddacs_positional_order(demo_zip, tmp_path):
    manifest = demo_zip / "metadata.json"
    for ds in (guideloom.load(str(manifest)), guideloom.load(manifest),
               guideloom.load(manifest, demo_zip), guideloom.load(demo_zip, manifest),
               guideloom.load(source=manifest, data_dir=demo_zip), guideloom.load(demo_zip)):
        assert ds.data_dir == demo_zip
        assert ds.manifest_path == manifest
        assert "force-curve" in ds.views
    odd = tmp_path / "data.json"  # a data directory whose name ends in .json stays one
    shutil.copytree(demo_zip, odd)
    assert guideloom.load(odd).data_dir == odd
    from_dict = guideloom.load(json.loads(manifest.read_text()), demo_zip)
    assert from_dict.manifest_path is None
    assert from_dict.data_dir == demo_zip
    rec = next(guideloom.streaming.iter_view("force-curve", dataset=guideloom.load(str(manifest))))
    assert rec["_sim_id"] == 0


def test_load_does_not_import_mlcroissant_until_asked(demo_zip, tmp_path):
    code = (
        "import sys, guideloom\n"
        f"ds = guideloom.load({str(demo_zip)!r})\n"
        "next(guideloom.streaming.iter_view('force-curve', dataset=ds))\n"
        "print('mlcroissant' in sys.modules, 'matplotlib' in sys.modules)\n"
        "ds.metadata\n"
        "print('mlcroissant' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["False", "False", "True"]


def test_dataset_answers_what_mlcroissant_code_uses(demo_zip):
    mlc = pytest.importorskip("mlcroissant")
    ds = guideloom.load(data_dir=demo_zip)
    theirs = mlc.Dataset(jsonld=str(demo_zip / "metadata.json"))
    assert [rs.id for rs in ds.metadata.record_sets] == [
        rs.id for rs in theirs.metadata.record_sets]
    assert ds.metadata.name == theirs.metadata.name == dataset_name(ds)
    file_objects = {n.uuid: n.name for n in theirs.metadata.distribution
                    if isinstance(n, mlc.FileObject)}
    assert set(ds.mapping) == set(file_objects)  # the CSV and both zips are local
    assert all(Path(p).name == file_objects[k] and Path(p).is_file()
               for k, p in ds.mapping.items())
    rows = list(ds.records("process-parameters"))
    assert [int(r["process-parameters/index"]) for r in rows] == ds.index().ids
    assert rows[4]["process-parameters/geometry"].decode() == ds.index().row(4)["geometry"]


def test_added_views_show_in_the_mlcroissant_face(demo_zip):
    pytest.importorskip("mlcroissant")
    ds = guideloom.load(data_dir=demo_zip)
    before = {rs.id for rs in ds.metadata.record_sets}
    guideloom.add_view(ds, "mixed", fields={"one": ("force_data", 2),
                                            "subset": ("force_data", [2, 3]),
                                            "geometry": "process-parameters/geometry"})
    guideloom.add_view(ds, "second", fields={"b": "sheet_thickness_data"})
    after = {rs.id: rs for rs in ds.metadata.record_sets}
    assert set(after) == before | {"mixed", "second"}
    fields = {f.name: f for f in after["mixed"].fields}
    assert fields["one"].source.transforms[0].json_path == "$[2]"
    assert fields["subset"].source.transforms[0].json_path == "$[2,3]"
    assert fields["geometry"].source.uuid == "process-parameters/geometry"
    again = pickle.loads(pickle.dumps(ds))  # the built mlcroissant object does not travel
    assert again._mlc is None
    assert "mixed" in {rs.id for rs in again.metadata.record_sets}


# --- item 3: croissant helpers, h5_tools, spec, names ---------------------------------------

def test_field_map_helper_gives_mlcroissant_fields(demo_zip):
    pytest.importorskip("mlcroissant")
    ds = guideloom.load(data_dir=demo_zip)
    fm = field_map(ds)
    assert set(fm) == set(ds.field_map)
    assert fm["force_data"].source.transforms[0].regex == "force/data"
    assert fm["pointcloud_op10_z"].source.transforms[0].regex == "pointcloud/op10/z"


@needs_reference
def test_process_parameters_descriptions_come_from_the_manifest(tmp_path):
    doc = json.loads(REFERENCE_MANIFEST.read_text())
    index_rs = next(rs for rs in doc["recordSet"] if rs["@id"] == "process-parameters")
    want = {f["name"]: f.get("description", "") for f in index_rs["field"]}
    ds = guideloom.load(data_dir=tmp_path, source=REFERENCE_MANIFEST)
    got = process_parameters_descriptions(ds)
    assert got == want
    assert len(got) == 10
    assert all(got.values())
    assert dataset_name(ds) == doc["name"]
    mlc = pytest.importorskip("mlcroissant")
    assert process_parameters_descriptions(mlc.Dataset(jsonld=str(REFERENCE_MANIFEST))) == want


def test_inspect_h5_prints_a_tree_with_shapes_and_dtypes(demo_zip, tmp_path, capsys):
    index = guideloom.load(demo_zip).index()
    sim_id = next(i for i in index.ids if index.row(i)["has_pointcloud"])
    archive = index.row(sim_id)["geometry"] + ".zip"
    with guideloom.open_h5(sim_id, data_dir=demo_zip) as f:
        n_force = f["force/data"].shape[0]
        scan = f["pointcloud/op10/z"].shape
        guideloom.h5_tools.inspect_h5(f)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"{archive}::{sim_id:04d}.h5"
    assert f"├── @index = {sim_id}" in out
    assert "├── force/" in out
    assert f"│   └── data  ({n_force}, 8) float32" in out
    assert any(line.endswith(f"z  {scan} float32") for line in out)
    assert out[-2:] == ["└── sheet_thickness/", out[-1]]
    assert out[-1].startswith("    └── data")
    # a path on disk
    loose = tmp_path / "0007.h5"
    with guideloom.open_h5(sim_id, data_dir=demo_zip) as f, h5py.File(loose, "w") as g:
        f.copy(f["force"], g, "force")
        g.attrs["index"] = 7
        g["scalar"] = 1.5
    guideloom.inspect_h5(loose)
    out = capsys.readouterr().out.splitlines()
    assert out == ["0007.h5", "├── @index = 7", "├── force/",
                   *[line for line in out if "@columns" in line or "@units" in line],
                   f"│   └── data  ({n_force}, 8) float32", "└── scalar  scalar float64"]


def test_open_h5_unknown_id_is_file_not_found_and_rddac_order_works(demo_zip):
    with pytest.raises(FileNotFoundError, match=r"experiment 999 has no HDF5 file") as info:
        guideloom.open_h5(999, data_dir=demo_zip)
    assert isinstance(info.value, KeyError)
    assert str(demo_zip) in str(info.value)
    manifest = demo_zip / "metadata.json"
    with guideloom.open_h5(3, str(manifest), str(demo_zip)) as f:  # rddac: (id, source, dir)
        assert int(f.attrs["index"]) == 3
        assert f.mode == "r"
    with guideloom.h5_tools.open_h5(3, dataset=guideloom.load(manifest)) as f:
        assert int(f.attrs["index"]) == 3


RDDAC_SPEC_FIELDS = ["name", "prog", "dataset_doi", "default_version", "darus_base_url",
                     "process_parameters_file", "metadata_file", "id_column", "id_format",
                     "small_test_files", "default_data_dir", "field_map_record_set",
                     "default_field_data_type"]


def test_dataset_spec_has_rddacs_fields_in_order():
    names = [f.name for f in dataclasses.fields(DatasetSpec)]
    assert names[:len(RDDAC_SPEC_FIELDS)] == RDDAC_SPEC_FIELDS
    spec = guideloom.RDDAC_SPEC
    assert (spec.name, spec.prog, spec.dataset_doi, spec.default_version) == (
        "RDDAC", "rddac", "doi:10.18419/DARUS-5589", "2.0")
    assert spec.id_format.format(42) == "0042"
    assert spec.id_column == "index"
    assert spec.small_test_files == ("process_parameters.csv", "metadata.json", "sample.zip")
    assert (spec.process_parameters_file, spec.metadata_file, spec.field_map_record_set) == (
        "process_parameters.csv", "metadata.json", "field-map")
    assert guideloom.DDACS_SPEC.dataset_doi == "doi:10.18419/DARUS-4801"
    positional = DatasetSpec("X", "x", "doi:1", "1.0")  # rddac constructs it this way too
    assert positional.prog == "x"
    assert positional.id_column is None


def test_spec_keyword_names_the_manifest_file(demo_zip, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(demo_zip, data)
    (data / "metadata.json").rename(data / "croissant.json")
    spec = DatasetSpec(name="demo", metadata_file="croissant.json")
    with pytest.raises(FileNotFoundError, match=r"metadata.json"):
        guideloom.load(data_dir=data)
    assert guideloom.load(data_dir=data, spec=spec).manifest_path == data / "croissant.json"
    rec = next(guideloom.streaming.iter_view("force-curve", data_dir=data, spec=spec))
    with guideloom.open_h5(rec["_sim_id"], data_dir=data, spec=spec) as f:
        np.testing.assert_array_equal(f["force/data"][()], rec["force_data"])
    out = guideloom.export_to_numpy("force-curve", tmp_path / "o", data_dir=data, spec=spec,
                                    sim_ids=[1, 2], client="sync",
                                    record_transform=lambda r: {"n": len(r["force_data"])})
    assert np.load(out["sim_ids"]).tolist() == [1, 2]
    ds = guideloom.load(data_dir=demo_zip, spec=guideloom.RDDAC_SPEC)
    assert ds.index_file == "process_parameters.csv"
    assert ds.field_map_id == "field-map"


# the names rddac 2.0 / ddacs 3.2 expose, by module (torch-only names checked separately)
EXPOSED = {
    "guideloom": ["load", "add_view", "open_h5", "inspect_h5", "streaming", "RDDAC_SPEC",
                  "DDACS_SPEC", "DatasetSpec", "MissingDataWarning", "plot_scan",
                  "plot_point_cloud", "plot_force", "plot_traverse", "scan_to_pointcloud"],
    "guideloom.streaming": ["iter_view", "export_to_numpy", "export_to_numpy_per_sim",
                            "load_export", "MissingDataWarning", "DEFAULT_DATA_DIR"],
    "guideloom.croissant": ["load", "add_view", "field_map", "process_parameters_descriptions",
                            "dataset_name", "resolve_source", "FieldSpec", "TimestepSpec",
                            "DEFAULT_DATA_DIR", "DatasetSpec", "RDDAC_SPEC"],
    "guideloom.h5_tools": ["open_h5", "inspect_h5", "DEFAULT_DATA_DIR"],
    "guideloom.spec": ["DatasetSpec", "RDDAC_SPEC", "DDACS_SPEC"],
    "guideloom.pytorch": ["RDDACDataset", "DDACSDataset", "DEFAULT_DATA_DIR"],
    "guideloom.visualization": ["plot_scan", "plot_point_cloud", "plot_force", "plot_traverse",
                                "scan_to_pointcloud", "FORCE_COLUMNS", "SCAN_X_SHAPE",
                                "SCAN_Y_SHAPE"],
}


@pytest.mark.parametrize("module", sorted(EXPOSED))
def test_rddac_names_are_importable(module):
    if module == "guideloom.pytorch":
        pytest.importorskip("torch")
    mod = importlib.import_module(module)
    missing = [n for n in EXPOSED[module] if not hasattr(mod, n)]
    assert missing == []
    assert guideloom.streaming.MissingDataWarning is guideloom.MissingDataWarning
    assert importlib.import_module("guideloom.spec").DatasetSpec is DatasetSpec


def test_star_import_works_without_touching_torch(tmp_path):
    code = ("import sys\nfrom guideloom import *\n"
            "print(callable(plot_scan), callable(inspect_h5), 'torch' in sys.modules, "
            "'matplotlib' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                         text=True, check=True).stdout.split()
    assert out == ["True", "True", "False", "False"]


def test_rddac_dataset_yields_records_without_sim_id(demo_zip):
    torch = pytest.importorskip("torch")
    from guideloom.pytorch import DDACSDataset, RDDACDataset

    assert guideloom.RDDACDataset is RDDACDataset
    ds = RDDACDataset("force-curve", None, str(demo_zip), sim_ids=[9, 2, 5])  # rddac positions
    records = list(ds)
    assert [set(r) for r in records] == [{"force_data"}] * 3
    with guideloom.open_h5(2, data_dir=demo_zip) as f:
        np.testing.assert_array_equal(records[0]["force_data"], f["force/data"][()])
    loader = torch.utils.data.DataLoader(
        DDACSDataset("force-curve", data_dir=demo_zip, shuffle=True, seed=3,
                     spec=guideloom.RDDAC_SPEC),
        batch_size=None, num_workers=2)
    lengths = sorted(len(r["force_data"]) for r in loader)
    assert len(lengths) == 36
    every = sorted(len(r["force_data"]) for r in guideloom.streaming.iter_view(
        "force-curve", data_dir=demo_zip))
    assert lengths == every
