"""Compatibility stub: per-process byte sources and fetching small files whole now live in
guideloom.read.fetch."""

from __future__ import annotations

from guideloom.read.fetch import FIRST_WHOLE, MAX_WHOLE, fetch_bytes, http_validator, source_of

__all__ = ["FIRST_WHOLE", "MAX_WHOLE", "fetch_bytes", "http_validator", "source_of"]
