# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier read path: small files fetched whole, defined in
:mod:`guideloom.read.fetch`."""

from guideloom.read.fetch import FIRST_WHOLE, MAX_WHOLE, fetch_bytes, http_validator, source_of

__all__ = ["FIRST_WHOLE", "MAX_WHOLE", "fetch_bytes", "http_validator", "source_of"]
