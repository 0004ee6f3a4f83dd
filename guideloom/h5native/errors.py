"""The native reader's exceptions (defined with guideloom's others in :mod:`guideloom.errors`)."""

from __future__ import annotations

from guideloom.errors import NativeError, NativeFormatError, NativeUnsupported

__all__ = ["NativeError", "NativeFormatError", "NativeUnsupported"]
