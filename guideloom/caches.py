# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of the in-process caches, :mod:`guideloom.runtime.caches`."""

import sys

from guideloom.runtime import caches

sys.modules[__name__] = caches
