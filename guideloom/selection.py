# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of choosing a job's experiments,
:mod:`guideloom.select.selection`."""

import sys

from guideloom.select import selection

sys.modules[__name__] = selection
