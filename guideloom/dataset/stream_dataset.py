"""GuideLoom 1.1's import path for :class:`~guideloom.storage.dataset.StreamDataset`.

GuideLoom 1.1 named the dataset's readers ``StreamSyncReaderDataset`` and
``StreamAsyncReaderDataset``; those names are kept here for guideloom's readers.
"""

from guideloom.storage.dataset import AsyncStreamDatasetReader, StreamDataset, StreamDatasetReader

StreamSyncReaderDataset = StreamDatasetReader
StreamAsyncReaderDataset = AsyncStreamDatasetReader

__all__ = ["StreamAsyncReaderDataset", "StreamDataset", "StreamSyncReaderDataset"]
