# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for the stream format protocol."""

from guideloom.storage.abstract import Vector
from guideloom.storage.types import StreamStorageFormat

__all__ = ["StreamStorageFormat", "Vector"]
