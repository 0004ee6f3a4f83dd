"""Compatibility stub: the experiments of a remote release are now scanned by
guideloom.read.roots (:meth:`RemoteRoot.locations <guideloom.read.roots.RemoteRoot.locations>`)."""

from __future__ import annotations

from guideloom.read.roots import release_locations

__all__ = ["release_locations"]
