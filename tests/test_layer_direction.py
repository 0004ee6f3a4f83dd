"""Imports between the layer packages go downward only, as the layer table of
``docs/architecture.md`` ("The top level": layer, folder, bottom-up) orders them.

A module of one layer may import the modules of its own layer and of the layers listed before it;
an import of a later layer is an upward import. The table is read from the page (the one place
the order is written), the import graph from the source (``tests/test_architecture.py``:
imports inside functions and under ``TYPE_CHECKING`` count). Top-level modules (entry points,
``errors``, ``config`` and the predecessors' stubs) are no layer and are left out.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_architecture import import_graph

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"
HEADER = "| layer (bottom-up) | folder | its one job |"

#: ``importer -> imported`` (modules) -> why this upward import stays for now. The test fails on
#: an upward import not listed here and on an entry that is no longer found.
KNOWN_UPWARD: dict[str, str] = {}  # none left: an entry needs its reason


def layer_table(text: str) -> list[tuple[str, list[str]]]:
    """The page's layer table: ``(layer, its folders)`` bottom-up."""
    lines = text.splitlines()
    start = lines.index(HEADER) + 2  # the header and its |---| line
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows.append((cells[0], re.findall(r"`(\w+)/`", cells[1])))
    return rows


def layer_ranks(table: list[tuple[str, list[str]]]) -> dict[str, int]:
    """Top-level folder -> the position of its layer, bottom-up."""
    ranks: dict[str, int] = {}
    for rank, (_layer, folders) in enumerate(table):
        for folder in folders:
            assert folder not in ranks, f"docs/architecture.md: {folder}/ in two layers"
            ranks[folder] = rank
    return ranks


def folder_of(module: str) -> str | None:
    """The top-level folder of a guideloom module (None for a top-level module)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and _is_package(module)) else None


def _is_package(module: str) -> bool:
    return (ROOT / module.replace(".", "/") / "__init__.py").is_file()


def upward_imports(graph: dict[str, set[str]], ranks: dict[str, int],
                   folder: dict[str, str | None]) -> set[str]:
    """``importer -> imported`` for each import of a module in a later layer."""
    found = set()
    for importer, deps in graph.items():
        mine = ranks.get(folder[importer] or "")
        for dep in deps:
            theirs = ranks.get(folder.get(dep) or "")
            if mine is not None and theirs is not None and theirs > mine:
                found.add(f"{importer} -> {dep}")
    return found


TABLE = layer_table(PAGE.read_text(encoding="utf-8"))
RANKS = layer_ranks(TABLE)


def test_the_table_is_read_bottom_up_with_each_layers_folders():
    layers = [layer for layer, _ in TABLE]
    assert layers[:3] == ["runtime", "net", "read"]
    assert dict(TABLE)["read"] == ["read", "h5native", "fastread"]
    assert RANKS["runtime"] < RANKS["read"] < RANKS["select"] < RANKS["export"]
    assert RANKS["compat"] < RANKS["select"]  # Dataset builds the mlcroissant face on demand
    assert RANKS["formats"] == RANKS["export"]


def test_every_layer_folder_of_the_package_is_in_the_table():
    folders = {p.name for p in (ROOT / "guideloom").iterdir() if (p / "__init__.py").is_file()}
    stubs_only = {"dataset", "io", "types", "storage_format"}  # GuideLoom 1.1's paths
    assert sorted(folders - stubs_only - set(RANKS)) == []
    assert sorted(set(RANKS) - folders) == []


def test_the_check_catches_an_upward_import():
    graph = {"guideloom.read.x": {"guideloom.select.y", "guideloom.runtime.z", "guideloom.errors"},
             "guideloom.select.y": {"guideloom.read.x"}, "guideloom.runtime.z": set(),
             "guideloom.errors": set(), "guideloom.cli": {"guideloom.select.y"}}
    folder = {name: folder_of(name) for name in graph}
    assert folder["guideloom.read.x"] == "read"
    assert folder["guideloom.errors"] is None
    assert upward_imports(graph, RANKS, folder) == {"guideloom.read.x -> guideloom.select.y"}


def test_no_layer_imports_a_later_layer():
    graph = import_graph()
    folder = {name: folder_of(name) for name in graph}
    found = upward_imports(graph, RANKS, folder)
    assert sorted(found - set(KNOWN_UPWARD)) == [], (
        "upward imports against docs/architecture.md's layer table: move the code down, or "
        "list the import in KNOWN_UPWARD with the reason")
    assert sorted(set(KNOWN_UPWARD) - found) == [], "stale entries in KNOWN_UPWARD"
    assert all(reason.strip() for reason in KNOWN_UPWARD.values())
