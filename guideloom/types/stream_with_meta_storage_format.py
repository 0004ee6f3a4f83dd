# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for the stream-with-metadata format protocol."""

from guideloom.storage.abstract import StorageBufferTypes, UserBufferTypes, Vector
from guideloom.storage.types import StreamWithMetaStorageFormat

__all__ = ["StorageBufferTypes", "StreamWithMetaStorageFormat", "UserBufferTypes", "Vector"]
