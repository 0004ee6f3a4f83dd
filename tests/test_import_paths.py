"""The written public surface (``docs/api.md``) and nothing else: the predecessors' import
paths (rddac 2.0, ddacs 3.2.3, GuideLoom 1.1), guideloom's entry points and the plugin API.

``docs/api.md`` is the one list: every module it names imports, every name it lists exists, and
a listed module's ``__all__`` holds no name it (or the predecessor's wheel) leaves out. The
predecessors' names are data read from their wheels (``tests/fixtures/import_paths.json``; see
its ``about``); a name a predecessor had that guideloom lacks is listed below with the reason,
deliberate (:data:`LACKING`) or still to do (:data:`PENDING`); the test fails if a listed name
turns up (drop it from the list) and if any other name is missing. The compatibility stubs are
what ``guideloom/compat/aliases.py`` generates, and each is a path ``docs/api.md`` lists.
Internal modules are not listed: they may move freely.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from guideloom.compat import generate
from guideloom.compat.aliases import ALIASES
from guideloom.compat.generate import HEADER, stub_file, stub_text

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "import_paths.json"
API_PAGE = ROOT / "docs" / "api.md"
DATA = json.loads(FIXTURE.read_text(encoding="utf-8"))
HAS_TORCH = importlib.util.find_spec("torch") is not None
NEEDS_TORCH = {"guideloom.pytorch", "guideloom.loader.torch_adapter"}


def needs_torch(module: str) -> bool:
    """Whether importing ``module`` needs torch: one of :data:`NEEDS_TORCH` or a module of it."""
    return any(module == m or module.startswith(f"{m}.") for m in NEEDS_TORCH)


def torch_names(module: str, names: list[str]) -> set[str]:
    """The names of ``names`` that ``module`` can only give with torch installed (the headline
    names of ``guideloom`` that import ``guideloom.pytorch``); none when torch is installed."""
    if HAS_TORCH or module != "guideloom":
        return set()
    import guideloom

    return set(names) & set(guideloom._NEEDS_TORCH)

_CLI = ("the command line's internals (its sub-command handlers, consoles and constants); the "
        "command is used as a command: `guideloom info` and `guideloom download` take rddac's "
        "options (docs/coming-from-rddac.md)")
_NO_SIM = ("the DDACS simulations (`--no-sim`) are another dataset guideloom does not download "
           "(docs/coming-from-rddac.md)")
_NO_NETWORK_LOAD = ("`load()` never touches the network: no DaRUS manifest URL fallback "
                    "(docs/coming-from-rddac.md)")
_GL11_PRIVATE = ("a helper GuideLoom 1.1 imported into this module from its private module {}; "
                 "guideloom's {} is its own implementation, without that helper")
_GL11_INTERNAL = ("an internal class of GuideLoom 1.1's FileSystemDocument implementation (its "
                  "index reader); guideloom's FileSystemDocument is its own implementation")

#: ``predecessor module.name`` -> why guideloom deliberately lacks it.
LACKING: dict[str, str] = {
    **{f"rddac.cli.{n}": _CLI for n in (
        "BRAND_COLOR", "DEFAULT_DATA_DIR", "DEFAULT_VERSION", "RDDAC_SPEC", "SMALL_TEST_FILES",
        "cmd_download", "cmd_info", "console")},
    **{f"rddac.cli.{n}": _NO_SIM for n in ("DDACS_DATASET_DOI", "DDACS_SIM_FILE", "SIM_SUBDIR")},
    **{f"rddac.cli.{n}": "rddac's preprocessing command, which guideloom does not provide "
                         "(docs/coming-from-rddac.md)"
       for n in ("add_preprocess_parser", "cmd_preprocess")},
    **{f"ddacs.cli.{n}": _CLI for n in (
        "DARUS_BASE_URL", "DATASET_DOI", "DDACS_SPEC", "DEFAULT_DATA_DIR", "DEFAULT_VERSION",
        "DatasetSpec", "SMALL_TEST_FILES", "cmd_download", "cmd_info", "console", "err_console")},
    "rddac.croissant.metadata_url": _NO_NETWORK_LOAD,
    "ddacs.croissant.metadata_url": _NO_NETWORK_LOAD,
    "ddacs.pytorch.logger": "the module's logger object, not an API: guideloom's modules log "
                            "under their own names (logging.getLogger('guideloom'))",
    **{f"guideloom.filesystem.document.{n}": _GL11_PRIVATE.format(
        "_document_compute_requests", "FileSystemDocument") for n in (
        "compute_data_requests", "compute_index_requests", "concat_fast", "index_data_dtype",
        "validate_document_requests")},
    **{f"guideloom.filesystem.{m}.{n}": _GL11_PRIVATE.format("_shard_count", "filesystem")
       for m in ("document", "stream") for n in ("num_shards_async", "num_shards_sync")},
    **{f"guideloom.filesystem.document.{n}": _GL11_INTERNAL
       for n in ("IndexDataFilePointer", "IndexDataReader", "Scalar")},
    **{f"guideloom.storage.stream_meta_storage.{n}": _GL11_PRIVATE.format(
        "_compute_requests", "StreamWithMetaStorage")
       for n in ("compute_document_requests_and_index", "compute_stream_requests",
                 "concat_fast")},
    **{f"guideloom.storage.stream_storage.{n}": _GL11_PRIVATE.format(
        "_compute_requests", "StreamStorage") for n in ("compute_stream_requests", "concat_fast")},
    "guideloom.shuffle.feistel.specialized_scalar_kernels": _GL11_PRIVATE.format(
        "_gfc", "FeistelShuffler"),
    "guideloom.pytorch.stateful_dataloader.PinMemory": "GuideLoom 1.1's pin-memory stage is a "
    "torchdata node (torchdata.nodes.BaseNode); guideloom's loader has no torchdata dependency "
    "and pins in its own worker loop (pin_memory=True)",
    "guideloom.pytorch.stateful_dataloader.NEVER_SNAPSHOT_INTERVAL": "GuideLoom 1.1's snapshot "
    "interval of its torchdata nodes, set so that they never snapshot; guideloom's loader keeps "
    "its state itself and takes no torchdata snapshots",
}

#: ``predecessor module.name`` (or a whole module) -> what is still to do. Real gaps, not
#: choices: each is listed so that it is seen, and the test fails once it is fixed.
PENDING: dict[str, str] = {}


def ours(release: str, module: str) -> str:
    """The guideloom module path serving a predecessor's module (``rddac.x`` -> ``guideloom.x``)."""
    package = DATA["predecessors"][release]["package"]
    return "guideloom" + module[len(package):]


