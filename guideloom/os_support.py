# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of what the operating system offers,
:mod:`guideloom.runtime.os_support`."""

import sys

from guideloom.runtime import os_support

sys.modules[__name__] = os_support
