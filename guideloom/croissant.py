# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""rddac 2.0's / ddacs 3.2's ``croissant``: the Croissant manifest parser, which is the
module :mod:`guideloom.select.manifest` itself."""

import sys
from typing import TYPE_CHECKING

from guideloom.select import manifest as _module

if TYPE_CHECKING:  # what a type checker sees: the module's names
    from guideloom.select.manifest import *  # noqa: F403

sys.modules[__name__] = _module
