"""Writes the compatibility stubs from :mod:`guideloom.compat.aliases` (and checks them).

Each :class:`~guideloom.compat.aliases.Alias` becomes one ordinary module file at its old path:
a header line saying it is generated, the entry's docstring, ``from <target> import <names>``
and ``__all__``. A name the target serves on first access (a module ``__getattr__``, such as the
plots that load matplotlib lazily) is forwarded by the stub's own ``__getattr__``, so importing
the stub costs no more than importing the target.

Usage::

    python -m guideloom.compat.generate          # write every stub
    python -m guideloom.compat.generate --check  # exit 1 naming each stub that differs
"""

from __future__ import annotations

import argparse
import ast
import functools
import importlib
import importlib.util
import logging
import sys
import textwrap
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from guideloom.compat.aliases import ALIASES, ALL, MODULE, Alias

__all__ = ["HEADER", "PACKAGE", "Resolved", "differing", "main", "resolve", "stub_file",
           "stub_text", "write"]

logger = logging.getLogger(__name__)

#: The directory of the ``guideloom`` package the stubs are written into.
PACKAGE = Path(__file__).resolve().parents[1]

#: The first line of every generated stub.
HEADER = "# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`."

_LINE = 100  # the project's line length (ruff)


@dataclass(frozen=True)
class Resolved:
    """What one stub imports.

    Attributes:
        eager: Target module -> names imported from it when the stub is imported.
        renames: ``(old name, name in the target)`` pairs, bound after the imports.
        lazy: Exported name -> ``(target module, name there)``, forwarded on first access.
        exported: The stub's ``__all__``.
    """

    eager: dict[str, list[str]]
    renames: list[tuple[str, str]]
    lazy: dict[str, tuple[str, str]]
    exported: list[str]


def stub_file(path: str, package: Path = PACKAGE) -> Path:
    """The file of module ``path`` under ``package`` (a copy of the ``guideloom`` folder): a
    package's ``__init__.py`` where the source tree has a folder of that name."""
    parts = path.split(".")
    if parts[0] != "guideloom" or len(parts) < 2:
        raise ValueError(f"{path!r} is not a guideloom submodule")
    relative = Path(*parts[1:])
    if (PACKAGE / relative).is_dir():
        return package / relative / "__init__.py"
    return package / relative.with_suffix(".py")


