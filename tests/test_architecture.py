"""The package's shape: no import cycles, no private names across modules, a reader that stands
alone, and formats looked up in one registry (a third-party format plugs in)."""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import cloudpickle
import numpy as np
import pytest

import guideloom
from guideloom.compat.generate import HEADER
from guideloom.formats import format_kinds, get_format, register_format, unregister_format
from guideloom.formats.npz import NpzFormat

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "guideloom"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imported_module(name: str, node: ast.ImportFrom, is_package: bool) -> str:
    """The absolute module a ``from ... import`` in module ``name`` names (relative ones
    resolved against ``name``; ``is_package``: ``name`` is a package's ``__init__``)."""
    if not node.level:
        return node.module or ""
    base = name.split(".")[: len(name.split(".")) - node.level + is_package]
    return ".".join(base + ([node.module] if node.module else []))


def imported(name: str, tree: ast.AST) -> list[tuple[str, str]]:
    """``(module, imported name)`` for every guideloom import in the module, wherever it is
    (module level, inside functions, under TYPE_CHECKING)."""
    found = []
    is_package = MODULES[name].name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, "") for a in node.names if a.name.startswith("guideloom")]
        elif isinstance(node, ast.ImportFrom):
            module = imported_module(name, node, is_package)
            if module.startswith("guideloom"):
                found += [(module, a.name) for a in node.names]
    return found


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for name, path in MODULES.items():
        deps = set()
        for module, attr in imported(name, ast.parse(path.read_text())):
            target = f"{module}.{attr}" if f"{module}.{attr}" in MODULES else module
            parts = target.split(".")
            for i in range(2, len(parts) + 1):  # importing a.b.c runs a.b's __init__ too
                prefix = ".".join(parts[:i])
                if prefix in MODULES and prefix != name and not name.startswith(f"{prefix}."):
                    deps.add(prefix)
        graph[name] = deps
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles_anywhere_in_the_package():
    assert cycles(import_graph()) == []


def test_no_private_name_is_imported_across_modules():
    offenders = []
    for name, path in MODULES.items():
        for module, attr in imported(name, ast.parse(path.read_text())):
            own_part = module.rpartition(".")[0] == name  # a package's own private module
            private_module = not own_part and any(p.startswith("_") and not p.startswith("__")
                                                  for p in module.split("."))
            private_attr = attr.startswith("_") and not attr.startswith("__")
            if private_module or private_attr:
                offenders.append(f"{name}: from {module} import {attr}")
    assert offenders == []


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for dep in graph[todo.pop()]:
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def test_the_reader_depends_on_formats_and_layout_only():
    deps = reachable(import_graph(), "guideloom.reader")
    assert not {d for d in deps if d.startswith(("guideloom.export", "guideloom.cluster"))}
    assert "guideloom.formats.layout" in deps
    assert "guideloom.formats" in deps
    # and at run time, reading an export imports neither the executor nor Dask
    code = ("import sys, guideloom.reader; "
            "bad = [m for m in sys.modules if m.startswith(('guideloom.export', "
            "'guideloom.cluster', 'distributed', 'dask'))]; print(bad); assert not bad")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT)
    assert done.returncode == 0, done.stdout + done.stderr


