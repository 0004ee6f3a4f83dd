"""The code layer of a transform's recipe: normalised source and package identities.

A function or class of the user's own modules counts by its normalised source: the module file
is parsed once (``ast``), docstrings are dropped and the definition's node is dumped without
line numbers, so comments, docstrings and formatting (``ruff format``) do not count, any other
edit does. Code without source (``python -c``, a notebook cell gone) counts by its bytecode.
Installed code counts by its distribution's name and version, the standard library by the
Python version: their files are not read.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import importlib.metadata
import linecache
import logging
import os
import sys
import tokenize
import types
from typing import Any

from guideloom.cluster.shipping import OWN_PACKAGE, is_local_module
from guideloom.export.recipe.canonical import canonical_dump
from guideloom.export.recipe.running import (
    code_matches,
    definitions,
    first_line,
    older_than_process,
)

logger = logging.getLogger(__name__)

_Definition = ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef


def digest(text: str | bytes) -> str:
    """A sha256 (hex) of ``text``."""
    return hashlib.sha256(text.encode() if isinstance(text, str) else text).hexdigest()


_LOCAL: dict[tuple[str, str], bool] = {}


def is_local(module_name: str | None) -> bool:
    """Whether the module of this name is the user's own code (see
    :func:`guideloom.cluster.shipping.is_local_module`; ``__main__`` is)."""
    module = sys.modules.get(module_name or "")
    if module is None:
        return False
    if module_name == "__main__":  # a script's own code (its file, or bytecode without one)
        return True
    key = (str(module_name), str(getattr(module, "__file__", "")))
    found = _LOCAL.get(key)
    if found is None:
        found = _LOCAL[key] = is_local_module(module)
    return found


@functools.cache
def _distributions() -> dict[str, list[str]]:
    return dict(importlib.metadata.packages_distributions())


@functools.cache
def package_identity(module_name: str) -> tuple[str, str]:
    """``(name, version)`` of installed code: its distribution, ``python`` for the standard
    library and builtins, ``guideloom`` for guideloom itself."""
    top = module_name.split(".")[0]
    if top in sys.stdlib_module_names or top in sys.builtin_module_names or top == "builtins":
        return "python", f"{sys.version_info.major}.{sys.version_info.minor}"
    if top == OWN_PACKAGE:
        import guideloom

        return OWN_PACKAGE, str(guideloom.__version__)
    try:  # most import names are their distribution's
        return top, importlib.metadata.version(top)
    except (importlib.metadata.PackageNotFoundError, ValueError):
        pass
    for name in _distributions().get(top, []):  # (slow: every installed file list is read)
        try:
            return name, importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    version = getattr(sys.modules.get(top), "__version__", None)
    return top, str(version) if version is not None else "unknown"


def _strip_docstring(node: ast.AST) -> None:
    """Drop the docstring of a module, class or function (in place)."""
    body = getattr(node, "body", None)
    if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
        del body[0]


class SourceIndex:
    """The parsed module files of one fingerprint: each file parsed once, its definitions
    found by qualified name."""

    def __init__(self) -> None:
        self._files: dict[str, dict[str, list[ast.AST]] | None] = {}
        self._trusted: dict[str, bool] = {}  # files older than this process
        self._definitions: dict[str, dict[tuple[str, int], list[ast.AST]] | None] = {}
        self._texts: dict[str, str] = {}

    def _text(self, filename: str, module: types.ModuleType | None) -> str:
        if filename not in self._texts:
            self._texts[filename] = source_text(filename, module)
        return self._texts[filename]

    def _index(self, filename: str, module: types.ModuleType | None
               ) -> dict[str, list[ast.AST]] | None:
        if filename in self._files:
            return self._files[filename]
        text = self._text(filename, module)
        index: dict[str, list[ast.AST]] | None = None
        if text:
            try:
                tree = ast.parse(text, filename)
            except (SyntaxError, ValueError):
                logger.info("cannot parse %s: its code counts by bytecode", filename)
            else:
                _strip_docstring(tree)
                index = {}
                _collect(tree, "", index)
        self._files[filename] = index
        return index

    def runs_as_on_disk(self, fn: types.FunctionType) -> bool:
        """Whether ``fn``'s code is what its file says now: ``False`` when the file was edited
        after it was imported (not reloaded), so its source is not the code that runs (see
        :mod:`~guideloom.export.recipe.running`: a file older than the process is trusted,
        else the code is compared with the file's definition). Code without a file of its own
        (a notebook cell, ``python -c``) passes."""
        code = fn.__code__
        filename = code.co_filename
        if not os.path.isfile(filename):
            return True
        if filename not in self._trusted:
            self._trusted[filename] = older_than_process(filename)
        if self._trusted[filename]:
            return True
        if filename not in self._definitions:
            try:
                tree = ast.parse(self._text(filename, None), filename)
            except (SyntaxError, ValueError):
                self._definitions[filename] = None
            else:
                self._definitions[filename] = definitions(tree)
        found = self._definitions[filename]
        candidates = (found or {}).get((code.co_name, code.co_firstlineno), [])
        return any(code_matches(code, node) for node in candidates)

    def function_node(self, fn: types.FunctionType) -> ast.AST | None:
        """The definition (or lambda) of ``fn`` in its file, docstrings dropped."""
        code = fn.__code__
        index = self._index(code.co_filename, sys.modules.get(fn.__module__ or ""))
        if not index:
            return None
        if fn.__name__ == "<lambda>":
            found = index.get(f"<lambda>@{code.co_firstlineno}", [])
            return ast.Tuple(elts=list(found), ctx=ast.Load()) if found else None  # type: ignore[arg-type]
        qualname = getattr(code, "co_qualname", fn.__qualname__)  # (not functools.wraps')
        for node in index.get(_plain_qualname(qualname), []):
            if first_line(node) == code.co_firstlineno:
                return node
        return None

    @staticmethod
    def filename_of(cls: type) -> str | None:
        """The file of the module defining ``cls``."""
        return getattr(sys.modules.get(cls.__module__), "__file__", None)

    def class_node(self, cls: type) -> ast.AST | None:
        """The last definition of ``cls`` (by qualified name) in its module's file."""
        module = sys.modules.get(cls.__module__)
        filename = getattr(module, "__file__", None)
        if module is None or not filename:
            return None
        index = self._index(filename, module)
        found = (index or {}).get(_plain_qualname(cls.__qualname__), [])
        return found[-1] if found else None


def source_text(filename: str, module: types.ModuleType | None) -> str:
    """The source of ``filename`` as it is now: a file read anew (``linecache`` trusts a file of
    the same size and second), else what ``linecache`` holds (a notebook cell)."""
    if os.path.isfile(filename):
        try:
            with tokenize.open(filename) as fh:
                return fh.read()
        except (OSError, SyntaxError, UnicodeDecodeError):
            return ""
    return "".join(linecache.getlines(filename, vars(module) if module is not None else None))


def _plain_qualname(qualname: str) -> str:
    return qualname.replace(".<locals>", "")



def _collect(node: ast.AST, prefix: str, index: dict[str, list[ast.AST]]) -> None:
    """Index the definitions under ``node`` by qualified name (lambdas by line), their
    docstrings dropped on the way."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, _Definition):
            _strip_docstring(child)
            name = f"{prefix}{child.name}"
            index.setdefault(name, []).append(child)
            _collect(child, f"{name}.", index)
        elif isinstance(child, ast.Lambda):
            index.setdefault(f"<lambda>@{child.lineno}", []).append(child)
            _collect(child, prefix, index)
        else:
            _collect(child, prefix, index)


def node_digest(node: ast.AST) -> str:
    """The digest of a definition's normalised source (no line numbers, no docstrings)."""
    return digest(canonical_dump(node))


def bytecode_digest(code: types.CodeType) -> str:
    """The digest of ``code`` and its nested code objects where no source exists (constants
    by ``repr`` only when that holds no address)."""
    return digest(_code_text(code))


def _code_text(code: types.CodeType) -> str:
    consts = [_code_text(c) if isinstance(c, types.CodeType) else _const_text(c)
              for c in code.co_consts]
    return f"{code.co_code.hex()}|{code.co_names}|{code.co_varnames}|{consts}"


def _const_text(value: Any) -> str:
    if isinstance(value, bool | int | float | complex | str | bytes | type(None) | tuple
                  | frozenset):
        return repr(sorted(map(repr, value))) if isinstance(value, frozenset) else repr(value)
    return type(value).__name__
