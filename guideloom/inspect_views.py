# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of describing a dataset's views, :mod:`guideloom.select.views`."""

import sys
from typing import TYPE_CHECKING

from guideloom.select import views as _module

if TYPE_CHECKING:  # what a type checker sees: the module's names
    from guideloom.select.views import *  # noqa: F403

sys.modules[__name__] = _module
