# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for :class:`~guideloom.storage.dataset.StreamDataset` and its
readers (1.1's ``StreamSyncReaderDataset`` / ``StreamAsyncReaderDataset`` are
guideloom's ``StreamDatasetReader`` / ``AsyncStreamDatasetReader``)."""

from guideloom.storage.abstract import (
    DatasetAbstract,
    DatasetAsyncReaderAbstract,
    DatasetSyncReaderAbstract,
    StreamStorageAbstract,
)
from guideloom.storage.dataset import AsyncStreamDatasetReader, StreamDataset, StreamDatasetReader

StreamAsyncReaderDataset = AsyncStreamDatasetReader
StreamSyncReaderDataset = StreamDatasetReader

__all__ = [
    "DatasetAbstract",
    "DatasetAsyncReaderAbstract",
    "DatasetSyncReaderAbstract",
    "StreamAsyncReaderDataset",
    "StreamDataset",
    "StreamStorageAbstract",
    "StreamSyncReaderDataset",
]
