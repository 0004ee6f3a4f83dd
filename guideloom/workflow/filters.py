"""Declarative row filters on index columns (no ``eval``): ``split = "train"``,
``has_oil = true``, ``blankholder_force = { in = [100, 300] }``, ``mean_punch_temp = { ge = 25 }``.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from guideloom.read.files import short_type

#: operator name in workflow files -> (symbol in descriptions, function)
OPERATORS: dict[str, tuple[str, Callable[[Any, Any], bool]]] = {
    "eq": ("==", operator.eq),
    "ne": ("!=", operator.ne),
    "lt": ("<", operator.lt),
    "le": ("<=", operator.le),
    "gt": (">", operator.gt),
    "ge": (">=", operator.ge),
    "in": ("in", lambda value, options: value in options),
    "not_in": ("not in", lambda value, options: value not in options),
}
ORDERING = ("lt", "le", "gt", "ge")
_TYPE_NAMES = {
    "sc:Integer": "an integer",
    "sc:Float": "a number",
    "sc:Boolean": "a boolean (true or false)",
    "sc:Text": "a string",
}


@dataclass(frozen=True)
class Condition:
    """``row[column] <op> value``."""

    column: str
    op: str
    value: Any

    def __call__(self, row: Mapping[str, Any]) -> bool:
        return bool(OPERATORS[self.op][1](row[self.column], self.value))

    def describe(self) -> str:
        """Readable form, e.g. ``blankholder_force in [100, 300]``."""
        value = list(self.value) if isinstance(self.value, tuple) else self.value
        return f"{self.column} {OPERATORS[self.op][0]} {value!r}"


@dataclass(frozen=True)
class WhereFilter:
    """All conditions must hold. Picklable, so Dask workers and ``export.json`` can use it."""

    conditions: tuple[Condition, ...]

    def __call__(self, row: Mapping[str, Any]) -> bool:
        return all(c(row) for c in self.conditions)

    def describe(self) -> str:
        """The conditions joined by ``and``."""
        return " and ".join(c.describe() for c in self.conditions)


def check_value(value: Any, data_type: str | None) -> str | None:
    """Return what was expected if ``value`` does not fit the column type, else ``None``."""
    kind = short_type(data_type)
    ok = {
        "sc:Integer": isinstance(value, int) and not isinstance(value, bool),
        "sc:Float": isinstance(value, int | float) and not isinstance(value, bool),
        "sc:Boolean": isinstance(value, bool),
    }.get(kind, isinstance(value, str))
    if ok and kind == "sc:Float" and isinstance(value, float) and math.isnan(value):
        ok = False
    return None if ok else _TYPE_NAMES.get(kind, "a string")


def build_filter(
    where: Mapping[str, Any], column_types: Mapping[str, str | None]
) -> tuple[WhereFilter, list[tuple[str, str]]]:
    """Turn the ``[filter.where]`` table into a :class:`WhereFilter`.

    Args:
        where: ``{column: value}`` (equality) or ``{column: {op: value, ...}}``.
        column_types: Index column name -> Croissant ``dataType``.

    Returns:
        The filter and a list of problems ``(key below filter.where, message)`` (empty if valid).
    """
    conditions: list[Condition] = []
    problems: list[tuple[str, str]] = []
    for column, spec in where.items():
        if column not in column_types:
            problems.append((column, f"unknown index column {column!r}; columns: "
                                     f"{', '.join(column_types)}"))
            continue
        data_type = column_types[column]
        ops = dict(spec) if isinstance(spec, Mapping) else {"eq": spec}
        for op, value in ops.items():
            key = column if not isinstance(spec, Mapping) else f"{column}.{op}"
            kind = short_type(data_type)
            if op in ORDERING and kind not in ("sc:Integer", "sc:Float"):
                problems.append((key, f"{op!r} compares numbers, but column {column!r} is {kind}"))
                continue
            values = value if op in ("in", "not_in") else [value]
            bad = next((v for v in values if check_value(v, data_type) is not None), None)
            if bad is not None:
                expected = check_value(bad, data_type)
                problems.append((key, f"column {column!r} is {kind}: expected {expected}, "
                                      f"got {bad!r}"))
                continue
            stored = tuple(value) if op in ("in", "not_in") else value
            conditions.append(Condition(column, op, stored))
    return WhereFilter(tuple(conditions)), problems
