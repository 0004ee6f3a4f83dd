# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for the buffer and vector aliases."""

from guideloom.storage.abstract import StorageBufferTypes, UserBufferTypes, Vector

__all__ = ["StorageBufferTypes", "UserBufferTypes", "Vector"]
