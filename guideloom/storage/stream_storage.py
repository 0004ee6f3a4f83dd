# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for :class:`~guideloom.storage.StreamStorage`."""

from guideloom.filesystem import FileSystemStream
from guideloom.storage.abstract import (
    IOReaderAbstract,
    StreamStorageAbstract,
    StreamStorageAsyncReaderAbstract,
    StreamStorageSyncReaderAbstract,
    StreamStorageSyncWriterAbstract,
    Vector,
)
from guideloom.storage.io import SeekIO
from guideloom.storage.stream import StreamStorage
from guideloom.storage.types import StreamStorageFormat

__all__ = [
    "FileSystemStream",
    "IOReaderAbstract",
    "SeekIO",
    "StreamStorage",
    "StreamStorageAbstract",
    "StreamStorageAsyncReaderAbstract",
    "StreamStorageFormat",
    "StreamStorageSyncReaderAbstract",
    "StreamStorageSyncWriterAbstract",
    "Vector",
]
