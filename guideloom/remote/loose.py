"""Compatibility stub: the loose files of a remote release are now found by
guideloom.read.remote_loose."""

from __future__ import annotations

from guideloom.read.remote_loose import (
    FALLBACK_FORMATS,
    PROBE_FIRST,
    PROBE_THREADS,
    loose_locations,
)

__all__ = ["FALLBACK_FORMATS", "PROBE_FIRST", "PROBE_THREADS", "loose_locations"]
