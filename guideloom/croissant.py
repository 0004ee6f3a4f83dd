# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of the Croissant manifest parser,
:mod:`guideloom.select.manifest`."""

import sys

from guideloom.select import manifest

sys.modules[__name__] = manifest
