# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier flat path of files safe in shared folders,
:mod:`guideloom.runtime.private_files`."""

import sys

from guideloom.runtime import private_files

sys.modules[__name__] = private_files
