"""The values layer of a transform's recipe: data hashed deterministically.

Values a transform reaches (globals, closures, defaults, partial arguments, an instance's
attributes) count by a deterministic token. Plain data (:func:`is_data`: numbers, strings,
bytes, numpy arrays, scalars and dtypes, and lists, tuples, sets and dicts of them) is hashed
here, each value with its type, without dask (:func:`data_token`: a recipe of plain values
never loads it, about 0.1 s of a fresh process); every other value by
``dask.base.tokenize(value, ensure_deterministic=True)`` (pandas objects and what pickles the
same in every process). An object that cannot be hashed deterministically (a socket, an open
file, a lock) has no token: the recipe then records it as such and an update refuses, naming
it.
"""

from __future__ import annotations

import dataclasses
import logging
import struct
import types
from typing import Any

import blake3
import numpy as np

logger = logging.getLogger(__name__)

_SCALARS = (bool, int, float, complex, str, bytes, type(None), np.generic, np.dtype)
#: The prefix of :func:`data_token`'s tokens (dask's tokens, of other values, have none): a
#: recipe recorded before plain data was hashed here is told apart (:func:`same_scheme`).
DATA_TOKEN_PREFIX = "data1:"


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
    if is_data(value):
        return data_token(value)
    # dask is imported at the first object to hash, not with the export path (an export
    # without transforms, or with transforms reaching plain data only, never loads it)
    from dask.tokenize import TokenizationError, tokenize

    try:
        return str(tokenize(_canonical(value), ensure_deterministic=True))
    except (TokenizationError, TypeError, ValueError, AttributeError, RuntimeError) as exc:
        logger.debug("no deterministic token for a %s: %s", type(value).__name__, exc)
        return None


def data_token(value: Any) -> str:
    """The token of plain data (:func:`is_data`): BLAKE3 of each value's type and contents,
    framed so that no two values share an encoding (``1``, ``True``, ``1.0``,
    ``np.float64(1)`` and ``"1"`` differ; ``("ab", "c")`` and ``("a", "bc")`` too); a dict in
    its own order, a set in the order of its items' tokens; the same in every process."""
    hasher = blake3.blake3()
    _feed(hasher, value)
    return DATA_TOKEN_PREFIX + hasher.hexdigest()[:32]


def same_scheme(a: str, b: str) -> bool:
    """Whether two value tokens were made the same way (both of plain data here, or both by
    dask): tokens made two ways differ whatever the values."""
    return a.startswith(DATA_TOKEN_PREFIX) == b.startswith(DATA_TOKEN_PREFIX)


def _feed(hasher: Any, value: Any) -> None:
    """Hash ``value`` (plain data) as a tag, a length and its bytes, containers item by item."""
    if isinstance(value, np.ndarray):
        array = np.ascontiguousarray(value)
        _leaf(hasher, b"ndarray", repr((array.dtype.descr, array.dtype.str, array.shape))
              .encode())
        hasher.update(struct.pack("<Q", array.nbytes))
        hasher.update(array.reshape(-1).view(np.uint8).data if array.nbytes else b"")
    elif isinstance(value, np.generic):
        _leaf(hasher, b"npscalar", repr((value.dtype.descr, value.dtype.str)).encode()
              + b"\0" + value.tobytes())
    elif isinstance(value, np.dtype):
        _leaf(hasher, b"dtype", repr((value.descr, value.str)).encode())
    elif isinstance(value, bool) or value is None:
        _leaf(hasher, b"const", repr(value).encode())
    elif isinstance(value, int):
        _leaf(hasher, b"int", str(value).encode())
    elif isinstance(value, float):
        _leaf(hasher, b"float", struct.pack("<d", value))
    elif isinstance(value, complex):
        _leaf(hasher, b"complex", struct.pack("<dd", value.real, value.imag))
    elif isinstance(value, str):
        _leaf(hasher, b"str", value.encode("utf-8", "surrogatepass"))
    elif isinstance(value, bytes):
        _leaf(hasher, b"bytes", value)
    elif isinstance(value, dict):
        _open(hasher, type(value), len(value))
        for key, item in value.items():
            _feed(hasher, key)
            _feed(hasher, item)
    elif isinstance(value, set | frozenset):
        _open(hasher, type(value), len(value))
        for token in sorted(data_token(item) for item in value):
            _leaf(hasher, b"item", token.encode())
    elif isinstance(value, list | tuple):
        _open(hasher, type(value), len(value))
        for item in value:
            _feed(hasher, item)
    else:  # is_data() let nothing else through
        raise TypeError(f"not plain data: {type(value).__name__}")


def _leaf(hasher: Any, tag: bytes, payload: bytes) -> None:
    hasher.update(tag + b":" + struct.pack("<Q", len(payload)))
    hasher.update(payload)


def _open(hasher: Any, kind: type, count: int) -> None:
    name = kind.__name__.encode()
    hasher.update(b"(" + name + b":" + struct.pack("<Q", count))


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
