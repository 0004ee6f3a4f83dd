# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of an export's Croissant description,
:mod:`guideloom.export.publish`."""

import sys
from typing import TYPE_CHECKING

from guideloom.export import publish as _module

if TYPE_CHECKING:  # what a type checker sees: the module's names
    from guideloom.export.publish import *  # noqa: F403

sys.modules[__name__] = _module
