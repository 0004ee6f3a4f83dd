# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of a published release and its download,
:mod:`guideloom.releases.release`."""

import sys
from typing import TYPE_CHECKING

from guideloom.releases import release as _module

if TYPE_CHECKING:  # what a type checker sees: the module's names
    from guideloom.releases.release import *  # noqa: F403

sys.modules[__name__] = _module
