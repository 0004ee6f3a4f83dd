"""GuideLoom 1.1's import path for :class:`~guideloom.storage.dataset.StreamDataset`."""

from guideloom.storage.dataset import StreamDataset

__all__ = ["StreamDataset"]
