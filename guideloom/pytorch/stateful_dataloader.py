"""GuideLoom 1.1's module path of the loader: ``guideloom.pytorch.stateful_dataloader``.

:class:`StatefulDataLoader` is defined in :mod:`guideloom.loader.core` (it needs no torch to
import; its batches do). This module imports torch, as 1.1's does.
"""

from guideloom.loader.core import StatefulDataLoader
from guideloom.loader.torch_adapter import require_torch

require_torch()  # 1.1's module imports torch: without it, the extra to install is named

__all__ = ["StatefulDataLoader"]
