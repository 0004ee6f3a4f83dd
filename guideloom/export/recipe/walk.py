"""The walk over everything a transform reaches, into named recipe components.

Each component is one line of the recipe, ``"<kind> <name>": digest``:

- ``code mymod.scale``: the normalised source of a function or class of the user's own
  modules (:mod:`~guideloom.export.recipe.code`);
- ``package numpy``: installed code, by distribution version (``python`` for the standard
  library);
- ``value mymod.NORM.std``: a value the code reaches, by its deterministic token
  (:mod:`~guideloom.export.recipe.values`); config objects (``SimpleNamespace``, dataclass and
  other instances, with ``__dict__`` or ``__slots__``) attribute by attribute;
- ``world os.environ``: the code reads the world (:mod:`~guideloom.export.recipe.world`);
- ``opaque mymod.HANDLE``: a value with no deterministic token;
- ``stale mymod.scale``: the function's file was edited after it was imported: its source is
  not the code that runs.

What is walked: the function, its globals and the attributes of the user's modules it names,
its closure, positional and keyword-only defaults, ``self`` of bound methods, partial
functions with their arguments, callable instances, classes with their bases, methods and
class attributes, helpers held in dicts, lists, tuples and sets.
"""

from __future__ import annotations

import functools
import inspect
import logging
import sys
import types
from typing import Any

from guideloom.export.recipe.code import (
    SourceIndex,
    bytecode_digest,
    digest,
    is_local,
    node_digest,
    package_identity,
)
from guideloom.export.recipe.values import attributes, describe, is_data, value_token
from guideloom.export.recipe.world import world_readings

logger = logging.getLogger(__name__)

_UNSET = object()
SCANNED_ITEMS = 10_000  # longer containers of an installed object are not looked into
_WRAPPED = ("__wrapped__", "py_func", "pyfunc", "func")
MAX_DEPTH = 12  # nested containers and attributes followed; deeper ones hash whole
_SKIPPED_CLASS_ATTRS = frozenset({"__dict__", "__weakref__", "__module__", "__qualname__",
                                  "__doc__", "__slots__", "__annotations__", "__hash__",
                                  "__dataclass_fields__", "__dataclass_params__",
                                  "__match_args__", "__orig_bases__", "__parameters__",
                                  "__abstractmethods__", "_abc_impl", "__firstlineno__",
                                  "__static_attributes__"})


