"""Export formats, one module each (``npy``, ``npz``, ``zarr``, ``storage``), behind one registry.

The executor (:mod:`guideloom.export`) and the reader (:func:`guideloom.load_export`) look a
format up by its ``kind`` here; neither names one, nor do the workflow schema and loader: they
read what each format declares (:class:`~guideloom.formats.base.ExportFormat`: ``Options``,
``description``, ``local_only``, ``fault_points`` …). A third-party format registers itself
with :func:`register_format`, or through the entry-point group ``guideloom.export_formats``
(the entry point names a subclass of :class:`~guideloom.formats.base.ExportFormat`); see
``docs/formats.md``. Entry points are read once per process; a plugin that fails to load is
skipped with a :class:`~guideloom.errors.FormatPluginWarning`.
"""

from __future__ import annotations

import importlib
import threading
from importlib.metadata import entry_points
from typing import Any

from guideloom.errors import FormatPluginWarning, warn
from guideloom.formats.base import ExportFormat, FormatReader, PartitionSink

__all__ = ["ExportFormat", "FormatReader", "PartitionSink", "format_kinds", "get_format",
           "known_formats", "register_format", "registry_version", "rescan_plugins",
           "unregister_format"]

ENTRY_POINT_GROUP = "guideloom.export_formats"
BUILT_IN = {
    "npy": "guideloom.formats.npy:NpyFormat",
    "npz": "guideloom.formats.npz:NpzFormat",
    "zarr": "guideloom.formats.zarr:ZarrFormat",
    "storage": "guideloom.formats.storage:StorageFormat",
}
_lock = threading.RLock()
_registered: dict[str, type[ExportFormat]] = {}
_plugins: dict[str, str] | None = None  # entry points, read once
_broken: dict[str, str] = {}  # plugin kind -> why it was skipped (warned once)
_version = [0]  # bumped by every change of the registry (caches of the schema key on it)


def _check_class(cls: object) -> type[ExportFormat]:
    if not (isinstance(cls, type) and issubclass(cls, ExportFormat)):
        raise TypeError(f"{cls!r} is not an ExportFormat subclass")
    kind = getattr(cls, "kind", None)
    if not isinstance(kind, str) or not kind:
        raise TypeError(f"{cls.__qualname__} declares no kind (a class attribute such as "
                        "kind = 'parquet')")
    return cls


def register_format(cls: type[ExportFormat] | None = None, *, replace: bool = False) -> Any:
    """Register an export format under ``cls.kind`` (usable as a class decorator, with or
    without ``replace``).

    Args:
        cls: The :class:`ExportFormat` subclass.
        replace: Allow taking a kind that a built-in or another registered class has.

    Raises:
        TypeError: ``cls`` is no ExportFormat subclass or declares no kind.
        ValueError: The kind is taken and ``replace`` is false.
    """
    if cls is None:
        return lambda c: register_format(c, replace=replace)
    _check_class(cls)
    with _lock:
        current = _registered.get(cls.kind)
        taken = current is not None and current is not cls
        if not replace and (taken or (current is None and cls.kind in BUILT_IN)):
            what = "a built-in format" if cls.kind in BUILT_IN else (
                f"{current.__module__}.{current.__qualname__}")  # type: ignore[union-attr]
            raise ValueError(f"the output kind {cls.kind!r} is {what}; give your format "
                             "another kind, or pass replace=True to shadow it")
        if current is not cls:
            _registered[cls.kind] = cls
            _version[0] += 1
    return cls


def unregister_format(kind: str) -> None:
    """Forget a format registered with :func:`register_format` (built-ins come back as they
    were; a test registering a format of its own undoes it with this)."""
    with _lock:
        if _registered.pop(kind, None) is not None:
            _version[0] += 1


def registry_version() -> int:
    """A number that changes whenever a format is registered or unregistered."""
    return _version[0]


def _entry_points() -> dict[str, str]:
    """``kind -> "module:attr"`` of the installed plugins, scanned once (thread-safe)."""
    global _plugins
    with _lock:
        if _plugins is None:
            found: dict[str, str] = {}
            for ep in entry_points(group=ENTRY_POINT_GROUP):
                if ep.name in BUILT_IN:
                    dist = getattr(getattr(ep, "dist", None), "name", "?")
                    warn(f"export-format plugin {ep.name!r} ({ep.value}, distribution "
                         f"{dist}) would shadow the built-in format of that kind; it is "
                         "skipped", FormatPluginWarning)
                    continue
                found[ep.name] = ep.value
            _plugins = found
        return _plugins


def rescan_plugins() -> None:
    """Read the entry points again (after installing a plugin into a running process);
    plugins that failed before are tried again."""
    global _plugins
    with _lock:
        _plugins = None
        _broken.clear()
        _version[0] += 1


def _load_plugin(kind: str, ref: str) -> type[ExportFormat] | None:
    """Import plugin ``kind``; on failure warn once, naming it, and return ``None``."""
    if kind in _broken:
        return None
    module_name, _, attr = ref.partition(":")
    try:
        cls = _check_class(getattr(importlib.import_module(module_name), attr))
        if cls.kind != kind:
            raise TypeError(f"its class declares kind {cls.kind!r}")
    except Exception as exc:
        _broken[kind] = f"{type(exc).__name__}: {exc}"
        warn(f"export-format plugin {kind!r} ({ref}) cannot be used and is skipped: "
             f"{_broken[kind]}", FormatPluginWarning)
        return None
    return cls


def format_kinds() -> list[str]:
    """Every known kind: built in, registered and installed as plugins (broken ones left
    out once they failed to load)."""
    with _lock:
        return sorted({*BUILT_IN, *_registered, *_entry_points()} - set(_broken))


def get_format(kind: str) -> type[ExportFormat]:
    """The format class of ``kind`` (imported on first use).

    Raises:
        ValueError: No such format, or its plugin failed to load (warned); the message lists
            the known kinds.
    """
    with _lock:
        found = _registered.get(kind)
        if found is not None:
            return found
        cls: type[ExportFormat] | None
        if kind in BUILT_IN:
            module_name, _, attr = BUILT_IN[kind].partition(":")
            cls = _check_class(getattr(importlib.import_module(module_name), attr))
        else:
            ref = _entry_points().get(kind)
            cls = _load_plugin(kind, ref) if ref is not None else None
            if cls is None:
                why = f" (its plugin failed to load: {_broken[kind]})" if kind in _broken else ""
                raise ValueError(f"unknown output kind {kind!r}{why}; use one of "
                                 f"{', '.join(format_kinds())}")
        _registered[kind] = cls  # loaded once; the registry's content is unchanged
        return cls


def known_formats() -> list[type[ExportFormat]]:
    """Every usable format class: the built-ins in their order, then the others by kind
    (plugins that fail to load are warned about and left out)."""
    kinds = [*BUILT_IN, *sorted(k for k in format_kinds() if k not in BUILT_IN)]
    found = []
    for kind in kinds:
        try:
            found.append(get_format(kind))
        except ValueError:  # a broken plugin: warned
            continue
    return found
