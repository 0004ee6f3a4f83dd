# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier read path: a remote release's loose files, found by
:mod:`guideloom.read.remote_loose`."""

from guideloom.read.remote_loose import (
    FALLBACK_FORMATS,
    PROBE_FIRST,
    PROBE_THREADS,
    loose_locations,
)

__all__ = ["FALLBACK_FORMATS", "PROBE_FIRST", "PROBE_THREADS", "loose_locations"]
