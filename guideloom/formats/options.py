"""A format's options: a frozen dataclass with defaults, and the JSON Schema derived from it.

A format declares ``Options = MyOptions`` (see :class:`~guideloom.formats.base.ExportFormat`);
:func:`options_schema` turns the dataclass into the schema of its table in a workflow file
(``[output.<kind>]``): each field's type (``bool``, ``int``, ``float``, ``str``, a ``Literal``,
``list[...]`` of those; ``X | None`` is ``X``, TOML having no null) and the ``metadata`` of
:func:`option` (``description``, ``enum``, ``minimum``). A field without a default is required.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from typing import Any

_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string"}
SCHEMA_METADATA = ("description", "enum", "minimum", "exclusiveMinimum", "minLength", "pattern")


@dataclasses.dataclass(frozen=True)
class NoOptions:
    """The options of a format that takes none."""


def option(default: Any = dataclasses.MISSING, *, description: str = "", **schema: Any) -> Any:
    """A dataclass field of an options class, with its schema keywords (``enum``, ``minimum``
    …) and ``description`` kept for :func:`options_schema`."""
    unknown = sorted(set(schema) - set(SCHEMA_METADATA))
    if unknown:
        raise TypeError(f"option(): unsupported schema keyword(s) {unknown}; use "
                        f"{', '.join(SCHEMA_METADATA)}")
    meta = {"description": description, **schema} if description else dict(schema)
    return dataclasses.field(default=default, metadata=meta)


def _type_schema(hint: Any, where: str) -> dict[str, Any]:
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1:
            return _type_schema(args[0], where)
        return {"anyOf": [_type_schema(a, where) for a in args]}
    if origin is typing.Literal:
        return {"enum": list(typing.get_args(hint))}
    if origin in (list, tuple) and typing.get_args(hint):
        return {"type": "array", "items": _type_schema(typing.get_args(hint)[0], where)}
    if hint in _JSON_TYPES:
        return {"type": _JSON_TYPES[hint]}
    if hint is Any:
        return {}
    raise TypeError(f"{where}: cannot describe the type {hint!r} in JSON Schema; use bool, int, "
                    "float, str, a Literal or a list of those, or declare table_schema()")


def option_fields(options_cls: type) -> tuple[dataclasses.Field[Any], ...]:
    """The fields of an options dataclass (``TypeError`` if it is none)."""
    if not (isinstance(options_cls, type) and dataclasses.is_dataclass(options_cls)):
        raise TypeError(f"{options_cls!r}: a format's Options must be a dataclass")
    return dataclasses.fields(options_cls)


def options_schema(options_cls: type, description: str = "") -> dict[str, Any]:
    """The JSON Schema (an object, no other keys) of the options dataclass ``options_cls``."""
    hints = typing.get_type_hints(options_cls)
    properties: dict[str, Any] = {}
    required = []
    for f in option_fields(options_cls):
        schema = _type_schema(hints[f.name], f"{options_cls.__qualname__}.{f.name}")
        schema.update({k: v for k, v in f.metadata.items() if k in SCHEMA_METADATA})
        properties[f.name] = schema
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required.append(f.name)
    doc: dict[str, Any] = {"type": "object", "additionalProperties": False,
                           "properties": properties}
    if description:
        doc = {"description": description, **doc}
    if required:
        doc["required"] = required
    return doc


def has_required(options_cls: type) -> bool:
    """Whether some option has no default (its table must then be given)."""
    return any(f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
               for f in option_fields(options_cls))


def make_options(options_cls: type, given: Mapping[str, Any]) -> Any:
    """An instance of ``options_cls`` from ``given``; keys it has no field for are ignored
    (the Python API passes format options through unchecked, as it always did)."""
    names = {f.name for f in option_fields(options_cls)}
    return options_cls(**{k: v for k, v in given.items() if k in names})
