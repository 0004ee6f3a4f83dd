# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier path of the matplotlib loader, defined in
:mod:`guideloom.compat.plot_backend`."""

from guideloom.compat.plot_backend import DEFAULT_DPI, pyplot

__all__ = ["DEFAULT_DPI", "pyplot"]
