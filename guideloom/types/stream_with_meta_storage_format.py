"""GuideLoom 1.1's import path for the stream-with-metadata format protocol."""

from guideloom.storage.types import StreamWithMetaStorageFormat

__all__ = ["StreamWithMetaStorageFormat"]
