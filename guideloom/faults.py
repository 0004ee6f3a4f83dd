# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of the test fault points, :mod:`guideloom.runtime.faults`."""

import sys

from guideloom.runtime import faults

sys.modules[__name__] = faults
