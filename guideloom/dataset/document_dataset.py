# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""GuideLoom 1.1's import path for :class:`~guideloom.storage.dataset.DocumentDataset` and its
readers (1.1's ``DocumentSyncReaderDataset`` / ``DocumentAsyncReaderDataset`` are
guideloom's ``DocumentDatasetReader`` / ``AsyncDocumentDatasetReader``)."""

from guideloom.storage.abstract import (
    DatasetAbstract,
    DatasetAsyncReaderAbstract,
    DatasetSyncReaderAbstract,
    DocumentStorageAbstract,
)
from guideloom.storage.dataset import (
    AsyncDocumentDatasetReader,
    DocumentDataset,
    DocumentDatasetReader,
)

DocumentAsyncReaderDataset = AsyncDocumentDatasetReader
DocumentSyncReaderDataset = DocumentDatasetReader

__all__ = [
    "DatasetAbstract",
    "DatasetAsyncReaderAbstract",
    "DatasetSyncReaderAbstract",
    "DocumentAsyncReaderDataset",
    "DocumentDataset",
    "DocumentStorageAbstract",
    "DocumentSyncReaderDataset",
]
