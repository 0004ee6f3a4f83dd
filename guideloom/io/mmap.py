# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for :class:`~guideloom.storage.io.MmapIO`."""

from guideloom.storage.abstract import IOAsyncReaderAbstract, IOReaderAbstract, IOSyncReaderAbstract
from guideloom.storage.io import MmapIO

__all__ = ["IOAsyncReaderAbstract", "IOReaderAbstract", "IOSyncReaderAbstract", "MmapIO"]
