"""GuideLoom 1.1's module path of the loader: ``guideloom.pytorch.stateful_dataloader``.

:class:`StatefulDataLoader` is defined in :mod:`guideloom.loader.core` (it needs no torch to
import; its batches do). This module imports torch, as 1.1's does.
"""

from typing import Any

from guideloom.loader.core import StatefulDataLoader
from guideloom.loader.torch_adapter import non_blocking_transfer, require_torch

require_torch()  # 1.1's module imports torch: without it, the extra to install is named

__all__ = ["StatefulDataLoader"]


def _use_non_blocking_transfer(device: Any) -> bool:
    """GuideLoom 1.1's name of :func:`guideloom.loader.torch_adapter.non_blocking_transfer`."""
    return non_blocking_transfer(device)