def _skip_without_torch(module: str) -> None:
    if needs_torch(module) and not HAS_TORCH:
        pytest.skip(f"{module} needs torch")


PREDECESSOR_MODULES = [(release, module) for release, info in DATA["predecessors"].items()
                       for module in info["modules"]]


def test_the_fixture_holds_the_three_predecessors():
    releases = DATA["predecessors"]
    assert set(releases) == {"rddac 2.0.0", "ddacs 3.2.3", "GuideLoom 1.1.0"}
    assert "rddac.streaming" in releases["rddac 2.0.0"]["modules"]
    assert "ddacs.visualization" in releases["ddacs 3.2.3"]["modules"]
    assert "guideloom.types.primitive" in releases["GuideLoom 1.1.0"]["modules"]
    assert set(DATA) == {"about", "predecessors"}  # guideloom's own surface is docs/api.md


@pytest.mark.parametrize(("release", "module"), PREDECESSOR_MODULES,
                         ids=[m for _, m in PREDECESSOR_MODULES])
def test_every_predecessor_path_imports_and_exposes_its_names(release, module):
    target = ours(release, module)
    names = DATA["predecessors"][release]["modules"][module]
    if module in PENDING:
        with pytest.raises(ImportError):
            importlib.import_module(target)
        return
    _skip_without_torch(target)
    mod = importlib.import_module(target)
    for name in torch_names(target, names):  # without torch: an ImportError naming the extra
        with pytest.raises(ImportError, match=r"guideloom\[torch\]"):
            getattr(mod, name)
    names = [n for n in names if n not in torch_names(target, names)]
    missing = sorted(n for n in names if not hasattr(mod, n))
    listed = sorted(n for n in names if f"{module}.{n}" in LACKING or f"{module}.{n}" in PENDING)
    assert [n for n in missing if n not in listed] == [], f"{target} lacks names {module} has"
    assert [n for n in listed if n not in missing] == [], \
        f"{target} has these now: drop them from LACKING/PENDING"