def code_strings(path: Path) -> set[str]:
    """The string constants of a module's code (docstrings left out)."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef)
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant)
            and isinstance(node.value, str) and id(node) not in docstrings}


def test_executor_and_reader_name_no_format():
    cli = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "guideloom" / "cli").glob("*.py"))
    assert len(cli) > 1
    executor = [f"guideloom/export/{m}.py" for m in ("plan", "partition", "finalize", "run")]
    for module in (*executor, "guideloom/reader.py", *cli):
        named = code_strings(ROOT / module) & {"npy", "npz", "zarr", "storage"}
        assert not named, f"{module} names the formats {named}"


def test_every_exception_and_warning_class_lives_in_errors_py():
    outside = []
    for name, path in MODULES.items():
        if name == "guideloom.errors":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and any(
                    getattr(b, "id", getattr(b, "attr", "")).endswith(("Error", "Warning",
                                                                        "Exception"))
                    for b in node.bases):
                outside.append(f"{name}.{node.name}")
    assert outside == []
    for name in ("MissingFieldError", "CorruptDataError", "SkippedDataWarning",
                 "IncompleteExportError", "Export", "ExportSpec", "iter_view", "extract_zips"):
        assert name in guideloom.__all__
        assert getattr(guideloom, name) is not None


class CopiedNpz(NpzFormat):
    """A third-party format: npz files under another kind name."""

    kind = "npz-copy"


@pytest.fixture
def copied_npz():
    register_format(CopiedNpz)
    yield CopiedNpz
    unregister_format(CopiedNpz.kind)  # the registry (and the workflow schema) as it was


def test_a_registered_third_party_format_is_written_and_read(demo_zip, tmp_path, copied_npz):
    assert "npz-copy" in format_kinds()
    assert get_format("npz-copy") is CopiedNpz
    result = guideloom.export.export("force-curve", tmp_path / "out", kind="npz-copy",
                                     data_dir=demo_zip, sim_ids=[3, 1], sim_ids_order="sim_ids",
                                     client="sync")
    assert result.manifest["kind"] == "npz-copy"
    export = guideloom.load_export(tmp_path / "out")
    ds = guideloom.load(demo_zip)
    first = next(guideloom.iter_view("force-curve", dataset=ds, data_dir=demo_zip, sim_ids=[3]))
    np.testing.assert_array_equal(export[0]["force_data"], first["force_data"])
    assert export.sim_ids.tolist() == [3, 1]


def test_unknown_kind_lists_the_known_ones(tmp_path):
    with pytest.raises(ValueError, match="parquet") as caught:
        get_format("parquet")
    assert "npy" in str(caught.value)
    assert "zarr" in str(caught.value)


# --- one read path: outside guideloom/read/, nothing asks "is this remote?" -----------------

READ_PACKAGE = "guideloom.read"
REMOTE_TYPES = ("RemoteRoot", "RemoteLocation")
# Known exceptions: none (the test also fails when an entry here is no longer needed).
KNOWN_REMOTE_ISINSTANCE: set[str] = set()


def is_compat_stub(path: Path) -> bool:
    """A module that only re-exports what moved: generated from the alias table
    (``guideloom/compat/aliases.py``), or saying so in its docstring."""
    text = path.read_text()
    doc = ast.get_docstring(ast.parse(text)) or ""
    return text.startswith(HEADER) or doc.startswith("Compatibility stub")


def remote_isinstance(tree: ast.AST) -> list[int]:
    """Lines of ``isinstance(x, T)`` calls whose ``T`` names a remote type."""

    def names(node: ast.AST) -> set[str]:
        return {n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node)
                if isinstance(n, ast.Name | ast.Attribute)}

    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "isinstance"
            and len(node.args) == 2 and names(node.args[1]) & set(REMOTE_TYPES)]


def outside_the_read_package() -> dict[str, Path]:
    return {name: path for name, path in MODULES.items()
            if name != READ_PACKAGE and not name.startswith(f"{READ_PACKAGE}.")
            and not is_compat_stub(path)}


def test_the_remote_checks_find_what_they_look_for():
    tree = ast.parse("from guideloom.read.roots import RemoteRoot\n"
                     "def f(x):\n"
                     "    return (isinstance(x, int | RemoteRoot)\n"
                     "            or isinstance(x, (str, m.RemoteLocation)))\n"
                     "def g(x):\n"
                     "    return isinstance(x, DataRoot)\n")
    assert remote_isinstance(tree) == [3, 4]
    assert is_compat_stub(PACKAGE / "io" / "seek.py")
    assert not is_compat_stub(PACKAGE / "read" / "roots.py")


def test_no_module_outside_the_read_package_tests_for_remote_types():
    offenders = {}
    for name, path in outside_the_read_package().items():
        lines = remote_isinstance(ast.parse(path.read_text()))
        if bool(lines) != (name in KNOWN_REMOTE_ISINSTANCE):
            offenders[name] = lines
    assert offenders == {}, ("isinstance of RemoteRoot/RemoteLocation outside guideloom/read/ "
                             "(ask DataRoot.is_local / Location.is_local, or a root's method), "
                             f"or a known exception is gone: {offenders}")


# --- the read path (issue 29): one layered package, no local/remote branches in it ------------
READ_INTERNALS = {  # byte transports and the byte layer's helpers: only the read package uses them
    "guideloom.read.http", "guideloom.read.fsspec_source", "guideloom.read.handles",
    "guideloom.read.wrappers", "guideloom.read.fileobj", "guideloom.read.metacache",
    "guideloom.read.ranges",
}
TRANSPORT_NAMES = {"HttpRangeSource", "FsspecSource", "LocalFileSource",
                   "ByteRangeFile", "http_source", "fsspec_filesystem", "url_source"}
NOT_MOVED_YET: set[str] = set()
ROOT_LAYER = {  # the roots layer names the remote types it defines and builds
    "guideloom.read.roots", "guideloom.read.locations", "guideloom.read.remote_scan",
    "guideloom.read.remote_loose", "guideloom.read.fetch", "guideloom.read.manifest",
    "guideloom.read.files", "guideloom.read.scan", "guideloom.read.fingerprint",
    "guideloom.read.zipdir",
}
RECORD_PATH = [name for name in MODULES if name.startswith("guideloom.read.")
               and name not in ROOT_LAYER]


def test_byte_transports_are_imported_only_inside_the_read_package():
    allowed = NOT_MOVED_YET
    offenders = []
    for name, path in MODULES.items():
        if name.startswith("guideloom.read") or name in allowed:
            continue
        for module, attr in imported(name, ast.parse(path.read_text())):
            byte_layer = module == "guideloom.read.byte_source"
            if module in READ_INTERNALS or (byte_layer and attr in TRANSPORT_NAMES):
                offenders.append(f"{name}: from {module} import {attr}")
    assert offenders == []


def test_the_checker_sees_a_transport_import():
    tree = ast.parse("from guideloom.read.http import HttpRangeSource\n")
    assert ("guideloom.read.http", "HttpRangeSource") in imported("guideloom.cli", tree)


def remote_type_tests(tree: ast.AST) -> list[str]:
    """``isinstance``/``issubclass`` calls naming a Remote* type, and imports of one."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("isinstance",
                                                                           "issubclass"):
            names = {getattr(n, "id", getattr(n, "attr", "")) for n in ast.walk(node.args[1])}
            found += [n for n in names if n.startswith("Remote")]
        elif isinstance(node, ast.ImportFrom):
            found += [a.name for a in node.names if a.name in ("RemoteLocation", "RemoteRoot")]
    return found


