# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of fetching one file over HTTP, :mod:`guideloom.net.fetch`."""

import sys
from typing import TYPE_CHECKING

from guideloom.net import fetch as _module

if TYPE_CHECKING:  # what a type checker sees: the module's names
    from guideloom.net.fetch import *  # noqa: F403

sys.modules[__name__] = _module
