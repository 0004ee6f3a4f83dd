# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for the loader checkpoint type."""

from guideloom.storage.abstract import StatefulDataLoaderStateDict

__all__ = ["StatefulDataLoaderStateDict"]
