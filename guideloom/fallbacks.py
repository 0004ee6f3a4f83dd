# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of the fallback counts, :mod:`guideloom.runtime.fallbacks`."""

import sys

from guideloom.runtime import fallbacks

sys.modules[__name__] = fallbacks
