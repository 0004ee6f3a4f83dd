# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of aligned buffers, :mod:`guideloom.runtime.buffers`."""

import sys
from typing import TYPE_CHECKING

from guideloom.runtime import buffers as _module

if TYPE_CHECKING:  # what a type checker sees: the module's names
    from guideloom.runtime.buffers import *  # noqa: F403

sys.modules[__name__] = _module
