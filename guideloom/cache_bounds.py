# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of the caches' default bounds,
:mod:`guideloom.runtime.cache_bounds`."""

import sys

from guideloom.runtime import cache_bounds

sys.modules[__name__] = cache_bounds
