# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""rddac 2.0's ``streaming``: the records of a view (``iter_view``, defined in
:mod:`guideloom.select.stream`), the exports (defined in :mod:`guideloom.export.api`)
and their reader (:mod:`guideloom.reader`)."""

from guideloom.errors import MissingDataWarning
from guideloom.export.api import (
    export_to_numpy,
    export_to_numpy_per_sim,
    export_to_storage,
    export_to_zarr,
)
from guideloom.h5_tools import DEFAULT_DATA_DIR
from guideloom.read.records import SIM_ID_KEY
from guideloom.reader import Export, load_export
from guideloom.select.stream import iter_view

__all__ = [
    "DEFAULT_DATA_DIR",
    "SIM_ID_KEY",
    "Export",
    "MissingDataWarning",
    "export_to_numpy",
    "export_to_numpy_per_sim",
    "export_to_storage",
    "export_to_zarr",
    "iter_view",
    "load_export",
]
