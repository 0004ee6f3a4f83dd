# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for :class:`~guideloom.storage.formats.DocumentPickleFormat`."""

from guideloom.storage.formats import DocumentPickleFormat

__all__ = ["DocumentPickleFormat"]
