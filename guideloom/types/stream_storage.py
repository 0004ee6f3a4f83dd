# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for the stream-storage bases."""

from guideloom.storage.abstract import (
    StreamStorageAbstract,
    StreamStorageAsyncReaderAbstract,
    StreamStorageSyncReaderAbstract,
    StreamStorageSyncWriterAbstract,
)

__all__ = [
    "StreamStorageAbstract",
    "StreamStorageAsyncReaderAbstract",
    "StreamStorageSyncReaderAbstract",
    "StreamStorageSyncWriterAbstract",
]
