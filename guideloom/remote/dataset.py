# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier read path: a remote release's manifest, read by
:mod:`guideloom.read.manifest`."""

from guideloom.read.manifest import remote_manifest

__all__ = ["remote_manifest"]
