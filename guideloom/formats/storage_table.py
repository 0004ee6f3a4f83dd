"""The ``[output.storage]`` table of a workflow file: its schema and the storage it builds.

A ``storage`` output's one option is a GuideLoom storage object (class plus format); a
workflow file describes it as a table (``class`` and one of ``dtype``, ``format``,
``format_factory``), which :func:`build_storage` turns into the object.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from guideloom.formats.base import WorkflowContext

STORAGE_CLASSES = ("StreamStorage", "DocumentStorage", "StreamWithMetaStorage")
TABLE_SCHEMA: dict[str, Any] = {
    "description": "the GuideLoom storage of a 'storage' output",
    "type": "object",
    "additionalProperties": False,
    "required": ["class"],
    "properties": {
        "class": {"enum": list(STORAGE_CLASSES)},
        "dtype": {
            "description": "a table {name = \"<f4\", ...}: the record dtype of a "
                           "StreamNumpyFormat",
            "type": "object",
            "minProperties": 1,
            "additionalProperties": {"type": "string", "minLength": 1},
        },
        "format": {"enum": ["pickle"]},
        "format_factory": {"$ref": "#/$defs/reference"},
    },
}
_FORMATS_HINT = {
    "StreamStorage": "dtype or format_factory",
    "DocumentStorage": "format = \"pickle\" or format_factory",
    "StreamWithMetaStorage": "format_factory",
}
_ALLOWED = {"StreamStorage": ("dtype", "format_factory"),
            "DocumentStorage": ("format", "format_factory"),
            "StreamWithMetaStorage": ("format_factory",)}


def build_storage(doc: Mapping[str, Any], context: WorkflowContext) -> Any:
    """The storage object of ``[output.storage]`` (class plus format) at the job's target, or
    ``None`` on a dry run whose format factory is not imported."""
    import numpy as np

    from guideloom import storage as storages

    cls = doc["class"]
    given = [k for k in ("dtype", "format", "format_factory") if k in doc]
    if len(given) != 1 or given[0] not in _ALLOWED[cls]:
        key = f"output.storage.{given[0]}" if given else "output.storage"
        context.error(key, f"{cls} needs exactly one of: {_FORMATS_HINT[cls]}")
    if "dtype" in doc:
        fields = []
        for name, text in doc["dtype"].items():
            try:
                fields.append((name, np.dtype(text)))
            except TypeError:
                context.error(f"output.storage.dtype.{name}",
                              f"expected a numpy dtype such as '<f4', got {text!r}")
        fmt: Any = storages.StreamNumpyFormat(np.dtype(fields))
    elif "format" in doc:
        fmt = storages.DocumentPickleFormat()
    else:
        factory = context.reference(doc["format_factory"], "output.storage.format_factory")
        if context.deferred(factory):
            return None  # a dry run calls no factory: the storage is described, not built
        try:
            fmt = factory()
        except Exception as exc:
            context.error("output.storage.format_factory",
                          f"calling it raised {type(exc).__name__}: {exc}")
    try:
        return getattr(storages, cls)(context.target, fmt)
    except Exception as exc:
        context.error("output.storage", f"{cls} does not accept this format: {exc}")
