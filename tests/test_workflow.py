"""Workflow files: schema and semantic validation, filters, references, and the built job."""

from __future__ import annotations

import pickle
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from guideloom.workflows import demo_transforms

import guideloom
from guideloom.export import build_spec, plan_export
from guideloom.read.roots import LocalRoot
from guideloom.workflow import WorkflowError, load_workflow, resolve_reference
from guideloom.workflow.filters import Condition, WhereFilter

# The shipped workflows as the installed package holds them (the checkout's workflows/ folder
# under an editable install; the wheel's copy when tests/test_packaging.py runs these tests).
WORKFLOWS = Path(demo_transforms.__file__).resolve().parent
FORCE_SIGNALS = (WORKFLOWS / "force_signals.toml").read_text()


def write(tmp_path: Path, text: str, name: str = "job.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def edit(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


@pytest.mark.parametrize("name", ["force_signals", "raw_force_tables", "pointcloud_op10",
                                  "force_stream"])
def test_shipped_workflows_load_and_plan(name, demo_zip, tmp_path):
    wf = load_workflow(WORKFLOWS / f"{name}.toml", data_dir=demo_zip, output=tmp_path / "o")
    spec = wf.to_spec()
    plan = plan_export(spec, 2)
    assert spec.target == str(tmp_path / "o")
    assert spec.data_dir == LocalRoot(demo_zip)  # the root travels (issue 40)
    assert len(plan.selection.ids) > 0
    assert not (tmp_path / "o").exists()


def test_paths_are_relative_to_the_workflow_file(demo_zip, tmp_path):
    shutil.copytree(demo_zip, tmp_path / "data")
    text = edit(FORCE_SIGNALS, 'paths_relative_to = "cwd"', "")
    text = edit(text, 'data_dir = "demo-data"', 'data_dir = "data"')
    text = edit(text, 'path = "exports/force-signals"', 'path = "out/fs"')
    wf = load_workflow(write(tmp_path, text))
    assert wf.data_dir == tmp_path / "data"
    assert wf.target == str(tmp_path / "out" / "fs")


def test_shipped_workflow_paths_are_relative_to_the_current_directory(demo_zip, tmp_path,
                                                                      monkeypatch):
    shutil.copytree(demo_zip, tmp_path / "demo-data")
    monkeypatch.chdir(tmp_path)
    wf = load_workflow(WORKFLOWS / "force_signals.toml")
    assert wf.data_dir == tmp_path / "demo-data"
    assert wf.target == str(tmp_path / "exports" / "force-signals")


def test_workflow_spec_equals_api_spec(demo_zip, tmp_path):
    text = edit(FORCE_SIGNALS, "[transforms]", '[filter]\nsim_ids = [5, 0, 12]\n'
                '[filter.where]\nsplit = { ne = "test" }\nhas_oil = true\n\n[transforms]')
    wf = load_workflow(write(tmp_path, text), data_dir=demo_zip, output=tmp_path / "o")
    spec = wf.to_spec()
    ds = guideloom.load(demo_zip)
    guideloom.add_view(ds, "force-signals", fields={
        "force": "force_data", "geometry": "process-parameters/geometry",
        "blankholder_force": "process-parameters/blankholder_force",
        "split": "process-parameters/split"})
    api = build_spec("force-signals", "npy", tmp_path / "o", dataset=ds, data_dir=demo_zip,
                     sim_ids=[5, 0, 12], sim_ids_order="sim_ids",
                     where=lambda r: r["split"] != "test" and r["has_oil"],
                     record_transform=demo_transforms.resample_and_emit, partition_size=4)
    ids = plan_export(spec).selection.ids
    assert ids == plan_export(api).selection.ids
    assert spec.identity(ids, 4) == api.identity(ids, 4)  # the same job, byte for byte
    assert spec.where_description == "split != 'test' and has_oil == True"


def test_where_filter_is_picklable_and_readable():
    f = WhereFilter((Condition("split", "eq", "train"), Condition("blankholder_force", "in",
                                                                  (100, 300)),
                     Condition("mean_punch_temp", "ge", 25.0)))
    g = pickle.loads(pickle.dumps(f))
    assert g == f
    assert g({"split": "train", "blankholder_force": 300, "mean_punch_temp": 25.0})
    assert not g({"split": "train", "blankholder_force": 500, "mean_punch_temp": 26.0})
    assert not g({"split": "val", "blankholder_force": 100, "mean_punch_temp": 26.0})
    assert f.describe() == ("split == 'train' and blankholder_force in [100, 300] and "
                            "mean_punch_temp >= 25.0")


def test_references_resolve_with_importlib():
    assert resolve_reference("guideloom.workflows.demo_transforms:resample_and_emit") is \
        demo_transforms.resample_and_emit
    assert resolve_reference("os.path:join") is __import__("os").path.join
    with pytest.raises(ValueError, match="cannot import module 'no_such_mod'"):
        resolve_reference("no_such_mod:f")


# Each case: (old text, new text, key named in the message, expected words)
INVALID = {
    "unknown top-level key": (
        'name = "force-signals"', 'name = "force-signals"\ncolour = "red"', "colour",
        "unknown key; expected one of dataset, description, filter, name, output, "
        "paths_relative_to, preprocess, python_path, run, transforms, view"),
    "unknown nested key": (
        "partition_size = 4", "partition_size = 4\ncompresion = \"lz4\"",
        "output.compresion", "unknown key; expected one of compression, kind, "
                             "partition_size, path"),
    "wrong type": ("partition_size = 4", 'partition_size = "eight"', "output.partition_size",
                   "expected an integer, got 'eight'"),
    "bad enum": ('kind = "npy"', 'kind = "parquet"', "output.kind",
                 "expected one of 'npy', 'npz', 'zarr', 'storage', got 'parquet'"),
    "missing required": ('kind = "npy"\n', "", "output.kind", "missing (required)"),
    "compression for npy": ("partition_size = 4", 'partition_size = 4\ncompression = "lz4"',
                            "output.compression", "expected one of 'none', got 'lz4'"),
    "bad policy": ('on_error = "raise"', 'on_error = "ignore"', "run.on_error",
                   "expected one of 'raise', 'skip', got 'ignore'"),
    "bad scheduler": ('on_error = "raise"', 'scheduler = "localhost"', "run.scheduler",
                      "expected 'local', 'local:N', 'sync', 'tls://HOST:PORT' or 'tcp://HOST:PORT'"),
    "reference syntax": ('record = "guideloom.workflows.demo_transforms:resample_and_emit"',
                         'record = "resample and emit"', "transforms.record",
                         "expected a 'module:function' reference, got 'resample and emit'"),
    "reference module": ('record = "guideloom.workflows.demo_transforms:resample_and_emit"',
                         'record = "guideloom.workflows.no_such_module:f"', "transforms.record",
                         "cannot import module 'guideloom.workflows.no_such_module'"),
    "reference function": ('record = "guideloom.workflows.demo_transforms:resample_and_emit"',
                           'record = "guideloom.workflows.demo_transforms:no_such_fn"',
                           "transforms.record",
                           "module 'guideloom.workflows.demo_transforms' has no attribute "
                           "'no_such_fn'"),
    "reference not callable": ('record = "guideloom.workflows.demo_transforms:resample_and_emit"',
                               'record = "guideloom.workflows.demo_transforms:N_SAMPLES"',
                               "transforms.record", "is a int, not a callable"),
    "field transform of unknown alias": (
        "[transforms]",
        '[transforms.fields]\npressure = "guideloom.workflows.demo_transforms:zero_to_nan"'
        "\n[transforms]", "transforms.fields.pressure", "view 'force-signals' has no field"),
    "bad field reference": ('force = "force_data"', 'force = "no_such_field"',
                            "view.fields.force", "references 'no_such_field'"),
    "bad timesteps type": ('force = "force_data"',
                           'force = { field = "force_data", timesteps = "all" }',
                           "view.fields.force.timesteps",
                           "expected an integer or a list of integers, got 'all'"),
    "shadowing a published view": ('name = "force-signals"             #',
                                   'name = "force-curve" #', "view.name",
                                   "'force-curve' is a published view"),
    "unknown column in filter": ("[transforms]", '[filter.where]\ncolour = "red"\n[transforms]',
                                 "filter.where.colour", "unknown index column 'colour'"),
    "wrong value type for column": (
        "[transforms]", '[filter.where]\nhas_oil = "yes"\n[transforms]', "filter.where.has_oil",
        "column 'has_oil' is sc:Boolean: expected a boolean (true or false), got 'yes'"),
    "wrong list item type": (
        "[transforms]", '[filter.where]\nblankholder_force = { in = [100, "300"] }\n'
        "[transforms]", "filter.where.blankholder_force.in",
        "column 'blankholder_force' is sc:Integer: expected an integer, got '300'"),
    "ordering on text": ("[transforms]", '[filter.where]\nsplit = { lt = 3 }\n[transforms]',
                         "filter.where.split.lt", "'lt' compares numbers, but column 'split'"),
    "unknown operator": ("[transforms]", '[filter.where]\nsplit = { like = "tr%" }\n'
                         "[transforms]", "filter.where.split.like",
                         "unknown key; expected one of eq, ge, gt, in, le, lt, ne, not_in"),
    "operator value type": ("[transforms]", '[filter.where]\nmean_punch_temp = { gt = "x" }\n'
                            "[transforms]", "filter.where.mean_punch_temp.gt",
                            "expected a number, got 'x'"),
    "where value type": ("[transforms]", "[filter.where]\nsplit = [1]\n[transforms]",
                         "filter.where.split", "expected a value (equality) or a table of "
                         "conditions such as { in = [100, 300] } or { ge = 25.0 }, got a list"),
    "unknown ids": ("[transforms]", "[filter]\nsim_ids = [1, 999]\n[transforms]",
                    "filter.sim_ids", "ids not in the index table process_parameters.csv: "
                    "[999]"),
    "storage without its table": ('kind = "npy"', 'kind = "storage"', "output.storage",
                                  "missing (required for kind 'storage')"),
    "storage table for npy": ("partition_size = 4", 'partition_size = 4\n[output.storage]\n'
                              'class = "StreamStorage"\ndtype = { f = "<f4" }', "output.kind",
                              "expected 'storage' when output.storage is given, got 'npy'"),
    "storage class": ('kind = "npy"', 'kind = "storage"\nstorage = { class = "Tape" }',
                      "output.storage.class",
                      "expected one of 'StreamStorage', 'DocumentStorage', "
                      "'StreamWithMetaStorage', got 'Tape'"),
    "storage dtype": ('kind = "npy"', 'kind = "storage"\nstorage = { class = '
                      '"StreamStorage", dtype = { f = "float99" } }',
                      "output.storage.dtype.f", "expected a numpy dtype such as '<f4', "
                      "got 'float99'"),
    "storage format for its class": (
        'kind = "npy"', 'kind = "storage"\nstorage = { class = "DocumentStorage", '
        'dtype = { f = "<f4" } }', "output.storage.dtype",
        'DocumentStorage needs exactly one of: format = "pickle" or format_factory'),
}


@pytest.mark.parametrize("case", sorted(INVALID))
def test_invalid_files_are_rejected_naming_the_key(case, demo_zip, tmp_path):
    old, new, key, words = INVALID[case]
    path = write(tmp_path, edit(FORCE_SIGNALS, old, new))
    with pytest.raises(WorkflowError) as info:
        load_workflow(path, data_dir=demo_zip, output=tmp_path / "o")
    message = str(info.value)
    assert message.startswith(f"{path}: key {key!r}: "), message
    assert words in message, message
    assert "\n" not in message
    assert info.value.key == key
    assert not (tmp_path / "o").exists()


def test_unknown_published_view(demo_zip, tmp_path):
    text = re.sub(r"\[view\.fields\].*?\n\n", "\n", FORCE_SIGNALS, flags=re.S)
    text = edit(text, 'name = "force-signals"             #', 'name = "no-such-view" #')
    path = write(tmp_path, text)
    with pytest.raises(WorkflowError, match=r"key 'view.name': unknown view 'no-such-view'; "
                                            r"views in .*force-curve"):
        load_workflow(path, data_dir=demo_zip)


def test_toml_syntax_and_missing_data_dir(demo_zip, tmp_path):
    bad = write(tmp_path, "name = \n", "bad.toml")
    with pytest.raises(WorkflowError, match=r"bad.toml: not valid TOML"):
        load_workflow(bad)
    with pytest.raises(WorkflowError, match=r"key 'dataset.data_dir': data directory not found"):
        load_workflow(write(tmp_path, FORCE_SIGNALS))
    with pytest.raises(FileNotFoundError, match="workflow file not found"):
        load_workflow(tmp_path / "nope.toml")


def test_dry_run_imports_no_user_module_and_calls_no_factory(demo_zip, tmp_path):
    (tmp_path / "sideeffects.py").write_text(textwrap.dedent('''
        from pathlib import Path
        Path(__file__).with_name("IMPORTED").touch()


        def transform(rec):
            return rec


        def make_format():
            Path(__file__).with_name("FACTORY_CALLED").touch()
        '''))
    job = tmp_path / "job.toml"
    job.write_text(textwrap.dedent(f'''
        python_path = ["."]
        [dataset]
        data_dir = "{demo_zip}"
        [view]
        name = "force-curve"
        [transforms]
        record = "sideeffects:transform"
        [output]
        kind = "storage"
        path = "out"
        [output.storage]
        class = "StreamStorage"
        format_factory = "sideeffects:make_format"
        '''))
    done = subprocess.run([sys.executable, "-m", "guideloom", "run", str(job), "--dry-run"],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "sideeffects:transform, which a dry run neither imports nor runs" in done.stdout
    assert not (tmp_path / "IMPORTED").exists()
    assert not (tmp_path / "FACTORY_CALLED").exists()
    assert not (tmp_path / "out").exists()


# modules Dask's client imports when it first connects: a python_path folder holding one of them
# would run it in a dry run that asks a tcp:// scheduler for its workers
SHADOWED = ("zict", "tblib", "sortedcontainers", "msgpack", "tornado", "cloudpickle", "toolz",
            "tlz", "locket", "click", "jinja2", "yaml", "distributed", "dask")


@pytest.mark.cluster
@pytest.mark.slow
def test_dry_run_on_a_tcp_scheduler_imports_nothing_from_python_path(demo_zip, tmp_path):
    from guideloom.cluster.local_procs import start_local_cluster

    lib = tmp_path / "lib"
    lib.mkdir()
    for name in (*SHADOWED, "sideeffects"):
        (lib / f"{name}.py").write_text(
            f"from pathlib import Path\nPath(__file__).with_name('IMPORTED-{name}').touch()\n"
            "raise ImportError('a planted module ran')\n")
    procs = start_local_cluster(1, pythonpath=[Path(__file__).resolve().parents[1]],
                                state_dir=tmp_path / "cluster")
    try:
        job = tmp_path / "job.toml"
        job.write_text(textwrap.dedent(f'''
            python_path = ["lib"]
            [dataset]
            data_dir = "{demo_zip}"
            [view]
            name = "force-curve"
            [transforms]
            record = "sideeffects:transform"
            [run]
            scheduler = "{procs.address}"
            [output]
            kind = "npy"
            path = "out"
            '''))
        run_dir = tmp_path / "elsewhere"
        run_dir.mkdir()
        done = subprocess.run([sys.executable, "-m", "guideloom", "run", str(job), "--dry-run"],
                              capture_output=True, text=True, timeout=120, cwd=run_dir)
    finally:
        procs.stop()
    assert sorted(p.name for p in lib.glob("IMPORTED-*")) == []
    assert done.returncode == 0, done.stderr
    assert f"runs: scheduler: scheduler {procs.address} (1 worker)" in done.stdout
    assert "sideeffects:transform, which a dry run neither imports nor runs" in done.stdout
    assert not (tmp_path / "out").exists()
