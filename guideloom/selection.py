# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of choosing a job's experiments,
:mod:`guideloom.select.selection`."""

import sys
from typing import TYPE_CHECKING

from guideloom.select import selection as _module

if TYPE_CHECKING:  # what a type checker sees: the module's names
    from guideloom.select.selection import *  # noqa: F403

sys.modules[__name__] = _module