def test_every_listed_gap_names_a_real_predecessor_name():
    known = {f"{m}.{n}" for info in DATA["predecessors"].values()
             for m, names in info["modules"].items() for n in names}
    modules = {m for info in DATA["predecessors"].values() for m in info["modules"]}
    stale = [k for k in [*LACKING, *PENDING] if k not in known and k not in modules]
    assert stale == []
    assert all(reason.strip() for reason in [*LACKING.values(), *PENDING.values()])


@pytest.mark.slow  # 3-8 s; fast siblings: ..._imports_and_exposes_its_names (in-process) and
# test_guideloom11_compat.py's test_guideloom11_paths_import_in_a_fresh_interpreter
def test_predecessor_paths_import_in_a_fresh_interpreter(tmp_path):
    """As a user's script would: a new process, one ``from <path> import <names>`` per module."""
    lines = []
    for release, module in PREDECESSOR_MODULES:
        target = ours(release, module)
        if module in PENDING or (needs_torch(target) and not HAS_TORCH):
            continue
        names = [n for n in DATA["predecessors"][release]["modules"][module]
                 if f"{module}.{n}" not in LACKING and f"{module}.{n}" not in PENDING]
        names = [n for n in names if n not in torch_names(target, names)]
        lines.append(f"from {target} import {', '.join(names)}" if names else f"import {target}")
    script = tmp_path / "imports.py"
    script.write_text("\n".join(lines) + "\nprint('ok')\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=240, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "ok"


# --- docs/api.md: the written surface --------------------------------------------------------
_SECTION = re.compile(r"^### `(guideloom[\w.]*)`\s*$", re.M)
_TABLE_ROW = re.compile(r"^\| `(guideloom[\w.]*)` \| (.+) \|\s*$", re.M)
_NAMES = re.compile(r"^Names: (.+?)(?:\n\s*\n|\Z)", re.M | re.S)


def parse_api_page(text: str) -> tuple[dict[str, set[str]], dict[str, list[str]]]:
    """``docs/api.md`` read: the predecessors' table (guideloom path -> the predecessor modules
    it serves) and the sections (module -> the names its ``Names:`` paragraph lists)."""
    table = {row[1]: set(re.findall(r"`([\w.]+)` \(", row[2])) for row in _TABLE_ROW.finditer(text)}
    sections: dict[str, list[str]] = {}
    heads = list(_SECTION.finditer(text))
    for head, after in zip(heads, [*heads[1:], None], strict=True):
        body = text[head.end():after.start() if after is not None else len(text)]
        found = _NAMES.search(body)
        assert found is not None, f"docs/api.md: section {head[1]} lists no names"
        assert head[1] not in sections, f"docs/api.md: section {head[1]} twice"
        sections[head[1]] = re.findall(r"`(\w+)`", found[1])
    return table, sections


TABLE, SECTIONS = parse_api_page(API_PAGE.read_text(encoding="utf-8"))
LISTED = sorted(set(TABLE) | set(SECTIONS))


def wheel_names(module: str) -> set[str]:
    """The names the predecessors' wheels give the guideloom path ``module``."""
    return {n for release, info in DATA["predecessors"].items()
            for m, names in info["modules"].items() if ours(release, m) == module
            for n in names}


def test_the_page_parser_reads_the_table_the_sections_and_their_names():
    page = ("| guideloom path | the predecessors' modules |\n|---|---|\n"
            "| `guideloom.spec` | `rddac.spec` (rddac 2.0.0), `ddacs.spec` (ddacs 3.2.3) |\n\n"
            "### `guideloom.a`\n\nWhat it is, with `code`.\n\nNames: `x`, `Y_2`,\n`z`.\n\n"
            "### `guideloom.b.c`\n\nNames: `only`.\n")
    table, sections = parse_api_page(page)
    assert table == {"guideloom.spec": {"rddac.spec", "ddacs.spec"}}
    assert sections == {"guideloom.a": ["x", "Y_2", "z"], "guideloom.b.c": ["only"]}
    with pytest.raises(AssertionError, match="lists no names"):
        parse_api_page("### `guideloom.a`\n\nNo list.\n")


def test_the_page_lists_every_predecessor_path_and_what_it_serves():
    served: dict[str, set[str]] = {}
    for release, module in PREDECESSOR_MODULES:
        served.setdefault(ours(release, module), set()).add(module)
    assert served == TABLE
    assert {"guideloom", "guideloom.export", "guideloom.formats", "guideloom.testing",
            "guideloom.errors", "guideloom.config"} <= set(SECTIONS)


def test_every_stub_is_a_listed_path():
    """No module exists only to keep an internal path alive: each stub is a public path."""
    assert sorted(alias.path for alias in ALIASES if alias.path not in LISTED) == []


@pytest.mark.parametrize("module", sorted(SECTIONS))
def test_every_listed_module_imports_and_has_its_listed_names(module):
    _skip_without_torch(module)
    mod = importlib.import_module(module)
    listed = SECTIONS[module]
    assert len(set(listed)) == len(listed), f"docs/api.md lists a name of {module} twice"
    names = [n for n in listed if n not in torch_names(module, listed)]
    assert sorted(n for n in names if not hasattr(mod, n)) == [], \
        f"{module} lacks names docs/api.md lists (a moved name keeps an alias)"


@pytest.mark.parametrize("module", LISTED)
def test_a_listed_modules_all_holds_only_listed_names(module):
    """Exactly the written surface: a name exported by ``__all__`` is written down."""
    _skip_without_torch(module)
    exported = set(getattr(importlib.import_module(module), "__all__", ()))
    unwritten = exported - set(SECTIONS.get(module, ())) - wheel_names(module)
    assert sorted(unwritten) == [], f"{module}.__all__ names these: list them in docs/api.md"


def test_every_stub_is_what_the_table_generates():
    stale = [alias.path for alias in ALIASES
             if not stub_file(alias.path).is_file()
             or stub_file(alias.path).read_text(encoding="utf-8") != stub_text(alias)]
    assert stale == [], "run `python -m guideloom.compat.generate` (and edit the table, not stubs)"


def test_every_generated_stub_is_in_the_table():
    tabled = {stub_file(alias.path) for alias in ALIASES}
    generated = {path for path in (ROOT / "guideloom").rglob("*.py")
                 if path.read_text(encoding="utf-8").startswith(HEADER)}
    assert generated == tabled
    assert len(tabled) == len(ALIASES)  # one file per entry, none listed twice


def test_the_generator_writes_every_stub_and_its_check_finds_an_edited_one(tmp_path):
    """Into an empty folder: every stub written; one edited by hand: found stale, rewritten."""
    package = tmp_path / "guideloom"
    assert sorted(generate.write(package)) == sorted(stub_file(a.path, package) for a in ALIASES)
    assert generate.differing(package) == []
    edited = stub_file("guideloom.io.seek", package)
    assert edited == package / "io" / "seek.py"
    assert stub_file("guideloom.io", package) == package / "io" / "__init__.py"
    edited.write_text(edited.read_text() + "EXTRA = 1\n")
    assert generate.differing(package) == [edited]
    assert generate.write(package) == [edited]
    assert "EXTRA" not in edited.read_text()
    assert generate.differing(package) == []


def test_the_check_command_passes_on_the_source_tree(capsys):
    assert generate.main(["--check"]) == 0
    assert capsys.readouterr().out == ""


def test_a_lazy_name_stays_lazy_behind_its_stub():
    """The plots' ddacs names are served on first access: the stub forwards, it does not import
    matplotlib, and the object is the one the defining module serves."""
    code = ("import sys\n"
            "import guideloom.visualization as viz, guideloom.ddacs_visualization as dviz\n"
            "from guideloom.compat import ddacs_visualization as real\n"
            "assert 'matplotlib' not in sys.modules\n"
            "assert viz.plot_mesh is dviz.plot_mesh is real.plot_mesh\n"
            "assert 'plot_mesh' in dir(viz) and 'plot_mesh' in viz.__all__\n"
            "assert 'matplotlib' not in sys.modules\n"
            "print('ok')\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
