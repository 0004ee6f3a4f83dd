"""Compatibility stub: the manifest of a remote release is now read by
guideloom.read.manifest."""

from __future__ import annotations

from guideloom.read.manifest import remote_manifest

__all__ = ["remote_manifest"]
