# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for :class:`~guideloom.storage.StreamWithMetaStorage`."""

from guideloom.filesystem import FileSystemDocument, FileSystemStream
from guideloom.storage.abstract import (
    IOReaderAbstract,
    StreamStorageAbstract,
    StreamStorageAsyncReaderAbstract,
    StreamStorageSyncReaderAbstract,
    StreamStorageSyncWriterAbstract,
    Vector,
)
from guideloom.storage.io import SeekIO
from guideloom.storage.stream_meta import StreamWithMetaStorage
from guideloom.storage.types import StreamWithMetaStorageFormat

__all__ = [
    "FileSystemDocument",
    "FileSystemStream",
    "IOReaderAbstract",
    "SeekIO",
    "StreamStorageAbstract",
    "StreamStorageAsyncReaderAbstract",
    "StreamStorageSyncReaderAbstract",
    "StreamStorageSyncWriterAbstract",
    "StreamWithMetaStorage",
    "StreamWithMetaStorageFormat",
    "Vector",
]
