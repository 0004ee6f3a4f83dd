# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier read path: the CRC-32 checks of zip members, which is the module
:mod:`guideloom.read.zipmember` itself (one check and one verdict cache)."""

import sys

from guideloom.read import zipmember

sys.modules[__name__] = zipmember