class Walk:
    """The components of everything one transform reaches (see the module's description)."""

    def __init__(self, sources: SourceIndex | None = None) -> None:
        self.components: dict[str, str] = {}
        self.sources = sources or SourceIndex()
        self._seen: set[int] = set()
        self._attributes: set[tuple[str, str]] = set()  # (module, name) of the user's reached

    def root(self, fn: Any) -> None:
        """Walk a transform (a function, partial, bound method, class or callable instance)."""
        self.value(_global_name(fn) or "the transform", fn, 0)

    def _first(self, obj: Any) -> bool:
        if id(obj) in self._seen:
            return False
        self._seen.add(id(obj))
        return True

    def package(self, module_name: str) -> None:
        """Installed code: its distribution and version."""
        name, version = package_identity(module_name)
        self.components[f"package {name}"] = version

    def function(self, fn: types.FunctionType, name: str | None = None) -> None:
        """A function: its source (or bytecode), what it reads of the world, and everything it
        names. A lambda or a nested function (several may share a qualified name) is named
        by where it was reached (``name``)."""
        if not self._first(fn):
            return
        module = fn.__module__ or ""
        code = fn.__code__
        if module and not is_local(module):
            self.package(module)
            self._held_by(f"{module}.{code.co_qualname}", fn)
            return
        qual = f"{module}.{getattr(code, 'co_qualname', fn.__qualname__)}"
        if name and ("<lambda>" in qual or "<locals>" in qual):
            qual = name
        if f"code {qual}" in self.components:  # another function of that name (a wrapper's
            qual = name if name and f"code {name}" not in self.components else f"{qual}'"
        node = self.sources.function_node(fn)
        self.components[f"code {qual}"] = node_digest(node) if node else bytecode_digest(code)
        if node is not None and not self.sources.runs_as_on_disk(fn):
            self.components[f"stale {qual}"] = code.co_filename
        names = _names(code)
        for reading in world_readings(node, names, fn.__globals__):
            self.components.setdefault(f"world {reading}", qual)
        home = str(fn.__globals__.get("__name__", module))
        for name in sorted(names):
            if name in fn.__globals__:
                self.reference(f"{home}.{name}", fn.__globals__[name], names)
        for var, cell in zip(code.co_freevars, fn.__closure__ or (), strict=False):
            try:
                contents = cell.cell_contents
            except ValueError:  # not yet bound
                continue
            self.reference(f"{qual}.{var}", contents, names)
        positional = code.co_varnames[:code.co_argcount]
        defaults = fn.__defaults__ or ()
        for arg, value in zip(positional[len(positional) - len(defaults):], defaults,
                              strict=True):
            self.value(f"{qual}(default {arg})", value, 1)
        for arg, value in sorted((fn.__kwdefaults__ or {}).items()):
            self.value(f"{qual}(default {arg})", value, 1)

    def _held_by(self, qual: str, fn: types.FunctionType) -> None:
        """What an installed function holds of the user's: its closure and defaults (a
        library's ``make_transform(my_fn)`` returns such a closure)."""
        cells = zip(fn.__code__.co_freevars, fn.__closure__ or (), strict=False)
        held = {var: cell.cell_contents for var, cell in cells if _bound(cell)}
        held |= {f"default {i}": v for i, v in enumerate(fn.__defaults__ or ())}
        held |= {f"default {k}": v for k, v in (fn.__kwdefaults__ or {}).items()}
        for key, value in sorted(held.items()):
            if _holds_code(value):
                self.value(f"{qual}.{key}", value, 1)

    def klass(self, cls: type) -> None:
        """A class: its source, its bases, methods and class attributes."""
        if not self._first(cls):
            return
        module = cls.__module__
        if not is_local(module):
            self.package(module)
            return
        qual = f"{module}.{cls.__qualname__}"
        node = self.sources.class_node(cls)
        self.components[f"code {qual}"] = (node_digest(node) if node is not None
                                           else digest(repr(sorted(vars(cls)))))
        for base in cls.__bases__:
            if base is not object:
                self.klass(base)
        for key, attr in sorted(vars(cls).items()):
            if key in _SKIPPED_CLASS_ATTRS:
                continue
            for fn in _functions_of(attr):
                if node is None or fn.__code__.co_filename == self.sources.filename_of(cls):
                    self.function(fn)  # (not those a decorator made: @dataclass's __eq__)
            if _functions_of(attr) or inspect.ismemberdescriptor(attr) \
                    or inspect.isgetsetdescriptor(attr):
                continue
            self.value(f"{qual}.{key}", attr, 1)

    def reference(self, name: str, value: Any, names: set[str]) -> None:
        """A name code uses: a module of the user's own is followed into the attributes the
        code names (``helpers.scale``), installed modules count by version, other values by
        :meth:`value`."""
        if isinstance(value, types.ModuleType):
            if not is_local(value.__name__):
                self.package(value.__name__)
                return
            attrs = vars(value)
            for attr in sorted(names & attrs.keys()):
                if (value.__name__, attr) not in self._attributes:
                    self._attributes.add((value.__name__, attr))
                    self.reference(f"{value.__name__}.{attr}", attrs[attr], names)
            return
        self.value(name, value, 0)

    def value(self, name: str, value: Any, depth: int) -> None:
        """A value reached as ``name``: data by token, code by :meth:`function`/:meth:`klass`,
        containers item by item, objects attribute by attribute."""
        if is_data(value):
            self._token(name, value)
        elif isinstance(value, types.FunctionType | type):
            qual = f"{value.__module__}.{value.__qualname__}"
            if qual != name:  # which code is wired here: HELPERS["a"] = scale
                self.components[f"value {name}"] = (name if "<" in qual else qual)
            if isinstance(value, type):
                self.klass(value)
            else:
                self.function(value, name)
        elif isinstance(value, types.ModuleType):
            self.reference(name, value, set())
        elif depth > MAX_DEPTH:
            self._token(name, value)
        elif isinstance(value, functools.partial):
            self.value(f"{name}.func", value.func, depth + 1)
            for i, arg in enumerate(value.args):
                self.value(f"{name}.args[{i}]", arg, depth + 1)
            for key, arg in sorted(value.keywords.items()):
                self.value(f"{name}.keywords[{key!r}]", arg, depth + 1)
        elif isinstance(value, types.MethodType):
            self.value(f"{name}.__func__", value.__func__, depth + 1)
            owner = value.__self__
            self.value(_global_name(owner) or f"{name}.__self__", owner, depth + 1)
        elif isinstance(value, types.BuiltinFunctionType | types.BuiltinMethodType) \
                or type(value).__name__ in ("ufunc", "method-wrapper", "wrapper_descriptor",
                                            "method_descriptor"):
            self._builtin(name, value, depth)
        elif isinstance(value, dict):
            self._container(name, value, list(value.items()), depth, keyed=True)
        elif isinstance(value, list | tuple):
            self._container(name, value, list(enumerate(value)), depth)
        elif isinstance(value, set | frozenset):
            self._token(name, value)  # of functions: opaque (no order to name them by)
        else:
            self._object(name, value, depth)

    def _builtin(self, name: str, value: Any, depth: int) -> None:
        owner = getattr(value, "__self__", None)
        if owner is None or isinstance(owner, types.ModuleType):
            module = getattr(value, "__module__", None) or getattr(owner, "__name__", "builtins")
            self.package(str(module))
        else:  # a method of an object: CONFIG.get
            self.value(f"{name}.__self__", owner, depth + 1)

    def _container(self, name: str, container: Any, items: list[tuple[Any, Any]], depth: int,
                   keyed: bool = False) -> None:
        """A dict, list or tuple holding code or objects: its keys, then item by item."""
        if keyed and not all(is_data(k) for k, _ in items):
            self._token(name, container)
            return
        if not self._first(container):
            return
        keys = [repr(k) for k, _ in items] if keyed else len(items)  # (a dict's order too)
        self._token(f"{name} ({type(container).__name__} keys)", keys)
        for key, item in sorted(items, key=lambda kv: repr(kv[0])) if keyed else items:
            self.value(f"{name}[{key!r}]", item, depth + 1)

    def _object(self, name: str, value: Any, depth: int) -> None:
        cls = type(value)
        local = is_local(cls.__module__)
        if local:
            self.klass(cls)
        state = attributes(value) if local or _config_like(value) else None
        if state is None:
            if hasattr(value, "__wrapped__") and value_token(value) is None:
                # a decorator's object (functools.lru_cache): its type and what it wraps
                self.package(cls.__module__)
                self.components[f"value {name} (type)"] = f"{cls.__module__}.{cls.__qualname__}"
            else:
                self._token(name, value)
            self._code_inside(name, value, depth)
            return
        if not self._first(value):
            return
        if not local:
            self.package(cls.__module__)
        self.components[f"value {name} (type)"] = f"{cls.__module__}.{cls.__qualname__}"
        for key, attr in sorted(state.items()):
            self.value(f"{name}.{key}", attr, depth + 1)

    def _code_inside(self, name: str, value: Any, depth: int) -> None:
        """The user's code an installed object holds (``numba.njit``'s ``py_func``,
        ``np.vectorize``'s ``pyfunc``, a wrapper's ``__wrapped__``, a function among its
        attributes): its token names such code by reference only, so it is walked too."""
        state = attributes(value) or {}
        for key in _WRAPPED:
            if key not in state and hasattr(value, key):
                state[key] = getattr(value, key)
        for key, attr in sorted(state.items(), key=lambda kv: str(kv[0])):
            if _holds_code(attr):
                self.value(f"{name}.{key}", attr, depth + 1)

    def _token(self, name: str, value: Any) -> None:
        token = value_token(value)
        if token is None:
            self.components[f"opaque {name}"] = describe(value)
        else:
            self.components[f"value {name}"] = token


