"""Errors raised by GuideLoom storages."""

from __future__ import annotations

from guideloom.errors import GuideloomError


class StorageError(GuideloomError, ValueError):
    """A storage directory or shard cannot be read safely (gap, truncation, dtype mismatch...)."""


class FormatContractError(GuideloomError, ValueError):
    """A storage format broke its protocol (wrong dtype, length, key order...)."""
