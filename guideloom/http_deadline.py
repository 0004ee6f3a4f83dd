# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of the deadlines of HTTP requests,
:mod:`guideloom.net.deadline`."""

import sys
from typing import TYPE_CHECKING

from guideloom.net import deadline as _module

if TYPE_CHECKING:  # what a type checker sees: the module's names
    from guideloom.net.deadline import *  # noqa: F403

sys.modules[__name__] = _module
