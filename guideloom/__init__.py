"""guideloom: Croissant-described HDF5 experiments to training-ready arrays, on Dask.

Heavy or optional parts (Dask, zarr, the storages, the PyTorch loader) are imported lazily, so
``import guideloom`` stays cheap and works without torch.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # type checkers see the real classes behind the lazy names
    from guideloom.storage import (  # noqa: F401
        DocumentDataset,
        DocumentPickleFormat,
        DocumentStorage,
        StreamDataset,
        StreamNumpyFormat,
        StreamStorage,
        StreamWithMetaStorage,
    )

__version__ = "0.1.0"

# a library logs and never prints: records go nowhere until the application configures logging
# (the command line installs its own handler; see docs/configuration.md, "Logging")
logging.getLogger(__name__).addHandler(logging.NullHandler())

# public name -> module that defines it (imported on first attribute access)
_LAZY: dict[str, str] = {
    # manifest, views and experiment files
    "load": "guideloom.croissant",
    "add_view": "guideloom.croissant",
    "Dataset": "guideloom.croissant",
    "DatasetSpec": "guideloom.croissant",
    "RDDAC_SPEC": "guideloom.croissant",
    "DDACS_SPEC": "guideloom.croissant",
    "croissant": "guideloom.croissant",
    "h5_tools": "guideloom.h5_tools",
    "inspect_h5": "guideloom.h5_tools",
    "View": "guideloom.croissant",
    "open_h5": "guideloom.sources",
    "make_demo_data": "guideloom.demo",
    "clear_caches": "guideloom.caches",
    # plots (rddac 2.0's names; matplotlib is the optional extra guideloom[plot])
    "visualization": "guideloom.visualization",
    "plot_scan": "guideloom.visualization",
    "scan_to_pointcloud": "guideloom.visualization",
    "plot_point_cloud": "guideloom.visualization",
    "plot_force": "guideloom.visualization",
    "plot_traverse": "guideloom.visualization",
    # ddacs 3.2's plots, top level as ddacs has them (defined in guideloom.ddacs_visualization)
    "ddacs_visualization": "guideloom.ddacs_visualization",
    "plot_mesh": "guideloom.visualization",
    "plot_vectors": "guideloom.visualization",
    "plot_2d_projection": "guideloom.visualization",
    "COMPONENT_COLORS": "guideloom.visualization",
    "streaming": "guideloom.streaming",
    "iter_view": "guideloom.streaming",
    "extract_zips": "guideloom.extract",
    # the published release (DaRUS): rddac's `download`, verified and resumable
    "download": "guideloom.release",
    # exports
    "export_to_numpy": "guideloom.streaming",
    "export_to_numpy_per_sim": "guideloom.streaming",
    "export_to_zarr": "guideloom.streaming",
    "export_to_storage": "guideloom.streaming",
    "load_export": "guideloom.streaming",
    "export": "guideloom.export",  # the package; guideloom.export.export is the function
    "Export": "guideloom.reader",
    "ExportSpec": "guideloom.export",
    "ExportResult": "guideloom.export",
    # where jobs run
    "local_cluster": "guideloom.cluster",
    "close_cluster": "guideloom.cluster",
    # GuideLoom storages
    "StreamStorage": "guideloom.storage",
    "StreamNumpyFormat": "guideloom.storage",
    "StreamDataset": "guideloom.storage",
    "DocumentStorage": "guideloom.storage",
    "DocumentPickleFormat": "guideloom.storage",
    "DocumentDataset": "guideloom.storage",
    "StreamWithMetaStorage": "guideloom.storage",
    # training loader
    "StatefulDataLoader": "guideloom.loader",
    # GuideLoom 1.1's subpackages named in its __all__ (guideloom.types, guideloom.io)
    "io": "guideloom.io",
    "types": "guideloom.types",
    # PyTorch datasets with rddac's / ddacs' names (need torch; not in __all__)
    "pytorch": "guideloom.pytorch",
    "RDDACDataset": "guideloom.pytorch",
    "DDACSDataset": "guideloom.pytorch",
    # errors and warnings (all defined in guideloom.errors)
    "GuideloomError": "guideloom.errors",
    "ManifestError": "guideloom.errors",
    "MissingDataWarning": "guideloom.errors",
    "ExperimentReadError": "guideloom.errors",
    "MissingFieldError": "guideloom.errors",
    "CorruptDataError": "guideloom.errors",
    "WorkerImportError": "guideloom.errors",
    "StorageError": "guideloom.errors",
    "FormatContractError": "guideloom.errors",
    "UsageError": "guideloom.errors",
    "JobFailedError": "guideloom.errors",
    "ExtractError": "guideloom.errors",
    "DownloadError": "guideloom.errors",
    "SkippedDataWarning": "guideloom.errors",
    "UnverifiedExportWarning": "guideloom.errors",
    "FormatPluginWarning": "guideloom.errors",
    "ExperimentNotFoundError": "guideloom.errors",
    "NothingToExportError": "guideloom.errors",
    "TransformError": "guideloom.errors",
    "RecordValueError": "guideloom.errors",
    "LocalClusterError": "guideloom.errors",
    "IncompleteExportError": "guideloom.errors",
    "CorruptExportError": "guideloom.errors",
    "NotAnExportError": "guideloom.errors",
    "UnverifiableExportError": "guideloom.errors",
    "UntrustedExportError": "guideloom.errors",
    "WorkflowError": "guideloom.errors",
    "InflateError": "guideloom.errors",
    "FastReadError": "guideloom.errors",
    "JobqueueError": "guideloom.errors",
    "JobqueueUnavailableError": "guideloom.errors",
    "JobqueueConfigError": "guideloom.errors",
    "WorkerTimeoutError": "guideloom.errors",
    "JobqueueTerminated": "guideloom.errors",
    "ClusterStartError": "guideloom.errors",
    "NoJobError": "guideloom.errors",
    "ConfigError": "guideloom.errors",
    # every knob (environment variables included), read when used
    "config": "guideloom.config",
}

_NEEDS_TORCH = frozenset({"pytorch", "RDDACDataset", "DDACSDataset"})

__all__ = ["__version__", *sorted(set(_LAZY) - _NEEDS_TORCH)]


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'guideloom' has no attribute {name!r}")
    module = importlib.import_module(module_name)
    value = module if module_name == f"guideloom.{name}" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
