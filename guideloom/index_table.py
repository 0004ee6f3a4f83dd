# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of the typed index table, :mod:`guideloom.select.index`."""

import sys

from guideloom.select import index

sys.modules[__name__] = index