def test_the_record_path_does_not_branch_on_remote_types():
    assert "guideloom.read.records" in RECORD_PATH
    assert "guideloom.read.hdf5" in RECORD_PATH
    offenders = {name: found for name in RECORD_PATH
                 if (found := remote_type_tests(ast.parse(MODULES[name].read_text())))}
    assert offenders == {}
    assert remote_type_tests(ast.parse("isinstance(loc, RemoteLocation)")) == ["RemoteLocation"]


# --- the layout (issue 29): a top level that reads as the architecture -------------------------
#: The real modules at guideloom/'s top level: the public entry points, one per public area
#: (docs/architecture.md, "The top level"). Every other top-level module is a generated stub.
ENTRY_POINTS = {
    "guideloom": "the package: the headline names, each imported from where it is defined",
    "guideloom.__main__": "`python -m guideloom` runs the command line",
    "guideloom.config": "every knob of guideloom (a public area: guideloom.config.get/set)",
    "guideloom.errors": "every exception and warning class (a public area)",
    "guideloom.reader": "load_export, the reader of every export kind; it stands alone (it must "
                        "not import the export package: test_the_reader_depends_on_...)",
    "guideloom.demo": "make_demo_data, the demo dataset of the tutorials and tests",
    "guideloom._version": "__version__, in one place (the package and pyproject.toml read it)",
    "guideloom.h5_tools": "open_h5/inspect_h5: one experiment's file, local or remote (rddac's "
                          "and ddacs' h5_tools module, with their names)",
}
#: Top-level modules still to move into their layer, each with the reason it waits.
TOP_LEVEL_WAITING: dict[str, str] = {}
#: The layer packages (docs/architecture.md); a top-level folder not listed holds stubs only.
LAYERS = {"read", "select", "export", "formats", "cluster", "loader", "storage", "workflow",
          "compat", "runtime", "fastread", "h5native", "shuffle", "filesystem", "pytorch",
          "testing", "net", "releases", "preprocess", "cli"}


def is_generated_stub(path: Path) -> bool:
    return path.read_text(encoding="utf-8").startswith(HEADER)


def test_every_top_level_module_is_an_entry_point_or_a_generated_stub():
    top = {module_name(p): p for p in PACKAGE.glob("*.py")}
    loose = sorted(name for name, path in top.items()
                   if name not in ENTRY_POINTS and name not in TOP_LEVEL_WAITING
                   and not is_generated_stub(path))
    assert loose == [], ("move these into their layer (git mv; the old path becomes an entry of "
                         "guideloom/compat/aliases.py) or list them as entry points")
    listed = {**ENTRY_POINTS, **TOP_LEVEL_WAITING}
    assert sorted(n for n in listed if n not in top or is_generated_stub(top[n])) == []
    assert all(reason.strip() for reason in listed.values())


