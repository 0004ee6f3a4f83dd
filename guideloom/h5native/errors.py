"""The native reader's exceptions (defined with guideloom's others in :mod:`guideloom.errors`)."""

from __future__ import annotations

from guideloom.errors import NativeDamageError, NativeError, NativeFormatError, NativeUnsupported

__all__ = ["NativeDamageError", "NativeError", "NativeFormatError", "NativeUnsupported"]
