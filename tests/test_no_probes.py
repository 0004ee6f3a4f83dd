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
