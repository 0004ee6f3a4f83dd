# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of describing a dataset's views, :mod:`guideloom.select.views`."""

import sys

from guideloom.select import views

sys.modules[__name__] = views
