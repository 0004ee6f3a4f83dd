# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for the file-reader bases."""

from guideloom.storage.abstract import (
    IOAsyncReaderAbstract,
    IOReaderAbstract,
    IOSyncReaderAbstract,
    StorageBufferTypes,
)

__all__ = [
    "IOAsyncReaderAbstract",
    "IOReaderAbstract",
    "IOSyncReaderAbstract",
    "StorageBufferTypes",
]
