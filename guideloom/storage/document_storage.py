# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for :class:`~guideloom.storage.DocumentStorage`."""

from guideloom.storage.document import DocumentStorage

__all__ = ["DocumentStorage"]
