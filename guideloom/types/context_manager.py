# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for the context-manager bases."""

from guideloom.storage.abstract import AsyncContextManager, SyncContextManager

__all__ = ["AsyncContextManager", "SyncContextManager"]
