"""The read package asks no object whether it has a capability: what a byte source, a location
or a data root can do is declared (``guideloom/read/types.py``, ``guideloom/read/roots.py``)
and used directly, so mypy checks every use (issue 40, item 2).

A probe is ``getattr(x, "<name>"...)`` or ``hasattr(x, "<name>")`` with a string literal naming a
member of :class:`~guideloom.read.types.ByteSource`, :class:`~guideloom.read.types.Located` or
:class:`~guideloom.read.roots.DataRoot`; the names are read from those classes, so a capability
added to them is covered at once. Probes of library features (``getattr(os, "O_CLOEXEC", 0)``)
name no capability and are left alone.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

from guideloom.read.roots import DataRoot
from guideloom.read.types import ByteSource, Located

READ = Path(__file__).resolve().parents[1] / "guideloom" / "read"


def members(cls: type) -> set[str]:
    """The public names a class declares (its own and inherited, not ``object``'s)."""
    return {name for klass in inspect.getmro(cls) if klass is not object
            for name in vars(klass) if not name.startswith("_")}


CAPABILITIES = (members(ByteSource) | members(Located) | members(DataRoot)
                | {"read_many", "url", "is_remote"})


def probes(source: str) -> list[tuple[int, str]]:
    """``(line, name)`` of each ``getattr``/``hasattr`` naming a capability in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr") and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in CAPABILITIES):
            found.append((node.lineno, node.args[1].value))
    return found


def test_the_probe_finder_finds_a_probe():
    snippet = ("import os\n"
               "def f(source, loc):\n"
               "    fd = getattr(source, 'fd', None)\n"
               "    flags = getattr(os, 'O_CLOEXEC', 0)\n"
               "    return fd, flags, hasattr(loc, 'cache_key'), getattr(loc, name)\n")
    assert probes(snippet) == [(3, "fd"), (5, "cache_key")]


def test_the_capabilities_are_read_from_the_declarations():
    assert {"high_latency", "fd", "close", "read_tail", "readinto"} <= members(ByteSource)
    assert {"archive_size", "validator", "cache_key", "is_local", "next_header"} \
        <= members(Located)
    assert "os" not in CAPABILITIES
    assert "O_CLOEXEC" not in CAPABILITIES


def test_the_read_package_probes_no_capability():
    found = {str(path.relative_to(READ)): hits for path in sorted(READ.rglob("*.py"))
             if (hits := probes(path.read_text(encoding="utf-8")))}
    assert found == {}, ("declare the capability on ByteSource/Located/DataRoot and use it "
                         f"directly instead of probing for it: {found}")


GUIDELOOM = READ.parent


def root_asks(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` of each ``isinstance(..., RemoteRoot/LocalRoot)`` and each call of
    ``is_remote_root`` in ``source``: asking a data root which kind it is."""
    kinds = {"RemoteRoot", "LocalRoot"}
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else \
            func.attr if isinstance(func, ast.Attribute) else None
        if name == "is_remote_root":
            found.append((node.lineno, "is_remote_root"))
        elif name == "isinstance" and len(node.args) == 2:
            named = {n.id if isinstance(n, ast.Name) else n.attr
                     for n in ast.walk(node.args[1]) if isinstance(n, ast.Name | ast.Attribute)}
            found.extend((node.lineno, f"isinstance {k}") for k in sorted(named & kinds))
    return found


def test_the_root_ask_finder_finds_an_ask():
    snippet = ("from guideloom.read import roots\n"
               "def f(root, given):\n"
               "    if isinstance(root, roots.RemoteRoot):\n"
               "        return is_remote_root(given)\n"
               "    ok = isinstance(root, (Path, LocalRoot)) or isinstance(root, Path)\n"
               "    return roots.is_remote_root(root.url) or root.can_fork or ok\n")
    assert root_asks(snippet) == [(3, "isinstance RemoteRoot"), (4, "is_remote_root"),
                                  (5, "isinstance LocalRoot"), (6, "is_remote_root")]


def test_no_module_outside_the_read_package_asks_a_root_its_kind():
    found = {str(path.relative_to(GUIDELOOM)): hits for path in sorted(GUIDELOOM.rglob("*.py"))
             if READ not in path.parents
             and (hits := root_asks(path.read_text(encoding="utf-8")))}
    assert found == {}, ("ask the root for the capability instead (DataRoot.can_fork, "
                         f"local_folder(), high_latency, ...; guideloom/read/roots.py): {found}")
