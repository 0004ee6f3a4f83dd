# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier read path: the CRC-32 checks of zip members, which is the module
:mod:`guideloom.read.zipmember` itself (one check and one verdict cache)."""

import sys
from typing import TYPE_CHECKING

from guideloom.read import zipmember as _module

if TYPE_CHECKING:  # what a type checker sees: the module's names
    from guideloom.read.zipmember import *  # noqa: F403

sys.modules[__name__] = _module
