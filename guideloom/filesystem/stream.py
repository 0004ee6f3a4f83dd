"""GuideLoom 1.1's import path for :class:`~guideloom.filesystem.FileSystemStream`."""

from guideloom.filesystem import FileSystemStream

__all__ = ["FileSystemStream"]
