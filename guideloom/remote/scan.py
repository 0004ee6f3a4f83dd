# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier read path: a remote release's experiments, scanned by
:mod:`guideloom.read.roots`."""

from guideloom.read.roots import release_locations

__all__ = ["release_locations"]
