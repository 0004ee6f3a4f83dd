"""The JSON Schema of workflow files and one-line messages for its violations.

``schema.json`` is the schema as shipped, for editors and readers; its ``[output]`` part is
what the registry's formats declare (kinds, ``compression`` values, ``[output.<kind>]``
tables), and :func:`workflow_schema` rebuilds that part from the registry
(:func:`output_schema`), so a format registered or installed as a plugin can be named in a
workflow file with its options. The tests check that the built-ins give the file's part.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from importlib import resources
from typing import Any

from guideloom.errors import WorkflowError
from guideloom.formats import known_formats, registry_version
from guideloom.formats.base import ExportFormat
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
def file_schema() -> dict[str, Any]:
    """``schema.json`` as shipped (its ``[output]`` part is the built-in formats')."""
    text = resources.files("guideloom.workflow").joinpath("schema.json").read_text("utf-8")
    return json.loads(text)


COMMON_OUTPUT_KEYS = ("kind", "path", "compression", "partition_size", "update")


def output_schema(formats: Sequence[type[ExportFormat]]) -> dict[str, Any]:
    """The schema of ``[output]`` for ``formats``: ``kind`` one of theirs, the common keys,
    each format's ``[output.<kind>]`` table, and per kind the ``compression`` values it
    takes."""
    common = file_schema()["properties"]["output"]["properties"]
    properties: dict[str, Any] = {
        "kind": {"enum": [f.kind for f in formats]},
        **{k: copy.deepcopy(common[k]) for k in COMMON_OUTPUT_KEYS[1:]},
    }
    for fmt in formats:
        if fmt.takes_table():
            properties[fmt.kind] = copy.deepcopy(fmt.table_schema())
    checks = [{"if": {"properties": {"kind": {"const": fmt.kind}}, "required": ["kind"]},
               "then": {"properties": {"compression": {"enum": list(fmt.compressions)}}}}
              for fmt in formats if fmt.compressions is not None]
    doc: dict[str, Any] = {"type": "object", "additionalProperties": False,
                           "required": ["kind", "path"], "properties": properties}
    if checks:
        doc["allOf"] = checks
    return doc


_lock = threading.Lock()
_built: dict[int, tuple[dict[str, Any], SubsetValidator]] = {}


def _current() -> tuple[dict[str, Any], SubsetValidator]:
    """The schema for the registry as it is now, and its validator (built once per state)."""
    version = registry_version()
    with _lock:
        found = _built.get(version)
    if found is None:
        formats = known_formats()  # may import plugins: outside the lock
        schema = copy.deepcopy(file_schema())
        schema["properties"]["output"] = output_schema(formats)
        found = (schema, SubsetValidator(schema))
        with _lock:
            _built.clear()
            _built[version] = found
    return found


def workflow_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of workflow files: ``schema.json`` with its
    ``[output]`` part built from the formats registered now (a copy: edit it freely)."""
    return copy.deepcopy(_current()[0])


def _validator() -> SubsetValidator:
    return _current()[1]


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
