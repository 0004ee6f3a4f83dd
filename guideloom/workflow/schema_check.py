"""A validator for the part of JSON Schema (draft 2020-12) that ``schema.json`` uses.

``jsonschema`` builds its format checkers when it is imported, and with Jupyter installed that
compiles the grammars of ``rfc3987-syntax`` (seconds, on every ``guideloom run``). Workflow
files need none of that: this module checks the keywords ``schema.json`` uses, in the order
``jsonschema`` does, and reports each problem with the attributes ``jsonschema`` errors have
(``validator``, ``validator_value``, ``instance``, ``schema``, ``absolute_path``, ``context``),
so :func:`guideloom.workflow.schema.describe_error` reads either. Types are TOML's: ``2.0`` is a
float, never an ``"integer"`` (:func:`is_type`), and the shipped patterns end in ``$(?!\n)``,
which ends the text in Python's ``re`` and in ECMA-262 alike (a bare ``$`` lets Python take
``"sync\n"``). A schema using any other
keyword is refused when it is checked, never silently half-applied; the tests compare the
results with ``jsonschema`` on many documents.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

# keywords that check nothing on their own ("then"/"else" are applied by "if")
PASSIVE = frozenset({"$schema", "$id", "title", "description", "$defs", "then", "else"})
Schema = Mapping[str, Any]
JsonPath = tuple[str | int, ...]
SUBSCHEMA_KEYWORDS = frozenset({"properties", "additionalProperties", "items", "propertyNames",
                                "anyOf", "allOf", "if", "then", "else", "$defs"})


@dataclass
class SchemaViolation:
    """One place where a document breaks the schema (the attributes of a jsonschema error).

    Attributes:
        validator: The keyword that failed (``"type"``, ``"required"`` …).
        validator_value: That keyword's value in the schema.
        instance: The value that failed.
        schema: The (sub)schema holding the keyword.
        absolute_path: Keys and list indices from the document's root to ``instance``.
        message: A plain description (``describe_error`` writes the user's message).
        context: For ``anyOf``: the problems of every alternative.
    """

    validator: str
    validator_value: Any
    instance: Any
    schema: Mapping[str, Any]
    absolute_path: tuple[str | int, ...]
    message: str
    context: list[SchemaViolation] = field(default_factory=list)


Found = Iterator["SchemaViolation | tuple[str]"]  # a subschema's violation, or (message,)


class SubsetValidator:
    """Check documents against ``schema`` (a dict using only the keywords handled here)."""

    def __init__(self, schema: Mapping[str, Any]):
        check_keywords(schema)
        self.schema = schema

    def iter_errors(self, instance: Any) -> Iterator[SchemaViolation]:
        """Every violation of the document ``instance``, in jsonschema's order."""
        return self._errors(instance, self.schema, ())

    def is_valid(self, instance: Any, schema: Mapping[str, Any] | None = None) -> bool:
        """Whether ``instance`` satisfies ``schema`` (default: the whole schema)."""
        return next(self._errors(instance, self.schema if schema is None else schema, ()),
                    None) is None

    def _errors(self, instance: Any, schema: Schema,
                path: JsonPath) -> Iterator[SchemaViolation]:
        for keyword, value in schema.items():
            if keyword in PASSIVE:
                continue
            check = getattr(self, "_" + keyword.lstrip("$"))
            for found in check(value, instance, schema, path):
                if isinstance(found, SchemaViolation):
                    yield found
                else:  # (message,): a failure of this keyword itself
                    yield SchemaViolation(keyword, value, instance, schema, path, found[0])

    # --- applicators: the failures of subschemas pass through ---------------------------------
    def _properties(self, value: Any, instance: Any, schema: Schema, path: JsonPath) -> Found:
        if isinstance(instance, dict):
            for name, sub in value.items():
                if name in instance:
                    yield from self._errors(instance[name], sub, (*path, name))

    def _additionalProperties(
            self, value: Any, instance: Any, schema: Schema, path: JsonPath) -> Found:
        if not isinstance(instance, dict):
            return
        extra = [k for k in instance if k not in schema.get("properties", {})]
        if value is False:
            if extra:
                yield (f"additional properties are not allowed ({', '.join(map(repr, extra))})",)
        else:
            for name in extra:
                yield from self._errors(instance[name], value, (*path, name))

    def _items(self, value: Any, instance: Any, schema: Schema, path: JsonPath) -> Found:
        if isinstance(instance, list):
            for i, item in enumerate(instance):
                yield from self._errors(item, value, (*path, i))

    def _propertyNames(
            self, value: Any, instance: Any, schema: Schema, path: JsonPath) -> Found:
        if isinstance(instance, dict):
            for name in instance:
                yield from self._errors(name, value, path)

    def _allOf(
            self, value: Any, instance: Any, schema: Schema, path: JsonPath) -> Found:
        for sub in value:
            yield from self._errors(instance, sub, path)

    def _anyOf(
            self, value: Any, instance: Any, schema: Schema, path: JsonPath) -> Found:
        failures: list[SchemaViolation] = []
        for sub in value:
            errors = list(self._errors(instance, sub, path))
            if not errors:
                return
            failures += errors
        yield SchemaViolation("anyOf", value, instance, schema, path,
                              f"{instance!r} is not valid under any of the given schemas",
                              failures)

    def _if(self, value: Any, instance: Any, schema: Schema, path: JsonPath) -> Found:
        branch = "then" if self.is_valid(instance, value) else "else"
        if branch in schema:
            yield from self._errors(instance, schema[branch], path)

    def _ref(self, value: Any, instance: Any, schema: Schema, path: JsonPath) -> Found:
        yield from self._errors(instance, resolve_ref(self.schema, value), path)

    # --- assertions ----------------------------------------------------------------------------
    def _type(self, value: Any, instance: Any, schema: Schema, path: JsonPath) -> Found:
        names = [value] if isinstance(value, str) else value
        if not any(is_type(instance, name) for name in names):
            yield (f"{instance!r} is not of type {', '.join(map(repr, names))}",)

    def _enum(self, value: Any, instance: Any, schema: Schema, path: JsonPath) -> Found:
        if not any(equal(instance, option) for option in value):
            yield (f"{instance!r} is not one of {value!r}",)

    def _const(self, value: Any, instance: Any, schema: Schema, path: JsonPath) -> Found:
        if not equal(instance, value):
            yield (f"{value!r} was expected",)

    def _required(self, value: Any, instance: Any, schema: Schema, path: JsonPath) -> Found:
        if isinstance(instance, dict):
            for name in value:
                if name not in instance:
                    yield (f"{name!r} is a required property",)

    def _pattern(self, value: Any, instance: Any, schema: Schema, path: JsonPath) -> Found:
        if isinstance(instance, str) and re.search(value, instance) is None:
            yield (f"{instance!r} does not match {value!r}",)

    def _minLength(
            self, value: Any, instance: Any, schema: Schema, path: JsonPath) -> Found:
        if isinstance(instance, str) and len(instance) < value:
            yield (f"{instance!r} is too short",)

    def _minItems(
            self, value: Any, instance: Any, schema: Schema, path: JsonPath) -> Found:
        if isinstance(instance, list) and len(instance) < value:
            yield (f"{instance!r} should be non-empty" if value == 1 else
                   f"{instance!r} is too short",)

    def _minProperties(
            self, value: Any, instance: Any, schema: Schema, path: JsonPath) -> Found:
        if isinstance(instance, dict) and len(instance) < value:
            yield (f"{instance!r} should be non-empty" if value == 1 else
                   f"{instance!r} does not have enough properties",)

    def _minimum(self, value: Any, instance: Any, schema: Schema, path: JsonPath) -> Found:
        if is_type(instance, "number") and instance < value:
            yield (f"{instance!r} is less than the minimum of {value!r}",)

    def _exclusiveMinimum(
            self, value: Any, instance: Any, schema: Schema, path: JsonPath) -> Found:
        if is_type(instance, "number") and instance <= value:
            yield (f"{instance!r} is less than or equal to the minimum of {value!r}",)


KEYWORDS = PASSIVE | {name[1:] if name != "_ref" else "$ref"
                          for name in vars(SubsetValidator) if name.startswith("_")
                          and not name.startswith("__") and name != "_errors"}


def check_keywords(schema: Any, where: str = "#") -> None:
    """Raise ``ValueError`` naming the first keyword of ``schema`` this module does not handle."""
    if not isinstance(schema, Mapping):
        return
    for keyword, value in schema.items():
        if keyword not in KEYWORDS:
            raise ValueError(f"schema keyword {keyword!r} at {where} is not supported")
        here = f"{where}/{keyword}"
        if keyword in ("properties", "$defs"):
            for name, sub in value.items():
                check_keywords(sub, f"{here}/{name}")
        elif keyword in ("anyOf", "allOf"):
            for i, sub in enumerate(value):
                check_keywords(sub, f"{here}/{i}")
        elif keyword in SUBSCHEMA_KEYWORDS:
            check_keywords(value, here)


def resolve_ref(root: Mapping[str, Any], ref: str) -> Mapping[str, Any]:
    """The subschema that a local reference such as ``#/$defs/reference`` names."""
    if not ref.startswith("#"):
        raise ValueError(f"only local schema references are supported, got {ref!r}")
    node: Any = root
    for part in filter(None, ref[1:].split("/")):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def toml_integer(_checker: Any, instance: Any) -> bool:
    """``jsonschema``'s type check of ``"integer"`` for TOML documents (a float is no
    integer): ``TypeChecker.redefine("integer", toml_integer)``."""
    return isinstance(instance, int) and not isinstance(instance, bool)


def is_type(instance: Any, name: str) -> bool:
    """JSON Schema's types, as TOML has them: an integer is an integer, not a float of a
    whole value (``partition_size = 2.0`` is refused; JSON Schema itself would take it, so the
    tests compare with ``jsonschema`` given :func:`toml_integer`), a boolean is no number."""
    if name == "boolean":
        return isinstance(instance, bool)
    if isinstance(instance, bool):
        return name == "boolean"
    checks = {
        "object": lambda: isinstance(instance, dict),
        "array": lambda: isinstance(instance, list),
        "string": lambda: isinstance(instance, str),
        "integer": lambda: isinstance(instance, int),
        "number": lambda: isinstance(instance, int | float),
        "null": lambda: instance is None,
    }
    if name not in checks:
        raise ValueError(f"unknown JSON Schema type {name!r}")
    return checks[name]()


def equal(a: Any, b: Any) -> bool:
    """JSON equality: ``true`` is not ``1``; lists and tables compare item by item."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(equal(a[k], b[k]) for k in a)
    return a == b
