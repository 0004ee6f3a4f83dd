# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for :class:`~guideloom.storage.formats.StreamNumpyFormat`."""

from guideloom.storage.abstract import Vector
from guideloom.storage.formats import StreamNumpyFormat
from guideloom.storage.types import StreamStorageFormat

__all__ = ["StreamNumpyFormat", "StreamStorageFormat", "Vector"]
