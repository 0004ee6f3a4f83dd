"""Export formats, one module each (``npy``, ``npz``, ``zarr``, ``storage``), behind one registry.

The executor (:mod:`guideloom.export`) and the reader (:func:`guideloom.load_export`) look a
format up by its ``kind`` here; neither names one. A third-party format registers itself with
:func:`register_format`, or through the entry-point group ``guideloom.export_formats`` (the
entry point names a subclass of :class:`~guideloom.formats.base.ExportFormat`).
"""

from __future__ import annotations

import importlib
from importlib.metadata import entry_points

from guideloom.formats.base import ExportFormat, FormatReader, PartitionSink

__all__ = ["ExportFormat", "FormatReader", "PartitionSink", "format_kinds", "get_format",
           "register_format"]

ENTRY_POINT_GROUP = "guideloom.export_formats"
BUILT_IN = {
    "npy": "guideloom.formats.npy:NpyFormat",
    "npz": "guideloom.formats.npz:NpzFormat",
    "zarr": "guideloom.formats.zarr:ZarrFormat",
    "storage": "guideloom.formats.storage:StorageFormat",
}
_registered: dict[str, type[ExportFormat]] = {}


def register_format(cls: type[ExportFormat]) -> type[ExportFormat]:
    """Register an export format under ``cls.kind`` (usable as a class decorator)."""
    if not (isinstance(cls, type) and issubclass(cls, ExportFormat)):
        raise TypeError(f"{cls!r} is not an ExportFormat subclass")
    _registered[cls.kind] = cls
    return cls


def _plugins() -> dict[str, str]:
    return {ep.name: ep.value for ep in entry_points(group=ENTRY_POINT_GROUP)}


def format_kinds() -> list[str]:
    """Every known kind: built in, registered and installed as plugins."""
    return sorted({*BUILT_IN, *_registered, *_plugins()})


def get_format(kind: str) -> type[ExportFormat]:
    """The format class of ``kind`` (imported on first use).

    Raises:
        ValueError: No such format; the message lists the known kinds.
    """
    found = _registered.get(kind)
    if found is not None:
        return found
    ref = BUILT_IN.get(kind) or _plugins().get(kind)
    if ref is None:
        raise ValueError(f"unknown output kind {kind!r}; use one of {', '.join(format_kinds())}")
    module_name, _, attr = ref.partition(":")
    cls = getattr(importlib.import_module(module_name), attr)
    return register_format(cls)
