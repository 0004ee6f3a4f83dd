# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for :class:`~guideloom.filesystem.FileSystemStream`."""

from guideloom.filesystem import FileSystemStream
from guideloom.storage.abstract import (
    AsyncContextManager,
    IOAsyncReaderAbstract,
    IOReaderAbstract,
    IOSyncReaderAbstract,
    SyncContextManager,
    Vector,
)
from guideloom.storage.io import SeekIO

__all__ = [
    "AsyncContextManager",
    "FileSystemStream",
    "IOAsyncReaderAbstract",
    "IOReaderAbstract",
    "IOSyncReaderAbstract",
    "SeekIO",
    "SyncContextManager",
    "Vector",
]
