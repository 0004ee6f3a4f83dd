"""guideloom: Croissant-described HDF5 experiments to training-ready arrays, on Dask.

Heavy or optional parts (Dask, zarr, the storages, the PyTorch loader) are imported lazily, so
``import guideloom`` stays cheap and works without torch.
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from guideloom._version import __version__

if TYPE_CHECKING:  # type checkers and editors see the real objects behind the lazy names
    # ("X as X": re-exported, also for mypy --strict; tests/test_typing.py checks the list)
    from guideloom import config as config
    from guideloom import croissant as croissant
    from guideloom import ddacs_visualization as ddacs_visualization
    from guideloom import export as export
    from guideloom import h5_tools as h5_tools
    from guideloom import io as io
    from guideloom import pytorch as pytorch
    from guideloom import streaming as streaming
    from guideloom import types as types
    from guideloom import visualization as visualization
    from guideloom.cluster import close_cluster as close_cluster
    from guideloom.cluster import local_cluster as local_cluster
    from guideloom.compat.ddacs_visualization import COMPONENT_COLORS as COMPONENT_COLORS
    from guideloom.compat.ddacs_visualization import plot_2d_projection as plot_2d_projection
    from guideloom.compat.ddacs_visualization import plot_mesh as plot_mesh
    from guideloom.compat.ddacs_visualization import plot_vectors as plot_vectors
    from guideloom.compat.visualization import plot_force as plot_force
    from guideloom.compat.visualization import plot_point_cloud as plot_point_cloud
    from guideloom.compat.visualization import plot_scan as plot_scan
    from guideloom.compat.visualization import plot_traverse as plot_traverse
    from guideloom.compat.visualization import scan_to_pointcloud as scan_to_pointcloud
    from guideloom.demo import make_demo_data as make_demo_data
    from guideloom.errors import ClusterStartError as ClusterStartError
    from guideloom.errors import ConfigError as ConfigError
    from guideloom.errors import CorruptDataError as CorruptDataError
    from guideloom.errors import CorruptExportError as CorruptExportError
    from guideloom.errors import DownloadError as DownloadError
    from guideloom.errors import ExperimentNotFoundError as ExperimentNotFoundError
    from guideloom.errors import ExperimentReadError as ExperimentReadError
    from guideloom.errors import ExtractError as ExtractError
    from guideloom.errors import FastReadError as FastReadError
    from guideloom.errors import FormatContractError as FormatContractError
    from guideloom.errors import FormatPluginWarning as FormatPluginWarning
    from guideloom.errors import GuideloomError as GuideloomError
    from guideloom.errors import GuideloomWarning as GuideloomWarning
    from guideloom.errors import IncompleteExportError as IncompleteExportError
    from guideloom.errors import InflateError as InflateError
    from guideloom.errors import JobFailedError as JobFailedError
    from guideloom.errors import JobqueueConfigError as JobqueueConfigError
    from guideloom.errors import JobqueueError as JobqueueError
    from guideloom.errors import JobqueueTerminated as JobqueueTerminated
    from guideloom.errors import JobqueueUnavailableError as JobqueueUnavailableError
    from guideloom.errors import LocalClusterError as LocalClusterError
    from guideloom.errors import ManifestError as ManifestError
    from guideloom.errors import MissingDataWarning as MissingDataWarning
    from guideloom.errors import MissingFieldError as MissingFieldError
    from guideloom.errors import NoJobError as NoJobError
    from guideloom.errors import NotAnExportError as NotAnExportError
    from guideloom.errors import NothingToExportError as NothingToExportError
    from guideloom.errors import RecordValueError as RecordValueError
    from guideloom.errors import SkippedDataWarning as SkippedDataWarning
    from guideloom.errors import StorageError as StorageError
    from guideloom.errors import TransformError as TransformError
    from guideloom.errors import UntrustedExportError as UntrustedExportError
    from guideloom.errors import UnverifiableExportError as UnverifiableExportError
    from guideloom.errors import UnverifiedExportWarning as UnverifiedExportWarning
    from guideloom.errors import UpdateRefusedError as UpdateRefusedError
    from guideloom.errors import UsageError as UsageError
    from guideloom.errors import WorkerImportError as WorkerImportError
    from guideloom.errors import WorkerTimeoutError as WorkerTimeoutError
    from guideloom.errors import WorkflowError as WorkflowError
    from guideloom.export import ExportResult as ExportResult
    from guideloom.export.api import export_to_numpy as export_to_numpy
    from guideloom.export.api import export_to_numpy_per_sim as export_to_numpy_per_sim
    from guideloom.export.api import export_to_storage as export_to_storage
    from guideloom.export.api import export_to_zarr as export_to_zarr
    from guideloom.export.extract import extract_zips as extract_zips
    from guideloom.export.spec import ExportSpec as ExportSpec
    from guideloom.h5_tools import inspect_h5 as inspect_h5
    from guideloom.h5_tools import open_h5 as open_h5
    from guideloom.loader.core import StatefulDataLoader as StatefulDataLoader
    from guideloom.pytorch import DDACSDataset as DDACSDataset
    from guideloom.pytorch import RDDACDataset as RDDACDataset
    from guideloom.read.views import View as View
    from guideloom.reader import Export as Export
    from guideloom.reader import load_export as load_export
    from guideloom.releases.release import download as download
    from guideloom.runtime.caches import clear_caches as clear_caches
    from guideloom.select.manifest import load as load
    from guideloom.select.parse import Dataset as Dataset
    from guideloom.select.parse import add_view as add_view
    from guideloom.select.presets import DDACS_SPEC as DDACS_SPEC
    from guideloom.select.presets import RDDAC_SPEC as RDDAC_SPEC
    from guideloom.select.presets import DatasetSpec as DatasetSpec
    from guideloom.select.stream import iter_view as iter_view
    from guideloom.storage.dataset import DocumentDataset as DocumentDataset
    from guideloom.storage.dataset import StreamDataset as StreamDataset
    from guideloom.storage.document import DocumentStorage as DocumentStorage
    from guideloom.storage.formats import DocumentPickleFormat as DocumentPickleFormat
    from guideloom.storage.formats import StreamNumpyFormat as StreamNumpyFormat
    from guideloom.storage.stream import StreamStorage as StreamStorage
    from guideloom.storage.stream_meta import StreamWithMetaStorage as StreamWithMetaStorage


# a library logs and never prints: records go nowhere until the application configures logging
# (the command line installs its own handler; see docs/configuration.md, "Logging")
logging.getLogger(__name__).addHandler(logging.NullHandler())

# public name -> module that defines it (imported on first attribute access)
_LAZY: dict[str, str] = {
    # manifest, views and experiment files
    "load": "guideloom.select.manifest",
    "add_view": "guideloom.select.parse",
    "Dataset": "guideloom.select.parse",
    "DatasetSpec": "guideloom.select.presets",
    "RDDAC_SPEC": "guideloom.select.presets",
    "DDACS_SPEC": "guideloom.select.presets",
    "croissant": "guideloom.croissant",
    "h5_tools": "guideloom.h5_tools",
    "inspect_h5": "guideloom.h5_tools",
    "View": "guideloom.read.views",
    "open_h5": "guideloom.h5_tools",
    "make_demo_data": "guideloom.demo",
    "clear_caches": "guideloom.runtime.caches",
    # plots (rddac 2.0's names, defined in guideloom.compat; matplotlib: guideloom[plot])
    "visualization": "guideloom.visualization",
    "plot_scan": "guideloom.compat.visualization",
    "scan_to_pointcloud": "guideloom.compat.visualization",
    "plot_point_cloud": "guideloom.compat.visualization",
    "plot_force": "guideloom.compat.visualization",
    "plot_traverse": "guideloom.compat.visualization",
    # ddacs 3.2's plots, top level as ddacs has them (defined in guideloom.compat)
    "ddacs_visualization": "guideloom.ddacs_visualization",
    "plot_mesh": "guideloom.compat.ddacs_visualization",
    "plot_vectors": "guideloom.compat.ddacs_visualization",
    "plot_2d_projection": "guideloom.compat.ddacs_visualization",
    "COMPONENT_COLORS": "guideloom.compat.ddacs_visualization",
    "streaming": "guideloom.streaming",
    "iter_view": "guideloom.select.stream",
    "extract_zips": "guideloom.export.extract",
    # the published release (DaRUS): rddac's `download`, verified and resumable
    "download": "guideloom.releases.release",
    # exports
    "export_to_numpy": "guideloom.export.api",
    "export_to_numpy_per_sim": "guideloom.export.api",
    "export_to_zarr": "guideloom.export.api",
    "export_to_storage": "guideloom.export.api",
    "load_export": "guideloom.reader",
    "export": "guideloom.export",  # the package; guideloom.export.export is the function
    "Export": "guideloom.reader",
    "ExportSpec": "guideloom.export.spec",
    "ExportResult": "guideloom.export",
    # where jobs run
    "local_cluster": "guideloom.cluster",
    "close_cluster": "guideloom.cluster",
    # GuideLoom storages
    "StreamStorage": "guideloom.storage.stream",
    "StreamNumpyFormat": "guideloom.storage.formats",
    "StreamDataset": "guideloom.storage.dataset",
    "DocumentStorage": "guideloom.storage.document",
    "DocumentPickleFormat": "guideloom.storage.formats",
    "DocumentDataset": "guideloom.storage.dataset",
    "StreamWithMetaStorage": "guideloom.storage.stream_meta",
    # training loader
    "StatefulDataLoader": "guideloom.loader.core",
    # GuideLoom 1.1's subpackages named in its __all__ (guideloom.types, guideloom.io)
    "io": "guideloom.io",
    "types": "guideloom.types",
    # PyTorch datasets with rddac's / ddacs' names (need torch; not in __all__)
    "pytorch": "guideloom.pytorch",
    "RDDACDataset": "guideloom.pytorch",
    "DDACSDataset": "guideloom.pytorch",
    # errors and warnings (all defined in guideloom.errors)
    "GuideloomError": "guideloom.errors",
    "GuideloomWarning": "guideloom.errors",
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
    "UpdateRefusedError": "guideloom.errors",
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
