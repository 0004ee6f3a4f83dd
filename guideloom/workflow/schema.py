"""The JSON Schema of workflow files and one-line messages for its violations."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any

from guideloom.errors import WorkflowError
from guideloom.workflow.schema_check import SubsetValidator

_TYPE_WORDS = {
    "object": "a table",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean (true or false)",
}


@cache
def workflow_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of workflow files, from ``schema.json``."""
    text = resources.files("guideloom.workflow").joinpath("schema.json").read_text("utf-8")
    return json.loads(text)


@cache
def _validator() -> SubsetValidator:
    return SubsetValidator(workflow_schema())


def validate_document(doc: Mapping[str, Any], file: str) -> None:
    """Check ``doc`` against the schema; raise a :class:`WorkflowError` for the first problem.

    Problems are reported in document order, so the message is the same on every run. The
    check is :mod:`guideloom.workflow.schema_check`, not ``jsonschema``: importing that builds
    format checkers (seconds with Jupyter installed) that workflow files never use.
    """
    errors = sorted(_validator().iter_errors(doc), key=_order)
    if errors:
        error = errors[0]
        key, message = describe_error(error)
        raise WorkflowError(file, key or None, message)


def _order(error: Any) -> tuple:
    return (tuple(str(p) for p in error.absolute_path), -len(error.absolute_path))


def describe_error(error: Any) -> tuple[str, str]:
    """``(dotted key, what was expected)`` for one violation (a jsonschema error, or a
    :class:`~guideloom.workflow.schema_check.SchemaViolation`: they have the same attributes)."""
    path = [str(p) for p in error.absolute_path]
    key = ".".join(path)
    kind = error.validator
    schema = error.schema if isinstance(error.schema, Mapping) else {}
    instance = error.instance
    if kind == "additionalProperties":
        allowed = sorted(schema.get("properties", {}))
        extra = [k for k in instance if k not in allowed]
        bad = ".".join([*path, str(extra[0])]) if extra else key
        return bad, f"unknown key; expected one of {', '.join(allowed)}"
    if kind == "required":
        missing = [k for k in error.validator_value if k not in instance]
        name = missing[0] if missing else "?"
        return ".".join([*path, name]), "missing (required)"
    if kind == "enum":
        return key, f"expected one of {_options(error.validator_value)}, got {_show(instance)}"
    if kind == "const":
        return key, f"expected {_show(error.validator_value)}, got {_show(instance)}"
    if kind == "type":
        wanted = error.validator_value
        words = [wanted] if isinstance(wanted, str) else list(wanted)
        return key, f"expected {' or '.join(_TYPE_WORDS.get(w, w) for w in words)}, " \
                    f"got {_show(instance)}"
    if kind in ("anyOf", "oneOf"):
        # an alternative of the instance's own type failed deeper down: report that failure
        depth = len(error.absolute_path)
        deeper = [e for e in error.context or ()
                  if e.validator != "type" or len(e.absolute_path) > depth]
        if deeper:
            return describe_error(sorted(deeper, key=_order)[0])
        expected = schema.get("description", "a value of another type")
        return key, f"expected {expected}, got {_show(instance)}"
    if kind == "pattern":
        expected = schema.get("description", f"text matching {error.validator_value!r}")
        return key, f"expected {expected}, got {_show(instance)}"
    if kind == "propertyNames":
        return ".".join([*path, str(instance)]), \
            "expected a name of letters, digits and underscores (not starting with a digit)"
    if kind in ("minimum", "exclusiveMinimum"):
        return key, f"expected at least {error.validator_value}, got {_show(instance)}"
    if kind in ("minItems", "minProperties"):
        return key, "must not be empty"
    if kind == "minLength":
        return key, "must not be empty"
    return key, error.message


def _options(values: Iterable[Any]) -> str:
    return ", ".join(_show(v) for v in values)


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "a table"
    if isinstance(value, Sequence) and not isinstance(value, str):
        return "a list"
    return repr(value)
