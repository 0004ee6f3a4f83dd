# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of the zip-to-loose extraction job,
:mod:`guideloom.export.extract`."""

import sys

from guideloom.export import extract

sys.modules[__name__] = extract
