# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for :class:`~guideloom.filesystem.FileSystemStream`."""

from guideloom.filesystem import FileSystemStream

__all__ = ["FileSystemStream"]
