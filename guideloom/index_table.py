# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of the typed index table, :mod:`guideloom.select.index`."""

import sys
from typing import TYPE_CHECKING

from guideloom.select import index as _module

if TYPE_CHECKING:  # what a type checker sees: the module's names
    from guideloom.select.index import *  # noqa: F403

sys.modules[__name__] = _module
