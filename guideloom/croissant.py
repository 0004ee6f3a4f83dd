# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of the Croissant manifest parser,
:mod:`guideloom.select.manifest`."""

import sys
from typing import TYPE_CHECKING

from guideloom.select import manifest as _module

if TYPE_CHECKING:  # what a type checker sees: the module's names
    from guideloom.select.manifest import *  # noqa: F403

sys.modules[__name__] = _module
