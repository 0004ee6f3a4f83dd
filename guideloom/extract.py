# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of the zip-to-loose extraction job,
:mod:`guideloom.export.extract`."""

import sys
from typing import TYPE_CHECKING

from guideloom.export import extract as _module

if TYPE_CHECKING:  # what a type checker sees: the module's names
    from guideloom.export.extract import *  # noqa: F403

sys.modules[__name__] = _module