def test_every_top_level_folder_is_a_layer_or_holds_stubs_only():
    folders = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    assert folders >= LAYERS
    not_stubs = {name: sorted(str(p.relative_to(PACKAGE)) for p in (PACKAGE / name).rglob("*.py")
                              if not is_generated_stub(p))
                 for name in folders - LAYERS}
    assert {k: v for k, v in not_stubs.items() if v} == {}


def module_aliases(name: str, tree: ast.AST) -> dict[str, str]:
    """Local name -> guideloom module it is bound to, for the module's imports of modules."""
    bound = {}
    is_package = MODULES[name].name == "__init__.py"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("guideloom"):
                    bound[a.asname or "guideloom"] = a.name if a.asname else "guideloom"
        elif isinstance(node, ast.ImportFrom):
            module = imported_module(name, node, is_package)
            for a in node.names:
                if f"{module}.{a.name}" in MODULES:
                    bound[a.asname or a.name] = f"{module}.{a.name}"
    return bound


def private_attributes(name: str, tree: ast.AST) -> list[str]:
    """``module._x`` reached through an imported guideloom module (``mod._x``,
    ``guideloom.a.b._x``): a private name taken across modules without an import statement."""
    bound = module_aliases(name, tree)
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                and not node.attr.startswith("__")):
            continue
        chain, value = [], node.value
        while isinstance(value, ast.Attribute):
            chain.append(value.attr)
            value = value.value
        if not isinstance(value, ast.Name) or value.id not in bound:
            continue
        module = ".".join([bound[value.id], *reversed(chain)])
        if module in MODULES and module != name:
            found.append(f"{name}: {module}.{node.attr}")
    return found


def test_the_private_attribute_check_sees_one():
    tree = ast.parse("import guideloom.read.metacache\nfrom guideloom.read import zipdir as z\n"
                     "x = guideloom.read.metacache._SUFFIX\ny = z._parse\nok = z.__name__\n")
    assert private_attributes("guideloom.cli", tree) == [
        "guideloom.cli: guideloom.read.metacache._SUFFIX",
        "guideloom.cli: guideloom.read.zipdir._parse"]


#: ``module: module._x`` -> why that module reaches into another's private name (none today).
PRIVATE_ACROSS_MODULES: dict[str, str] = {}


def test_no_private_name_is_reached_through_another_module():
    """The import check above sees ``from m import _x``; this sees ``m._x`` after ``import m``."""
    found = [hit for name, path in MODULES.items()
             for hit in private_attributes(name, ast.parse(path.read_text()))]
    assert sorted(h for h in found if h not in PRIVATE_ACROSS_MODULES) == []
    assert sorted(k for k in PRIVATE_ACROSS_MODULES if k not in found) == [], "stale entries"
    assert all(reason.strip() for reason in PRIVATE_ACROSS_MODULES.values())


#: Modules that import only with torch installed.
_TORCH_MODULES = ("guideloom.pytorch", "guideloom.loader.torch_adapter")


