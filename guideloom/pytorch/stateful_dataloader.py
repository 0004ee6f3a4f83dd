"""GuideLoom 1.1's module path of the loader: ``guideloom.pytorch.stateful_dataloader``.

:class:`StatefulDataLoader` is defined in :mod:`guideloom.loader.core` (it needs no torch to
import; its batches do). This module imports torch, as 1.1's does.
"""

from typing import Any

from guideloom.loader.core import StatefulDataLoader
from guideloom.loader.torch_adapter import non_blocking_transfer, require_torch
from guideloom.shuffle import FeistelShuffler as FeistelShuffler
from guideloom.storage.abstract import DatasetAbstract as DatasetAbstract
from guideloom.storage.abstract import DatasetSyncReaderAbstract as DatasetSyncReaderAbstract
from guideloom.storage.abstract import DocumentStorageAbstract as DocumentStorageAbstract
from guideloom.storage.abstract import StatefulDataLoaderStateDict as StatefulDataLoaderStateDict
from guideloom.storage.abstract import StreamStorageAbstract as StreamStorageAbstract
from guideloom.storage.abstract import SyncContextManager as SyncContextManager
from guideloom.storage.dataset import DocumentDataset as DocumentDataset
from guideloom.storage.dataset import StreamDataset as StreamDataset

require_torch()  # 1.1's module imports torch: without it, the extra to install is named

# the other names above are those 1.1's module imported from its other public modules,
# importable here as there
__all__ = ["StatefulDataLoader"]


def _use_non_blocking_transfer(device: Any) -> bool:
    """GuideLoom 1.1's name of :func:`guideloom.loader.torch_adapter.non_blocking_transfer`."""
    return non_blocking_transfer(device)
