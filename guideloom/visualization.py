# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""rddac 2.0's ``visualization`` (and ddacs 3.2's plots, as ddacs code finds them),
defined in :mod:`guideloom.compat.visualization`."""

import importlib
from typing import Any

from guideloom.compat.visualization import (
    DEFAULT_DPI,
    FORCE_COLUMNS,
    SCAN_X_SHAPE,
    SCAN_Y_SHAPE,
    plot_force,
    plot_point_cloud,
    plot_scan,
    plot_traverse,
    scan_to_pointcloud,
)

#: Names the target serves on first access (its module ``__getattr__``).
_LAZY = {
    "COMPONENT_COLORS": ("guideloom.compat.visualization", "COMPONENT_COLORS"),
    "COMPONENT_NAMES": ("guideloom.compat.visualization", "COMPONENT_NAMES"),
    "DEFAULT_AXIS_LIMITS": ("guideloom.compat.visualization", "DEFAULT_AXIS_LIMITS"),
    "DEFAULT_VIEW_AZIMUTH": ("guideloom.compat.visualization", "DEFAULT_VIEW_AZIMUTH"),
    "DEFAULT_VIEW_ELEVATION": ("guideloom.compat.visualization", "DEFAULT_VIEW_ELEVATION"),
    "FALSE_COLOR_CMAP": ("guideloom.compat.visualization", "FALSE_COLOR_CMAP"),
    "plot_2d_projection": ("guideloom.compat.visualization", "plot_2d_projection"),
    "plot_mesh": ("guideloom.compat.visualization", "plot_mesh"),
    "plot_vectors": ("guideloom.compat.visualization", "plot_vectors"),
}

__all__ = [
    "DEFAULT_DPI",
    "FORCE_COLUMNS",
    "SCAN_X_SHAPE",
    "SCAN_Y_SHAPE",
    "plot_force",
    "plot_point_cloud",
    "plot_scan",
    "plot_traverse",
    "scan_to_pointcloud",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, source = _LAZY[name]
    return getattr(importlib.import_module(module), source)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
