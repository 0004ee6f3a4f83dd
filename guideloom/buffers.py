# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of aligned buffers, :mod:`guideloom.runtime.buffers`."""

import sys

from guideloom.runtime import buffers

sys.modules[__name__] = buffers
