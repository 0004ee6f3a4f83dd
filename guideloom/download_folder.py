# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of a download's folders and files, :mod:`guideloom.net.folder`."""

import sys
from typing import TYPE_CHECKING

from guideloom.net import folder as _module

if TYPE_CHECKING:  # what a type checker sees: the module's names
    from guideloom.net.folder import *  # noqa: F403

sys.modules[__name__] = _module
