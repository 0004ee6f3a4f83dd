# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for :class:`~guideloom.filesystem.FileSystemDocument`."""

from guideloom.filesystem import FileSystemDocument

__all__ = ["FileSystemDocument"]
