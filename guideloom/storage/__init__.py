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
