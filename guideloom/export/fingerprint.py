"""Fingerprints of user code, for the job identity: the same code gives the same digest in every
process, on every machine and Python version; an edit anywhere the code reaches gives another.

A function is fingerprinted by its source text (bytecode only where no source exists, with
nested code objects hashed recursively, never by their ``repr`` with a memory address), plus
what it uses from its globals and closure: helper functions and classes of the user's own
modules (recursively), whether named directly or as ``module.helper`` of a module of the
user's own, and plain constants (numbers, strings, tuples, arrays) by value.
Installed packages count by name and ``__version__``, not content.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import sys
import types
from typing import Any

import numpy as np

from guideloom.cluster.shipping import is_local_module
from guideloom.read.fingerprint import local_fingerprint

CODE_HASH_HEX_CHARS = 16  # 64 bits of sha256
_PLAIN = (bool, int, float, complex, str, bytes, type(None))


def callable_name(fn: Any) -> str | None:
    """``module:qualname`` of a callable (``None`` passes through)."""
    if fn is None:
        return None
    module = getattr(fn, "__module__", None) or type(fn).__module__
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return f"{module}:{name}"


def callable_fingerprint(fn: Any) -> str | None:
    """``module:qualname#digest`` of a callable and everything of the user's it uses."""
    if fn is None:
        return None
    digest = hashlib.sha256()
    _feed(fn, digest, set())
    return f"{callable_name(fn)}#{digest.hexdigest()[:CODE_HASH_HEX_CHARS]}"


def _stable(value: Any) -> str | None:
    """A repr that does not depend on hash seeds or addresses (``None`` if there is none)."""
    if isinstance(value, _PLAIN):
        return repr(value)
    if isinstance(value, tuple | list):
        parts = [p for p in (_stable(v) for v in value) if p is not None]
        return None if len(parts) < len(value) else f"{type(value).__name__}({', '.join(parts)})"
    if isinstance(value, frozenset | set):
        parts = [p for p in (_stable(v) for v in value) if p is not None]
        return None if len(parts) < len(value) else f"set({', '.join(sorted(parts))})"
    if isinstance(value, dict):
        pairs = [(_stable(k), _stable(v)) for k, v in value.items()]
        if any(k is None or v is None for k, v in pairs):
            return None
        return f"dict({', '.join(sorted(f'{k}: {v}' for k, v in pairs))})"
    if isinstance(value, np.ndarray):
        return f"ndarray({value.dtype.str}, {value.shape}, " \
               f"{hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()})"
    if isinstance(value, np.dtype):
        return f"dtype({value.descr!r})"
    if isinstance(value, np.generic):
        return f"{value.dtype.str}({value.item()!r})"
    return None


def _source(obj: Any) -> str | None:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return None


def _code_text(code: types.CodeType) -> str:
    """Bytecode, names and constants of ``code`` and its nested code objects."""
    consts = [_code_text(c) if isinstance(c, types.CodeType) else (_stable(c) or type(c).__name__)
              for c in code.co_consts]
    return f"{code.co_code.hex()}|{code.co_names}|{code.co_varnames}|{consts}"


def _names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _feed_reference(name: str, value: Any, digest: Any, seen: set[int]) -> None:
    plain = _stable(value)
    if plain is not None:
        digest.update(f"{name}={plain};".encode())
        return
    if isinstance(value, types.ModuleType):
        digest.update(f"{name}=module:{value.__name__}@{_version_of(value)};".encode())
        return
    module = sys.modules.get(getattr(value, "__module__", "") or "")
    users_own = module is not None and (module.__name__ == "__main__" or is_local_module(module))
    if users_own and (inspect.isfunction(value) or inspect.isclass(value)):
        digest.update(f"{name}=".encode())
        _feed(value, digest, seen)
    elif callable(value):
        digest.update(f"{name}={callable_name(value)}@{_version_of(module)};".encode())


def _feed_module_uses(name: str, module: types.ModuleType, names: set[str], digest: Any,
                      seen: set[int], within: frozenset[int] = frozenset()) -> None:
    """Follow ``module.attr`` for a module of the user's own: every attribute of it whose name
    the code uses counts like a global of that name (helpers by their code, constants by
    value), and so on into its submodules. A name the code uses otherwise may be counted too:
    never less than what the code reaches."""
    if id(module) in within or not is_local_module(module):
        return
    attrs = vars(module)
    for attr in sorted(names & attrs.keys()):
        value = attrs[attr]
        _feed_reference(f"{name}.{attr}", value, digest, seen)
        if isinstance(value, types.ModuleType):
            _feed_module_uses(f"{name}.{attr}", value, names, digest, seen,
                              within | {id(module)})


def _version_of(module: types.ModuleType | None) -> str:
    top = sys.modules.get(module.__name__.split(".")[0]) if module is not None else None
    return str(getattr(top, "__version__", "?"))


def _feed(obj: Any, digest: Any, seen: set[int]) -> None:
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, functools.partial):
        digest.update(b"partial:")
        _feed(obj.func, digest, seen)
        for i, arg in enumerate(obj.args):
            _feed_reference(f"arg{i}", arg, digest, seen)
        for key in sorted(obj.keywords):
            _feed_reference(key, obj.keywords[key], digest, seen)
        return
    if inspect.isfunction(obj) or inspect.ismethod(obj):
        fn = obj.__func__ if inspect.ismethod(obj) else obj
        code = fn.__code__
        digest.update(f"function:{callable_name(fn)}:".encode())
        digest.update((_source(fn) or _code_text(code)).encode())
        names = _names(code)
        for name in sorted(names):
            if name in fn.__globals__:
                value = fn.__globals__[name]
                _feed_reference(name, value, digest, seen)
                if isinstance(value, types.ModuleType):
                    _feed_module_uses(name, value, names, digest, seen)
        for name, cell in zip(code.co_freevars, fn.__closure__ or (), strict=False):
            try:
                _feed_reference(name, cell.cell_contents, digest, seen)
            except ValueError:  # an empty cell
                continue
        if fn.__defaults__:
            _feed_reference("defaults", fn.__defaults__, digest, seen)
        return
    cls = obj if inspect.isclass(obj) else type(obj)
    digest.update(f"class:{callable_name(cls)}:".encode())
    digest.update((_source(cls) or "").encode())
    if not inspect.isclass(obj):  # a callable instance: its settings count too
        state = getattr(obj, "__dict__", {})
        for key in sorted(state):
            _feed_reference(key, state[key], digest, seen)


def data_fingerprint(index: bytes, locations: Any) -> str:
    """The identity of a local job's input data (now
    :func:`guideloom.read.fingerprint.local_fingerprint`, which a data root's
    :meth:`~guideloom.read.roots.DataRoot.fingerprint` uses)."""
    return local_fingerprint(index, locations)
