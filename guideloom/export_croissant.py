# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of an export's Croissant description,
:mod:`guideloom.export.publish`."""

import sys

from guideloom.export import publish

sys.modules[__name__] = publish
