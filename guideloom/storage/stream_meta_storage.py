# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for :class:`~guideloom.storage.StreamWithMetaStorage`."""

from guideloom.storage.stream_meta import StreamWithMetaStorage

__all__ = ["StreamWithMetaStorage"]
