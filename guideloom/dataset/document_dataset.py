"""GuideLoom 1.1's import path for :class:`~guideloom.storage.dataset.DocumentDataset`."""

from guideloom.storage.dataset import DocumentDataset

__all__ = ["DocumentDataset"]
