"""The format registry as a plugin contract: entry points read once, a broken plugin warned
about and skipped, no silent shadowing of a kind, and a plugin format named in a workflow file
with its own options and run by ``guideloom run`` (nothing in the package names it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import guideloom
from guideloom.demo import make_demo_data
from guideloom.errors import FormatPluginWarning, WorkflowError
from guideloom.formats import (
    BUILT_IN,
    format_kinds,
    get_format,
    known_formats,
    register_format,
    unregister_format,
)
from guideloom.formats.npy import NpyFormat
from guideloom.formats.options import options_schema
from guideloom.testing.transforms import first_rows
from guideloom.workflow import load_workflow, workflow_schema
from guideloom.workflow.schema import file_schema, output_schema
from tests.jsonl_format import JsonlFormat, JsonlOptions

ROOT = Path(__file__).resolve().parents[1]


def install_plugins(site: Path, name: str, entries: dict[str, str]) -> Path:
    """A distribution ``name`` in ``site`` (as pip would install it) whose entry points of
    group ``guideloom.export_formats`` are ``entries``."""
    info = site / f"{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    lines = "".join(f"{kind} = {ref}\n" for kind, ref in entries.items())
    (info / "entry_points.txt").write_text(f"[guideloom.export_formats]\n{lines}")
    return site


def run_python(code: str, site: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.fixture
def jsonl():
    register_format(JsonlFormat)
    yield JsonlFormat
    unregister_format(JsonlFormat.kind)


# --- the registry ----------------------------------------------------------------------------
def test_a_built_in_kind_is_not_shadowed_without_replace():
    class OtherNpy(NpyFormat):
        kind = "npy"

    with pytest.raises(ValueError, match=r"'npy' is a built-in format.*replace=True"):
        register_format(OtherNpy)
    assert get_format("npy") is NpyFormat
    try:
        assert register_format(OtherNpy, replace=True) is OtherNpy
        assert get_format("npy") is OtherNpy
    finally:
        unregister_format("npy")
    assert get_format("npy") is NpyFormat  # the built-in is back


def test_a_registered_kind_is_not_taken_by_another_class(jsonl):
    class Imitation(JsonlFormat):
        pass

    assert register_format(JsonlFormat) is JsonlFormat  # the same class again: fine
    with pytest.raises(ValueError, match=r"'jsonl' is tests.jsonl_format.JsonlFormat"):
        register_format(Imitation)
    register_format(replace=True)(Imitation)
    assert get_format("jsonl") is Imitation


def test_a_format_without_a_kind_is_refused():
    class NoKind(NpyFormat):
        kind = ""
    with pytest.raises(TypeError, match="declares no kind"):
        register_format(NoKind)


def test_entry_points_are_read_once_and_a_broken_plugin_is_warned_about_and_skipped(tmp_path):
    site = install_plugins(tmp_path / "site", "broken-formats", {
        "jsonl": "tests.jsonl_format:JsonlFormat",
        "parquet": "no_such_module_here:ParquetFormat",
        "npy": "tests.jsonl_format:JsonlFormat",  # would shadow a built-in
    })
    late = install_plugins(tmp_path / "late", "late-formats",
                           {"jsonl2": "tests.jsonl_format:JsonlFormat"})
    done = run_python(f"""
        import sys, warnings
        import guideloom.formats as formats
        from guideloom.errors import FormatPluginWarning
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            kinds = formats.format_kinds()
            try:
                formats.get_format("parquet")
            except ValueError as exc:
                print("ERROR", exc)
            try:
                formats.get_format("parquet")
            except ValueError:
                pass
        print("KINDS", kinds, formats.format_kinds())
        print("NPY", formats.get_format("npy").__module__)
        print("JSONL", formats.get_format("jsonl").__module__)
        for w in caught:
            print("WARNING", w.category.__name__, w.message)
        sys.path.insert(0, {str(late)!r})
        print("BEFORE_RESCAN", "jsonl2" in formats.format_kinds())
        formats.rescan_plugins()
        print("AFTER_RESCAN", "jsonl2" in formats.format_kinds())
    """, site, tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "KINDS ['jsonl', 'npy', 'npz', 'parquet', 'storage', 'zarr'] " \
           "['jsonl', 'npy', 'npz', 'storage', 'zarr']" in out
    assert "ERROR unknown output kind 'parquet' (its plugin failed to load: " \
           "ModuleNotFoundError: No module named 'no_such_module_here')" in out
    assert "NPY guideloom.formats.npy" in out  # the plugin called npy did not take it over
    assert "JSONL tests.jsonl_format" in out
    warnings = [line for line in out.splitlines() if line.startswith("WARNING")]
    assert len(warnings) == 2, out  # each problem once, however often it is met
    assert any("FormatPluginWarning" in w and "'npy'" in w and "broken-formats" in w
               and "shadow" in w for w in warnings), warnings
    assert any("FormatPluginWarning" in w and "'parquet'" in w
               and "no_such_module_here:ParquetFormat" in w for w in warnings), warnings
    assert "BEFORE_RESCAN False" in out  # read once: a plugin installed later is not seen
    assert "AFTER_RESCAN True" in out


def test_known_formats_are_the_built_ins_first():
    kinds = [f.kind for f in known_formats()]
    assert kinds[:4] == list(BUILT_IN)
    assert set(kinds) == set(format_kinds())


def test_format_plugin_warning_is_exported_with_the_other_warnings():
    assert guideloom.FormatPluginWarning is FormatPluginWarning
    assert issubclass(FormatPluginWarning, UserWarning)


# --- declarations and the workflow schema ----------------------------------------------------
def test_the_shipped_schema_json_is_what_the_built_in_formats_declare():
    built_in = [get_format(k) for k in BUILT_IN]
    assert file_schema()["properties"]["output"] == output_schema(built_in)


def test_the_options_schema_is_derived_from_the_options_dataclass():
    assert options_schema(JsonlOptions) == {
        "type": "object", "additionalProperties": False,
        "properties": {"compact": {"type": "boolean",
                                   "description": "no spaces after the JSON separators"},
                       "label": {"type": "string",
                                 "description": "a label recorded in export.json"}}}
    zarr = get_format("zarr")
    assert options_schema(zarr.Options)["properties"]["compressor"]["enum"] == list(
        zarr.compressions)


def test_every_format_declares_itself():
    for fmt in known_formats():
        assert fmt.description, fmt.kind
        assert isinstance(fmt.local_only, bool)
        assert all(isinstance(p, str) and p for p in fmt.every_fault_point())
    assert [f.kind for f in known_formats() if not f.local_only] == ["zarr"]


def test_a_registered_format_is_in_the_workflow_schema_with_its_table(jsonl):
    import jsonschema

    schema = workflow_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    output = schema["properties"]["output"]
    assert output["properties"]["kind"]["enum"] == ["npy", "npz", "zarr", "storage", "jsonl"]
    assert output["properties"]["jsonl"]["properties"]["compact"]["type"] == "boolean"
    unregister_format("jsonl")
    assert "jsonl" not in workflow_schema()["properties"]["output"]["properties"]


def write_workflow(folder: Path, output: str) -> Path:
    path = folder / "export.toml"
    path.write_text(textwrap.dedent("""
        [dataset]
        data_dir = "data"

        [view]
        name = "force-curve"

        [transforms]
        record = "guideloom.testing.transforms:first_rows"

        [output]
    """) + textwrap.dedent(output))
    return path


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("registry") / "data"
    make_demo_data(root, n=6)
    return root


def test_workflow_options_come_from_the_format(jsonl, data, tmp_path):
    (tmp_path / "data").symlink_to(data)
    wf = load_workflow(write_workflow(tmp_path, """
        kind = "jsonl"
        path = "out"
        [output.jsonl]
        compact = false
    """))
    assert wf.options() == {"compact": False, "label": ""}  # the defaults filled in
    assert wf.to_spec().options == {"compact": False, "label": ""}
    (tmp_path / "npz").mkdir()
    npz = load_workflow(write_workflow(tmp_path / "npz", """
        kind = "npz"
        path = "out"
        compression = "deflate"
    """), data_dir=data)
    assert npz.options() == {"compressed": True}
    assert npz.compression == "deflate"


@pytest.mark.parametrize(("output", "key", "message"), [
    ('kind = "jsonl"\npath = "out"\n[output.jsonl]\ncompact = "no"\n', "output.jsonl.compact",
     "expected a boolean (true or false), got 'no'"),
    ('kind = "jsonl"\npath = "out"\n[output.jsonl]\ncompactt = true\n', "output.jsonl.compactt",
     "unknown key; expected one of compact, label"),
    ('kind = "npy"\npath = "out"\n[output.jsonl]\ncompact = true\n', "output.kind",
     "expected 'jsonl' when output.jsonl is given, got 'npy'"),
    ('kind = "jsonl"\npath = "memory://out"\n', "output.path",
     "'jsonl' outputs are written to local paths; URLs are for zarr, got 'memory://out'"),
    ('kind = "jsonl"\npath = "out"\ncompression = "zstd"\n', "output.compression",
     "expected one of 'none', got 'zstd'"),
])
def test_a_plugin_table_is_checked_like_the_built_ins(jsonl, data, tmp_path, output, key,
                                                      message):
    with pytest.raises(WorkflowError) as refused:
        load_workflow(write_workflow(tmp_path, output), data_dir=data)
    assert refused.value.key == key, str(refused.value)
    assert message in str(refused.value)


def test_a_plugin_format_runs_from_a_workflow_file_through_guideloom_run(data, tmp_path):
    """Installed as an entry point (a dist-info on the path, as pip leaves it) and named in a
    workflow file with its options; no line of guideloom names it."""
    site = install_plugins(tmp_path / "site", "jsonl-format",
                           {"jsonl": "tests.jsonl_format:JsonlFormat"})
    (tmp_path / "data").symlink_to(data)
    workflow = write_workflow(tmp_path, """
        kind = "jsonl"
        path = "exports/jsonl"
        partition_size = 4

        [output.jsonl]
        compact = false
        label = "from a workflow file"
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}
    done = subprocess.run([sys.executable, "-m", "guideloom", "run", str(workflow),
                           "--scheduler", "sync"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    target = tmp_path / "exports" / "jsonl"
    manifest = json.loads((target / "export.json").read_text())
    assert manifest["kind"] == "jsonl"
    assert manifest["jsonl_label"] == "from a workflow file"
    assert manifest["options"] == {"compact": False, "label": "from a workflow file"}
    assert sorted(p.name for p in target.glob("part-*.jsonl")) == ["part-00000.jsonl",
                                                                  "part-00001.jsonl"]
    first_line = (target / "part-00000.jsonl").read_text().splitlines()[0]
    assert '"sim": 0}' in first_line
    assert "], [" in first_line
    register_format(JsonlFormat)  # this process reads it back with the same class
    try:
        export = guideloom.load_export(target)
        assert export.verify().rows == 6
        records = guideloom.iter_view("force-curve", data_dir=data)
        for i, record in enumerate(records):
            want = first_rows(record)
            np.testing.assert_array_equal(export[i]["force"], want["force"])
            assert export[i]["sim"] == want["sim"]
    finally:
        unregister_format("jsonl")
    # without the plugin installed, the same file is refused before anything runs
    bare = {**os.environ, "PYTHONPATH": str(ROOT)}
    refused = subprocess.run([sys.executable, "-m", "guideloom", "run", str(workflow),
                              "--scheduler", "sync", "--overwrite"], cwd=tmp_path, env=bare,
                             capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0
    assert "key 'output.jsonl': unknown key" in refused.stderr, refused.stderr


def test_the_first_lookups_from_many_threads_get_one_class(tmp_path):
    site = install_plugins(tmp_path / "site", "jsonl-format",
                           {"jsonl": "tests.jsonl_format:JsonlFormat"})
    done = run_python("""
        import threading
        from guideloom.formats import get_format
        found, barrier = [], threading.Barrier(8)

        def look():
            barrier.wait()
            found.append((get_format("jsonl"), get_format("zarr")))

        threads = [threading.Thread(target=look) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print(len(found), len(set(found)))
    """, site, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["8", "1"]