def _bound(cell: Any) -> bool:
    try:
        return cell.cell_contents is not _UNSET
    except ValueError:  # not yet bound
        return False


def _holds_code(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` is or holds (in a dict, list or tuple) a function, partial, class or
    instance of the user's own code."""
    if isinstance(value, types.FunctionType | functools.partial | types.MethodType):
        return True
    if isinstance(value, type):
        return is_local(value.__module__)
    if isinstance(value, dict) and depth < 3 and len(value) <= SCANNED_ITEMS:
        return any(_holds_code(v, depth + 1) for v in value.values())
    if isinstance(value, list | tuple) and depth < 3 and len(value) <= SCANNED_ITEMS:
        return any(_holds_code(v, depth + 1) for v in value)
    return is_local(type(value).__module__)


def _config_like(value: Any) -> bool:
    """An installed type whose instances are plain settings (walked attribute by attribute)."""
    import dataclasses

    return isinstance(value, types.SimpleNamespace) or dataclasses.is_dataclass(value)


def _functions_of(attr: Any) -> list[types.FunctionType]:
    """The functions behind a class attribute: a method, static or class method, property."""
    if isinstance(attr, staticmethod | classmethod):
        attr = attr.__func__
    if isinstance(attr, property):
        return [f for f in (attr.fget, attr.fset, attr.fdel) if isinstance(f, types.FunctionType)]
    return [attr] if isinstance(attr, types.FunctionType) else []


def _names(code: types.CodeType) -> set[str]:
    """Every name ``code`` and its nested code objects use (globals and attributes)."""
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _global_name(obj: Any) -> str | None:
    """``module.NAME`` when ``obj`` is a global of its class's (or its own) module."""
    if isinstance(obj, types.FunctionType | type):
        return f"{obj.__module__}.{obj.__qualname__}"
    for module_name in {getattr(obj, "__module__", None), type(obj).__module__}:
        module = sys.modules.get(module_name or "")
        if module is None or not is_local(module.__name__):
            continue
        for key, item in vars(module).items():
            if item is obj:
                return f"{module.__name__}.{key}"
    return None