def first_import_failures(names: list[str], package: str, cwd: Path) -> list[str]:
    """Import each of ``names`` as the first module of ``package`` in one new process (the
    package's modules are dropped from ``sys.modules`` before each); the failures."""
    code = ("import importlib, sys\n"
            f"failed = []\nfor name in {names!r}:\n"
            f"    for key in [k for k in sys.modules if k.split('.')[0] == {package!r}]:\n"
            "        del sys.modules[key]\n"
            "    try:\n"
            "        importlib.import_module(name)\n"
            "    except Exception as exc:\n"
            "        failed.append(f'{name}: {type(exc).__name__}: {exc}')\n"
            "print('\\n'.join(failed))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return [line for line in done.stdout.splitlines() if line]


def test_the_first_import_check_finds_a_cycle(tmp_path):
    package = tmp_path / "cyclic"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from cyclic.b import B\nA = 1\n")
    (package / "b.py").write_text("from cyclic.a import A\nB = 2\n")
    (package / "c.py").write_text("C = 3\n")
    failed = first_import_failures(["cyclic.a", "cyclic.b", "cyclic.c"], "cyclic", tmp_path)
    assert [line.split(":")[0] for line in failed] == ["cyclic.a", "cyclic.b"]
    assert "partially initialized" in failed[0]


@pytest.mark.slow  # ~15-40 s: every module imported first, one after the other, in one process;
# fast sibling: test_no_import_cycles_anywhere_in_the_package (the static graph of all imports)
def test_every_module_imports_first_without_a_cycle():
    """Each module imported as the first guideloom module of a process: an import cycle that
    breaks from some entry point (``cannot import name ... partially initialized module``)
    fails here."""
    names = sorted(n for n in MODULES if not n.endswith("__main__")
                   and not (n.startswith(_TORCH_MODULES) and importlib.util.find_spec("torch")
                            is None))
    assert first_import_failures(names, "guideloom", ROOT) == []


def test_every_module_path_docs_architecture_names_exists():
    """docs/architecture.md stays true to the layout: each ``guideloom/...`` file it names is
    there (a moved module named by its old path is a stub: named so, it is wrong there)."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`(guideloom/[\w/]+\.py)`", text))
    assert len(named) > 40
    assert sorted(p for p in named if not (ROOT / p).is_file()) == []
    stubs = sorted(p for p in named if is_generated_stub(ROOT / p))
    assert stubs == []


#: ``module: stub`` -> why a real module still imports an old path (a generated stub).
IMPORTS_OF_OLD_PATHS: dict[str, str] = {}
IMPORTS_OF_OLD_PATHS.update({
    f"guideloom: {stub}": "a public module attribute of the package (guideloom.croissant, ...) is "
                          "the old path, imported under TYPE_CHECKING for editors"
    for stub in ("guideloom.croissant", "guideloom.ddacs_visualization", "guideloom.io",
                 "guideloom.streaming", "guideloom.types", "guideloom.visualization")})


def test_guideloom_imports_its_modules_where_they_are_defined():
    """Inside the package nothing imports a stub: an old path is for code written before."""
    found = set()
    for name, path in MODULES.items():
        if is_generated_stub(path):
            continue
        for module, attr in imported(name, ast.parse(path.read_text())):
            target = f"{module}.{attr}" if f"{module}.{attr}" in MODULES else module
            if target in MODULES and is_generated_stub(MODULES[target]):
                found.add(f"{name}: {target}")
    assert sorted(found - set(IMPORTS_OF_OLD_PATHS)) == []
    assert sorted(set(IMPORTS_OF_OLD_PATHS) - found) == [], "stale entries"


# What a worker imports: the task functions the driver ships live in export/partition.py, which
# a worker imports by its path (cloudpickle pickles module functions by reference). The driver's
# side, split from it (issue 40): the plan, the executor and its placement (the cluster
# client, dashboard and forked workers), finishing, Croissant writing, the run's monitor.
DRIVER_SIDE = ("guideloom.export.plan", "guideloom.export.run", "guideloom.export.finalize",
               "guideloom.export.api", "guideloom.export.update", "guideloom.export.publish",
               "guideloom.export.progress", "guideloom.export.prehash",
               "guideloom.export.target", "guideloom.cluster.runtime", "guideloom.cluster.page",
               "guideloom.cluster.announce", "guideloom.cluster.forked",
               "guideloom.cluster.embedded")


def driver_side_loaded(module: str) -> list[str]:
    """The modules of :data:`DRIVER_SIDE` that importing ``module`` loads, in a fresh
    process."""
    code = (f"import sys, {module}; "
            f"print(' '.join(m for m in {DRIVER_SIDE!r} if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_the_driver_side_check_sees_the_driver_side():
    # the executor loads the driver's modules; the probe sees them (not blind to any)
    loaded = driver_side_loaded("guideloom.export.run")
    assert set(loaded) >= set(DRIVER_SIDE) - {"guideloom.export.api",
                                              "guideloom.cluster.forked"}, loaded


def test_the_worker_side_imports_no_driver_side():
    loaded = driver_side_loaded("guideloom.export.partition")
    assert loaded == [], (f"importing guideloom.export.partition (what a Dask worker imports "
                          f"to run a partition) loads the driver-side modules {loaded}: "
                          "import them inside the driver's functions or move the code that "
                          "needs them out of partition.py")
    # the functions the driver ships are found by their module path, as a worker finds them
    from guideloom.export import partition

    for name in ("partition_task", "probe_task", "job_payload", "forked_task"):
        function = getattr(partition, name)
        assert function.__module__ == "guideloom.export.partition"
        assert cloudpickle.loads(cloudpickle.dumps(function)) is function
        assert name.encode() in cloudpickle.dumps(function)  # by reference, not by value
