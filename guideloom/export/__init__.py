"""Parallel exports on Dask: one job description (:class:`ExportSpec`), one executor."""

from guideloom.export.api import (
    build_spec,
    export_to_numpy,
    export_to_numpy_per_sim,
    export_to_zarr,
)
from guideloom.export.run import ExportResult, SkippedDataWarning, plan_export, run_export
from guideloom.export.spec import ExportSpec

__all__ = [
    "ExportResult",
    "ExportSpec",
    "SkippedDataWarning",
    "build_spec",
    "export_to_numpy",
    "export_to_numpy_per_sim",
    "export_to_zarr",
    "plan_export",
    "run_export",
]