@functools.lru_cache(maxsize=64)
def _bound_at_top(module: str) -> frozenset[str]:
    """Names a module's own top-level code binds (inside ``if``/``try`` too), read from its
    source: what a module ``__getattr__`` serves is not among them, however often it was used."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"alias target {module!r} is not importable")
    bound: set[str] = set()

    def visit(body: Sequence[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                bound.add(node.name)
            elif isinstance(node, ast.Import | ast.ImportFrom):
                bound.update((a.asname or a.name).split(".")[0] for a in node.names)
            elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    bound.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
            elif isinstance(node, ast.If | ast.Try | ast.With):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                visit(getattr(node, "finalbody", []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)

    visit(ast.parse(Path(spec.origin).read_text(encoding="utf-8")).body)
    return frozenset(bound)


def _names(target: str, names: tuple[str, ...] | str) -> Iterator[tuple[str, str]]:
    """``(name in the target, exported name)`` for one entry of :attr:`Alias.names`."""
    if names == ALL:
        public = getattr(importlib.import_module(target), "__all__", None)
        if public is None:
            raise ValueError(f"alias target {target} has no __all__ to re-export")
        yield from ((str(n), str(n)) for n in public)
        return
    for item in names:
        source, _, exported = (part.strip() for part in item.partition(" as "))
        yield source, exported or source


def resolve(alias: Alias) -> Resolved:
    """What the stub of ``alias`` imports, eagerly or on first access.

    Raises:
        ValueError: A name is exported twice, or a target lacks a listed name.
    """
    eager: dict[str, list[str]] = {}
    renames: list[tuple[str, str]] = []
    lazy: dict[str, tuple[str, str]] = {}
    exported: list[str] = []
    for target, names in alias.names.items():
        module = importlib.import_module(target)
        bound = _bound_at_top(target)
        for source, name in _names(target, names):
            if name in exported:
                raise ValueError(f"{alias.path}: {name} is exported twice")
            if not hasattr(module, source):
                raise ValueError(f"{alias.path}: {target} has no {source}")
            exported.append(name)
            if source not in bound:
                lazy[name] = (target, source)
                continue
            eager.setdefault(target, []).append(source)
            if name != source:
                renames.append((name, source))
    return Resolved(eager, sorted(renames), lazy, sorted(exported, key=_member_key))


def _member_key(name: str) -> tuple[int, str, str]:
    """ruff's (isort's) order of imported names: constants, classes, then the rest."""
    kind = 0 if name.isupper() and len(name) > 1 else 1 if name[:1].isupper() else 2
    return kind, name.lower(), name


def _from_import(module: str, names: list[str]) -> list[str]:
    names = sorted(set(names), key=_member_key)
    line = f"from {module} import {', '.join(names)}"
    if len(line) <= _LINE:
        return [line]
    return [f"from {module} import (", *(f"    {n}," for n in names), ")"]


def _string_list(prefix: str, items: list[str], end: str) -> list[str]:
    """``prefix["a", "b"<end>`` on one line if it fits, else one item a line (``end`` closes
    the list, e.g. ``"]"`` or ``", *_LAZY]"``)."""
    quoted = [f'"{i}"' for i in items]
    line = f"{prefix}[{', '.join(quoted)}{end}"
    if len(line) <= _LINE:
        return [line]
    closing = f"    {end.lstrip(', ')[:-1]}," if end != "]" else None
    return [f"{prefix}[", *(f"    {q}," for q in quoted), *([closing] if closing else []), "]"]


def _docstring(doc: str) -> str:
    """``doc`` in triple quotes, its words refilled where a line would pass the line length."""
    text = f'"""{doc}"""'
    if max(len(line) for line in text.splitlines()) <= _LINE:
        return text
    return textwrap.fill(" ".join(text.split()), width=_LINE, break_long_words=False,
                         break_on_hyphens=False)


def _private(name: str) -> bool:
    """``_x`` but not ``__x__``: bound by the stub, left out of its ``__all__``."""
    return name.startswith("_") and not name.startswith("__")


def _module_target(alias: Alias) -> str | None:
    """The target module of a :data:`~guideloom.compat.aliases.MODULE` entry, else ``None``."""
    targets = [t for t, names in alias.names.items() if names == MODULE]
    if not targets:
        return None
    if len(alias.names) != 1:
        raise ValueError(f"{alias.path}: a MODULE entry has one target and no other names")
    importlib.import_module(targets[0])
    return targets[0]


def stub_text(alias: Alias) -> str:
    """The source of the stub module for ``alias``."""
    lines = [HEADER, _docstring(alias.doc), ""]
    target = _module_target(alias)
    if target is not None:
        package, _, name = target.rpartition(".")
        lines += ["import sys", "from typing import TYPE_CHECKING", "",
                  f"from {package} import {name} as _module", "",
                  "if TYPE_CHECKING:  # what a type checker sees: the module's names",
                  f"    from {target} import *  # noqa: F403", "",
                  "sys.modules[__name__] = _module"]
        return "\n".join(lines) + "\n"
    r = resolve(alias)
    if r.lazy:
        lines += ["import importlib", "from typing import Any", ""]
    for module in sorted(r.eager):
        lines += _from_import(module, r.eager[module])
    if r.eager:
        lines.append("")
    if r.renames:
        lines += [f"{old} = {source}" for old, source in r.renames] + [""]
    if r.lazy:
        lines.append("#: Names the target serves on first access (its module ``__getattr__``).")
        entries = [f'    "{name}": ("{t}", "{s}"),' for name, (t, s) in sorted(r.lazy.items())]
        lines += ["_LAZY = {", *entries, "}", ""]
    eager_names = [n for n in r.exported if n not in r.lazy and not _private(n)]
    lines += _string_list("__all__ = ", eager_names, ", *_LAZY]" if r.lazy else "]")
    if r.lazy:
        lines += [
            "", "",
            "def __getattr__(name: str) -> Any:",
            "    if name not in _LAZY:",
            '        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")',
            "    module, source = _LAZY[name]",
            "    return getattr(importlib.import_module(module), source)",
            "", "",
            "def __dir__() -> list[str]:",
            "    return sorted(set(globals()) | set(_LAZY))",
        ]
    return "\n".join(lines) + "\n"


def differing(package: Path = PACKAGE) -> list[Path]:
    """The stub files under ``package`` that are missing or differ from what the table
    generates."""
    out = []
    for alias in ALIASES:
        path = stub_file(alias.path, package)
        if not path.is_file() or path.read_text(encoding="utf-8") != stub_text(alias):
            out.append(path)
    return out


def write(package: Path = PACKAGE) -> list[Path]:
    """Write every stub under ``package`` that differs from the table; the files written."""
    stale = differing(package)
    for alias in ALIASES:
        path = stub_file(alias.path, package)
        if path in stale:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(stub_text(alias), encoding="utf-8")
            logger.debug("wrote the stub %s", path)
    return stale


def main(argv: Sequence[str] | None = None) -> int:
    """Write (or with ``--check``, compare) every stub; the exit status of the command."""
    parser = argparse.ArgumentParser(prog="python -m guideloom.compat.generate",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if a stub differs from the table")
    args = parser.parse_args(argv)
    paths = differing() if args.check else write()
    verb = "stale" if args.check else "wrote"
    for path in paths:
        sys.stdout.write(f"{verb}: {path.relative_to(PACKAGE.parent)}\n")
    return 1 if args.check and paths else 0


if __name__ == "__main__":
    raise SystemExit(main())
