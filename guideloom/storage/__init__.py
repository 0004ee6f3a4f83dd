"""GuideLoom storages: sharded streams, documents and streams with metadata, plus dataset views.

Layout and rules are described in ``docs/storage.md`` and :mod:`guideloom.storage.shards`.
"""

from __future__ import annotations

from guideloom.errors import FormatContractError, StorageError
from guideloom.storage.dataset import (
    AsyncDocumentDatasetReader,
    AsyncStreamDatasetReader,
    DocumentDataset,
    DocumentDatasetReader,
    StreamDataset,
    StreamDatasetReader,
)
from guideloom.storage.document import (
    AsyncDocumentReader,
    DocumentReader,
    DocumentStorage,
    DocumentWriter,
)
from guideloom.storage.formats import DocumentPickleFormat, StreamNumpyFormat
from guideloom.storage.stream import AsyncStreamReader, StreamReader, StreamStorage, StreamWriter
from guideloom.storage.stream_meta import (
    AsyncStreamWithMetaReader,
    StreamWithMetaReader,
    StreamWithMetaStorage,
    StreamWithMetaWriter,
)

__all__ = [
    "AsyncDocumentDatasetReader",
    "AsyncDocumentReader",
    "AsyncStreamDatasetReader",
    "AsyncStreamReader",
    "AsyncStreamWithMetaReader",
    "DocumentDataset",
    "DocumentDatasetReader",
    "DocumentPickleFormat",
    "DocumentReader",
    "DocumentStorage",
    "DocumentWriter",
    "FormatContractError",
    "StorageError",
    "StreamDataset",
    "StreamDatasetReader",
    "StreamNumpyFormat",
    "StreamReader",
    "StreamStorage",
    "StreamWithMetaReader",
    "StreamWithMetaStorage",
    "StreamWithMetaWriter",
    "StreamWriter",
]


def _register_with_guideloom11_bases() -> None:
    """Make ``isinstance(x, guideloom.types.<1.1 base>)`` hold for guideloom's classes."""
    from guideloom.storage import abstract as ab

    pairs = [
        (ab.StreamStorageAbstract, (StreamStorage, StreamWithMetaStorage)),
        (ab.StreamStorageSyncWriterAbstract, (StreamWriter, StreamWithMetaWriter)),
        (ab.StreamStorageSyncReaderAbstract, (StreamReader, StreamWithMetaReader)),
        (ab.StreamStorageAsyncReaderAbstract, (AsyncStreamReader, AsyncStreamWithMetaReader)),
        (ab.DocumentStorageAbstract, (DocumentStorage,)),
        (ab.DocumentStorageSyncWriterAbstract, (DocumentWriter,)),
        (ab.DocumentStorageSyncReaderAbstract, (DocumentReader,)),
        (ab.DocumentStorageAsyncReaderAbstract, (AsyncDocumentReader,)),
        (ab.DatasetAbstract, (StreamDataset, DocumentDataset)),
        (ab.DatasetSyncReaderAbstract, (StreamDatasetReader, DocumentDatasetReader)),
        (ab.DatasetAsyncReaderAbstract, (AsyncStreamDatasetReader, AsyncDocumentDatasetReader)),
    ]
    for base, classes in pairs:
        for cls in classes:
            base.register(cls)


_register_with_guideloom11_bases()
