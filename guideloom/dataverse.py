# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of the Dataverse API calls, :mod:`guideloom.net.dataverse`."""

import sys
from typing import TYPE_CHECKING

from guideloom.net import dataverse as _module

if TYPE_CHECKING:  # what a type checker sees: the module's names
    from guideloom.net.dataverse import *  # noqa: F403

sys.modules[__name__] = _module
