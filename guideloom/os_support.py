# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of what the operating system offers,
:mod:`guideloom.runtime.os_support`."""

import sys
from typing import TYPE_CHECKING

from guideloom.runtime import os_support as _module

if TYPE_CHECKING:  # what a type checker sees: the module's names
    from guideloom.runtime.os_support import *  # noqa: F403

sys.modules[__name__] = _module
