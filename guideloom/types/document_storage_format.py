# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for the document format protocol."""

from guideloom.storage.abstract import StorageBufferTypes, UserBufferTypes
from guideloom.storage.types import DocumentStorageFormat

__all__ = ["DocumentStorageFormat", "StorageBufferTypes", "UserBufferTypes"]
