# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for :class:`~guideloom.filesystem.FileSystemDocument`."""

from guideloom.filesystem import FileSystemDocument
from guideloom.storage.abstract import (
    AsyncContextManager,
    IOAsyncReaderAbstract,
    IOReaderAbstract,
    IOSyncReaderAbstract,
    StorageBufferTypes,
    SyncContextManager,
    UserBufferTypes,
    Vector,
)
from guideloom.storage.io import SeekIO

__all__ = [
    "AsyncContextManager",
    "FileSystemDocument",
    "IOAsyncReaderAbstract",
    "IOReaderAbstract",
    "IOSyncReaderAbstract",
    "SeekIO",
    "StorageBufferTypes",
    "SyncContextManager",
    "UserBufferTypes",
    "Vector",
]
