# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of the caches' default bounds,
:mod:`guideloom.runtime.cache_bounds`."""

import sys
from typing import TYPE_CHECKING

from guideloom.runtime import cache_bounds as _module

if TYPE_CHECKING:  # what a type checker sees: the module's names
    from guideloom.runtime.cache_bounds import *  # noqa: F403

sys.modules[__name__] = _module
