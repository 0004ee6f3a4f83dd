"""GuideLoom 1.1's import path for :class:`~guideloom.storage.dataset.DocumentDataset`.

GuideLoom 1.1 named the dataset's readers ``DocumentSyncReaderDataset`` and
``DocumentAsyncReaderDataset``; those names are kept here for guideloom's readers.
"""

from guideloom.storage.dataset import (
    AsyncDocumentDatasetReader,
    DocumentDataset,
    DocumentDatasetReader,
)

DocumentSyncReaderDataset = DocumentDatasetReader
DocumentAsyncReaderDataset = AsyncDocumentDatasetReader

__all__ = ["DocumentAsyncReaderDataset", "DocumentDataset", "DocumentSyncReaderDataset"]
