# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""ddacs 3.2's plots of meshes, point clouds and vector fields, defined in
:mod:`guideloom.compat.ddacs_visualization`."""

import importlib
from typing import Any

from guideloom.compat.ddacs_visualization import (
    COMPONENT_COLORS,
    COMPONENT_NAMES,
    DEFAULT_AXIS_LIMITS,
    DEFAULT_DPI,
    DEFAULT_VIEW_AZIMUTH,
    DEFAULT_VIEW_ELEVATION,
    plot_2d_projection,
    plot_mesh,
    plot_point_cloud,
    plot_vectors,
)

#: Names the target serves on first access (its module ``__getattr__``).
_LAZY = {
    "FALSE_COLOR_CMAP": ("guideloom.compat.ddacs_visualization", "FALSE_COLOR_CMAP"),
}

__all__ = [
    "COMPONENT_COLORS",
    "COMPONENT_NAMES",
    "DEFAULT_AXIS_LIMITS",
    "DEFAULT_DPI",
    "DEFAULT_VIEW_AZIMUTH",
    "DEFAULT_VIEW_ELEVATION",
    "plot_2d_projection",
    "plot_mesh",
    "plot_point_cloud",
    "plot_vectors",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, source = _LAZY[name]
    return getattr(importlib.import_module(module), source)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
