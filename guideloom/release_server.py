# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of ``guideloom serve-release``,
:mod:`guideloom.releases.server`."""

import sys
from typing import TYPE_CHECKING

from guideloom.releases import server as _module

if TYPE_CHECKING:  # what a type checker sees: the module's names
    from guideloom.releases.server import *  # noqa: F403

sys.modules[__name__] = _module
