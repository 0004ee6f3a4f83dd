"""GuideLoom 1.1's ``guideloom.dataset``: dataset views, defined in guideloom.storage.dataset."""

from guideloom.storage.dataset import DocumentDataset, StreamDataset

__all__ = ["DocumentDataset", "StreamDataset"]
