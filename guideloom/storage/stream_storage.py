# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for :class:`~guideloom.storage.StreamStorage`."""

from guideloom.storage.stream import StreamStorage

__all__ = ["StreamStorage"]
