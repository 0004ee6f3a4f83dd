"""Parallel exports on Dask: one job description (:class:`ExportSpec`), one executor.

:func:`export` is the one entry point (``kind`` names a format of :mod:`guideloom.formats`); the
``export_to_*`` functions are thin wrappers with the same options (:class:`ExportOptions`).
The package itself is callable as that function: ``guideloom.export(view, target, kind=...)``
is ``guideloom.export.export(view, target, kind=...)``.
"""

import importlib
import inspect
import sys
import types
from typing import Any

from guideloom.errors import SkippedDataWarning
from guideloom.export.api import (
    ExportOptions,
    build_spec,
    export,
    export_to_numpy,
    export_to_numpy_per_sim,
    export_to_storage,
    export_to_zarr,
)
from guideloom.export.plan import plan_export
from guideloom.export.run import ExportResult, run_export
from guideloom.export.spec import ExportSpec

__all__ = [
    "ExportOptions",
    "ExportResult",
    "ExportSpec",
    "SkippedDataWarning",
    "build_spec",
    "export",
    "export_to_numpy",
    "export_to_numpy_per_sim",
    "export_to_storage",
    "export_to_zarr",
    "plan_export",
    "run_export",
]


class _CallableModule(types.ModuleType):
    """This package's module type: calling the package calls :func:`export`."""

    def __call__(self, *args: Any, **kwargs: Any) -> ExportResult:
        """Run :func:`guideloom.export.export` (same arguments, same result)."""
        return export(*args, **kwargs)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        """Pickle by name, as plain modules are (cloudpickle ships functions that use it)."""
        return importlib.import_module, (self.__name__,)


sys.modules[__name__].__class__ = _CallableModule
__signature__ = inspect.signature(export)  # help() and inspect show export's parameters
