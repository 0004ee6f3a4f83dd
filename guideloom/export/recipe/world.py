"""The world layer of a transform's recipe: code that reads what the recipe cannot see.

A transform whose code (or code it reaches in the user's modules) reads the environment, files,
the clock or an unseeded random generator makes results the recipe cannot fingerprint: an
update refuses unless the user names the code's version (``code_version=``). Found from the
code's syntax tree, names resolved through the function's globals (so ``from os import
getenv`` and ``import numpy as xp`` are seen). Conservative: a name that may read counts.

What counts (:data:`READINGS`):

- the environment: ``os.environ`` (any use), ``os.getenv``, ``os.environb``, ``os.getenvb``;
- files: ``open``, ``io.open``, ``codecs.open``, ``os.listdir``/``scandir``/``walk``/``stat``,
  ``os.path.exists``/``getsize``/``getmtime``/``isfile``/``isdir``, ``glob.*``, ``shutil.*``,
  ``numpy.load``/``loadtxt``/``genfromtxt``/``fromfile``/``memmap``, ``pandas.read_*``,
  ``h5py.File``, ``json.load``, ``pickle.load``, ``tomllib.load``, ``zarr.open*``, and any
  method called ``read_text``, ``read_bytes``, ``iterdir``, ``glob``, ``rglob``;
- the clock: ``time.*``, ``datetime.*.now``/``today``/``utcnow`` and any method of those names;
- randomness: ``random.*``, ``numpy.random.*``, ``os.urandom``, ``uuid.uuid1``/``uuid4``,
  ``secrets.*`` — except a generator made with a seed (``numpy.random.default_rng(0)``,
  ``RandomState(0)``, ``random.Random(0)``...).

Not seen: what installed packages read inside their own code, and reads hidden behind
``getattr``/strings; name those with ``code_version=`` too.
"""

from __future__ import annotations

import ast
import builtins
import fnmatch
import functools
import logging
import os
import re
import types
from collections.abc import Iterable, Mapping
from typing import Any

logger = logging.getLogger(__name__)

READINGS: dict[str, tuple[str, ...]] = {
    "os.environ": ("os.environ", "os.environ.*", "os.getenv", "os.environb", "os.environb.*",
                   "os.getenvb", "posix.environ", "posix.environ.*"),
    "files": ("io.open", "builtins.open", "codecs.open", "os.listdir", "os.scandir", "os.walk",
              "os.stat", "posix.stat", "posix.listdir", "posix.scandir", "os.path.exists",
              "os.path.getsize", "os.path.getmtime", "os.path.isfile", "os.path.isdir",
              "posixpath.*", "glob.*", "shutil.*", "numpy.load", "numpy.loadtxt",
              "numpy.genfromtxt", "numpy.fromfile", "numpy.memmap", "pandas.read_*", "h5py.File",
              "json.load", "pickle.load", "tomllib.load", "zarr.open*", "*.read_text",
              "*.read_bytes", "*.iterdir", "*.glob", "*.rglob"),
    "the clock": ("time.*", "datetime.*.now", "datetime.*.today", "datetime.*.utcnow",
                  "*.now", "*.today", "*.utcnow"),
    "an unseeded random generator": ("random.*", "numpy.random.*", "os.urandom", "posix.urandom",
                                     "uuid.uuid1", "uuid.uuid4", "secrets.*"),
}
# generators that are deterministic when given a seed (any argument)
SEEDED = ("random.Random", "numpy.random.default_rng", "numpy.random.RandomState",
          "numpy.random.Generator", "numpy.random.SeedSequence", "numpy.random.PCG64",
          "numpy.random.PCG64DXSM", "numpy.random.MT19937", "numpy.random.Philox",
          "numpy.random.SFC64", "numpy.random._generator.default_rng",
          "numpy.random.mtrand.RandomState", "numpy.random._generator.Generator")


def world_readings(node: ast.AST | None, names: Iterable[str], globals_: Mapping[str, Any]
                   ) -> list[str]:
    """What ``node`` (a function's or class's syntax tree; ``None``: only ``names`` are known,
    from bytecode) reads of the world: ``["os.environ", "the clock"]``, sorted."""
    found: set[str] = set()
    if node is None:
        for name in names:
            kind = _kind(_resolve(name, [], globals_)) if name in globals_ else None
            if kind:
                found.add(kind)
        return sorted(found)
    calls: list[ast.Call] = []
    chains: list[ast.Attribute | ast.Name] = []
    inner: set[int] = set()  # a chain's inner parts (``np.random`` of ``np.random.rand``)
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            if sub.args or sub.keywords:
                calls.append(sub)
        elif isinstance(sub, ast.Attribute | ast.Name):
            chains.append(sub)
            if isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Attribute | ast.Name):
                inner.add(id(sub.value))
    seeded: set[int] = set()
    for call in calls:
        chain = _chain(call.func)
        if chain and _resolve(chain[0], chain[1:], globals_) in SEEDED:
            seeded.add(id(call.func))
    for sub in chains:
        if id(sub) in seeded or id(sub) in inner:  # (the whole chain is matched)
            continue
        chain = _chain(sub)
        if not chain:
            if isinstance(sub, ast.Attribute):  # a method of something computed
                kind = _kind(f"?.{sub.attr}")
                if kind:
                    found.add(kind)
            continue
        kind = _kind(_resolve(chain[0], chain[1:], globals_))
        if kind:
            found.add(kind)
    return sorted(found)


def _chain(node: ast.AST) -> list[str] | None:
    """``["np", "random", "rand"]`` of ``np.random.rand``; ``None`` when not a plain chain."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def _resolve(root: str, rest: list[str], globals_: Mapping[str, Any]) -> str:
    """The dotted name a chain means: its first name looked up in the globals (else the
    builtins, else a local variable, ``?``)."""
    if root in globals_:
        qualified = _qualified(globals_[root])
    elif hasattr(builtins, root):
        qualified = _qualified(getattr(builtins, root)) or f"builtins.{root}"
    else:
        qualified = "?"
    return ".".join([qualified or "?", *rest])


def _qualified(value: Any) -> str | None:
    if isinstance(value, types.ModuleType):
        return value.__name__
    if isinstance(value, os._Environ):
        return "os.environ"
    module = getattr(value, "__module__", None)
    owner = getattr(value, "__self__", None)
    if module is None and owner is not None:  # a bound builtin: from random import random
        module = type(owner).__module__
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    if isinstance(module, str) and isinstance(name, str):
        return f"{module}.{name}"
    return None


_MATCHERS = [(kind, re.compile("|".join(fnmatch.translate(p) for p in patterns)))
             for kind, patterns in READINGS.items()]


@functools.lru_cache(maxsize=4096)
def _kind(qualified: str | None) -> str | None:
    """Which reading of the world a dotted name is (``None``: none)."""
    if not qualified:
        return None
    for kind, matcher in _MATCHERS:
        if matcher.match(qualified):
            return kind
    return None
