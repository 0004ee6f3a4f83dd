"""The values layer of a transform's recipe: data hashed deterministically.

Values a transform reaches (globals, closures, defaults, partial arguments, an instance's
attributes) count by ``dask.base.tokenize(value, ensure_deterministic=True)``: numbers,
strings, containers, numpy arrays and dtypes, pandas objects and what pickles the same in every
process. An object it cannot hash deterministically (a socket, an open file, a lock) has no
token: the recipe then records it as such and an update refuses, naming it.
"""

from __future__ import annotations

import dataclasses
import logging
import types
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

_SCALARS = (bool, int, float, complex, str, bytes, type(None), np.generic, np.dtype)


def is_data(value: Any, depth: int = 0) -> bool:
    """Plain data: scalars, numpy arrays (not of objects), and lists, tuples, sets and dicts of
    them; hashed as one value."""
    if depth > 8:
        return False
    if isinstance(value, _SCALARS):
        return True
    if isinstance(value, np.ndarray):
        return bool(value.dtype != object)
    if isinstance(value, list | tuple | set | frozenset):
        return all(is_data(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return all(is_data(k, depth + 1) and is_data(v, depth + 1) for k, v in value.items())
    return False


def value_token(value: Any) -> str | None:
    """The deterministic token of ``value``, or ``None`` when it has none."""
    # dask is imported at the first value to hash, not with the export path (an export
    # without transforms, in process or forked, then never loads it: ~0.2 s of a cold export)
    from dask.tokenize import TokenizationError, tokenize

    try:
        return str(tokenize(_canonical(value), ensure_deterministic=True))
    except (TokenizationError, TypeError, ValueError, AttributeError, RuntimeError) as exc:
        logger.debug("no deterministic token for a %s: %s", type(value).__name__, exc)
        return None


def _canonical(value: Any) -> Any:
    """``value`` with its sets in a fixed order (``tokenize`` hashes a ``frozenset`` by its
    pickle, whose order follows the string hash seed of the process: a set of strings would
    get another token in every interpreter) and its dicts in their own order."""
    if isinstance(value, set | frozenset):
        return (type(value).__name__, sorted(_key(v) for v in value))
    if isinstance(value, list | tuple):
        return (type(value).__name__, [_canonical(v) for v in value])
    if isinstance(value, dict):
        # in insertion order: a transform iterating a dict sees that order (dask's own
        # normalisation sorts the items, which would take a reordered dict for the same)
        return (type(value).__name__, [(_canonical(k), _canonical(v)) for k, v in value.items()])
    return value


def _key(value: Any) -> str:
    from dask.tokenize import tokenize

    return str(tokenize(_canonical(value), ensure_deterministic=True))


def attributes(value: Any) -> dict[str, Any] | None:
    """The attributes of a config-like object (a ``SimpleNamespace``, a dataclass instance, an
    object with ``__dict__`` or ``__slots__``), or ``None`` for other objects."""
    if isinstance(value, type | types.ModuleType | types.FunctionType):
        return None
    if dataclasses.is_dataclass(value):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)
                if hasattr(value, f.name)} | dict(getattr(value, "__dict__", {}))
    found: dict[str, Any] = {}
    for cls in type(value).__mro__:
        slots = cls.__dict__.get("__slots__", ())
        for slot in [slots] if isinstance(slots, str) else slots:
            if slot not in ("__dict__", "__weakref__") and hasattr(value, slot):
                found[slot] = getattr(value, slot)
    state = getattr(value, "__dict__", None)
    if isinstance(state, dict):
        found.update(state)
    elif not found:
        return None
    return found


def describe(value: Any) -> str:
    """``a socket``: what an object is, for a refusal."""
    name = type(value).__name__
    return f"an {name}" if name[:1].lower() in "aeiou" else f"a {name}"
