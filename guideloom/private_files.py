# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of files safe in shared folders,
:mod:`guideloom.runtime.private_files`."""

import sys
from typing import TYPE_CHECKING

from guideloom.runtime import private_files as _module

if TYPE_CHECKING:  # what a type checker sees: the module's names
    from guideloom.runtime.private_files import *  # noqa: F403

sys.modules[__name__] = _module
