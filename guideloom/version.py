# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's ``guideloom.version``: the package version."""

from guideloom import __version__

__all__ = ["__version__"]
