"""Parallel exports on Dask: one job description (:class:`ExportSpec`), one executor.

:func:`export` is the one entry point (``kind`` names a format of :mod:`guideloom.formats`); the
``export_to_*`` functions are thin wrappers with the same options (:class:`ExportOptions`).
The package itself is callable as that function: ``guideloom.export(view, target, kind=...)``
is ``guideloom.export.export(view, target, kind=...)``.

The names below are imported on first use, so importing a module of this package (a Dask
worker unpickling a task of :mod:`guideloom.export.partition`) loads that module and what it
imports, not the executor.
"""

from __future__ import annotations

import importlib
import inspect
import sys
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the real names, for type checkers and editors
    from guideloom.errors import SkippedDataWarning as SkippedDataWarning
    from guideloom.export.api import ExportOptions as ExportOptions
    from guideloom.export.api import build_spec as build_spec
    from guideloom.export.api import export as export
    from guideloom.export.api import export_to_numpy as export_to_numpy
    from guideloom.export.api import export_to_numpy_per_sim as export_to_numpy_per_sim
    from guideloom.export.api import export_to_storage as export_to_storage
    from guideloom.export.api import export_to_zarr as export_to_zarr
    from guideloom.export.plan import plan_export as plan_export
    from guideloom.export.run import ExportResult as ExportResult
    from guideloom.export.run import run_export as run_export
    from guideloom.export.spec import ExportSpec as ExportSpec

_HOMES = {  # each name -> the module that defines it
    "ExportOptions": "guideloom.export.api",
    "ExportResult": "guideloom.export.run",
    "ExportSpec": "guideloom.export.spec",
    "SkippedDataWarning": "guideloom.errors",
    "build_spec": "guideloom.export.api",
    "export": "guideloom.export.api",
    "export_to_numpy": "guideloom.export.api",
    "export_to_numpy_per_sim": "guideloom.export.api",
    "export_to_storage": "guideloom.export.api",
    "export_to_zarr": "guideloom.export.api",
    "plan_export": "guideloom.export.plan",
    "run_export": "guideloom.export.run",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    """A name of :data:`__all__`, imported from its module on first use; ``__signature__``
    is :func:`export`'s (``help()`` and :mod:`inspect` show its parameters)."""
    if name == "__signature__":
        return inspect.signature(__getattr__("export"))
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


class _CallableModule(types.ModuleType):
    """This package's module type: calling the package calls :func:`export`."""

    def __call__(self, *args: Any, **kwargs: Any) -> ExportResult:
        """Run :func:`guideloom.export.export` (same arguments, same result)."""
        run: Callable[..., ExportResult] = __getattr__("export")
        return run(*args, **kwargs)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        """Pickle by name, as plain modules are (cloudpickle ships functions that use it)."""
        return importlib.import_module, (self.__name__,)


sys.modules[__name__].__class__ = _CallableModule
