"""The one table of guideloom's compatibility import paths.

Each :class:`Alias` is a module path that code written for rddac 2.0, ddacs 3.2, GuideLoom 1.1
or an earlier guideloom imports from, with the modules that hold its names now and the names it
re-exports. ``python -m guideloom.compat.generate`` writes every path as a thin stub module
(an ordinary file, no import hook); ``tests/test_import_paths.py`` checks that each stub is what
the generator writes from this table. To change a stub, change its entry here and regenerate.

This module is plain data and imports nothing of guideloom.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["ALIASES", "ALL", "Alias"]

#: In :attr:`Alias.names`: every name of the target module's ``__all__``.
ALL = "*"


@dataclass(frozen=True)
class Alias:
    """One old module path, kept importable as a stub.

    Attributes:
        path: The old module path, e.g. ``"guideloom.io.mmap"``.
        names: Target module -> the names the stub re-exports from it, or :data:`ALL` for the
            target's whole ``__all__``. ``"NewName as OldName"`` keeps a renamed object under
            its old name.
        doc: The stub's docstring: whose path this is and where the names are defined.
    """

    path: str
    names: Mapping[str, tuple[str, ...] | str]
    doc: str


_STORAGE_ABSTRACT = "guideloom.storage.abstract"
_STORAGE_TYPES = "guideloom.storage.types"
_GL11 = "GuideLoom 1.1's import path for"

ALIASES: tuple[Alias, ...] = (
    # ---------------------------------------------------------------- rddac 2.0 / ddacs 3.2
    Alias("guideloom.spec", {"guideloom.croissant": ("DDACS_SPEC", "RDDAC_SPEC", "DatasetSpec")},
          "Dataset specifications under rddac 2.0's / ddacs 3.2's module name (``rddac.spec``,\n"
          "``ddacs.spec``), defined in :mod:`guideloom.croissant`."),
    Alias("guideloom.visualization", {"guideloom.compat.visualization": ALL},
          "rddac 2.0's ``visualization`` (and ddacs 3.2's plots, as ddacs code finds them),\n"
          "defined in :mod:`guideloom.compat.visualization`."),
    Alias("guideloom.ddacs_visualization", {"guideloom.compat.ddacs_visualization": ALL},
          "ddacs 3.2's plots of meshes, point clouds and vector fields, defined in\n"
          ":mod:`guideloom.compat.ddacs_visualization`."),
    # ----------------------------------------------------- guideloom's own earlier module paths
    Alias("guideloom.plot_backend", {"guideloom.compat.plot_backend": ALL},
          "guideloom's earlier path of the matplotlib loader, defined in\n"
          ":mod:`guideloom.compat.plot_backend`."),
    Alias("guideloom.mlc_compat", {"guideloom.compat.mlc": ALL},
          "guideloom's earlier path of the ``mlcroissant.Dataset`` face, defined in\n"
          ":mod:`guideloom.compat.mlc`."),
    # ------------------------------------------------------------------------- GuideLoom 1.1
    Alias("guideloom.version", {"guideloom": ("__version__",)},
          "GuideLoom 1.1's ``guideloom.version``: the package version."),
    Alias("guideloom.dataset", {"guideloom.storage.dataset": ("DocumentDataset", "StreamDataset")},
          "GuideLoom 1.1's ``guideloom.dataset``: dataset views, defined in\n"
          ":mod:`guideloom.storage.dataset`."),
    Alias("guideloom.dataset.document_dataset",
          {"guideloom.storage.dataset": (
              "AsyncDocumentDatasetReader as DocumentAsyncReaderDataset", "DocumentDataset",
              "DocumentDatasetReader as DocumentSyncReaderDataset")},
          f"{_GL11} :class:`~guideloom.storage.dataset.DocumentDataset` and its\n"
          "readers (1.1's ``DocumentSyncReaderDataset`` / ``DocumentAsyncReaderDataset`` are\n"
          "guideloom's ``DocumentDatasetReader`` / ``AsyncDocumentDatasetReader``)."),
    Alias("guideloom.dataset.stream_dataset",
          {"guideloom.storage.dataset": (
              "AsyncStreamDatasetReader as StreamAsyncReaderDataset", "StreamDataset",
              "StreamDatasetReader as StreamSyncReaderDataset")},
          f"{_GL11} :class:`~guideloom.storage.dataset.StreamDataset` and its\n"
          "readers (1.1's ``StreamSyncReaderDataset`` / ``StreamAsyncReaderDataset`` are\n"
          "guideloom's ``StreamDatasetReader`` / ``AsyncStreamDatasetReader``)."),
    Alias("guideloom.filesystem.document", {"guideloom.filesystem": ("FileSystemDocument",)},
          f"{_GL11} :class:`~guideloom.filesystem.FileSystemDocument`."),
    Alias("guideloom.filesystem.stream", {"guideloom.filesystem": ("FileSystemStream",)},
          f"{_GL11} :class:`~guideloom.filesystem.FileSystemStream`."),
    Alias("guideloom.io", {"guideloom.storage.io": ("MmapIO", "PosixPreadIO", "SeekIO")},
          "GuideLoom 1.1's ``guideloom.io``: the file-reading backends, defined in\n"
          ":mod:`guideloom.storage.io`."),
    Alias("guideloom.io.mmap", {"guideloom.storage.io": ("MmapIO",)},
          f"{_GL11} :class:`~guideloom.storage.io.MmapIO`."),
    Alias("guideloom.io.posix_pread", {"guideloom.storage.io": ("PosixPreadIO",)},
          f"{_GL11} :class:`~guideloom.storage.io.PosixPreadIO`."),
    Alias("guideloom.io.seek", {"guideloom.storage.io": ("SeekIO",)},
          f"{_GL11} :class:`~guideloom.storage.io.SeekIO`."),
    Alias("guideloom.shuffle.feistel", {"guideloom.shuffle": ("FeistelShuffler",)},
          f"{_GL11} :class:`~guideloom.shuffle.FeistelShuffler`."),
    Alias("guideloom.storage.document_storage",
          {"guideloom.storage.document": ("DocumentStorage",)},
          f"{_GL11} :class:`~guideloom.storage.DocumentStorage`."),
    Alias("guideloom.storage.stream_meta_storage",
          {"guideloom.storage.stream_meta": ("StreamWithMetaStorage",)},
          f"{_GL11} :class:`~guideloom.storage.StreamWithMetaStorage`."),
    Alias("guideloom.storage.stream_storage", {"guideloom.storage.stream": ("StreamStorage",)},
          f"{_GL11} :class:`~guideloom.storage.StreamStorage`."),
    Alias("guideloom.storage_format",
          {"guideloom.storage.formats": ("DocumentPickleFormat", "StreamNumpyFormat")},
          "GuideLoom 1.1's ``guideloom.storage_format``: the storage formats, defined in\n"
          ":mod:`guideloom.storage.formats`."),
    Alias("guideloom.storage_format.document_pickle_format",
          {"guideloom.storage.formats": ("DocumentPickleFormat",)},
          f"{_GL11} :class:`~guideloom.storage.formats.DocumentPickleFormat`."),
    Alias("guideloom.storage_format.stream_numpy_format",
          {"guideloom.storage.formats": ("StreamNumpyFormat",)},
          f"{_GL11} :class:`~guideloom.storage.formats.StreamNumpyFormat`."),
    Alias("guideloom.types",
          {_STORAGE_ABSTRACT: (
              "AsyncContextManager", "DatasetAbstract", "DatasetAsyncReaderAbstract",
              "DatasetSyncReaderAbstract", "DocumentStorageAbstract",
              "DocumentStorageAsyncReaderAbstract", "DocumentStorageSyncReaderAbstract",
              "DocumentStorageSyncWriterAbstract", "IOAsyncReaderAbstract", "IOReaderAbstract",
              "IOSyncReaderAbstract", "StatefulDataLoaderStateDict", "StorageBufferTypes",
              "StreamStorageAbstract", "StreamStorageAsyncReaderAbstract",
              "StreamStorageSyncReaderAbstract", "StreamStorageSyncWriterAbstract",
              "SyncContextManager", "UserBufferTypes", "Vector"),
           _STORAGE_TYPES: ("DocumentStorageFormat", "StorageFormat", "StreamStorageFormat",
                            "StreamWithMetaStorageFormat")},
          "GuideLoom 1.1's ``guideloom.types``: the format protocols, abstract base classes and\n"
          "aliases, defined in :mod:`guideloom.storage.abstract` (abstract bases) and\n"
          ":mod:`guideloom.storage.types` (format protocols)."),
    Alias("guideloom.types.context_manager",
          {_STORAGE_ABSTRACT: ("AsyncContextManager", "SyncContextManager")},
          f"{_GL11} the context-manager bases."),
    Alias("guideloom.types.dataset",
          {_STORAGE_ABSTRACT: ("DatasetAbstract", "DatasetAsyncReaderAbstract",
                               "DatasetSyncReaderAbstract")},
          f"{_GL11} the dataset bases."),
    Alias("guideloom.types.document_storage",
          {_STORAGE_ABSTRACT: ("DocumentStorageAbstract", "DocumentStorageAsyncReaderAbstract",
                               "DocumentStorageSyncReaderAbstract",
                               "DocumentStorageSyncWriterAbstract")},
          f"{_GL11} the document-storage bases."),
    Alias("guideloom.types.document_storage_format", {_STORAGE_TYPES: ("DocumentStorageFormat",)},
          f"{_GL11} the document format protocol."),
    Alias("guideloom.types.io_reader",
          {_STORAGE_ABSTRACT: ("IOAsyncReaderAbstract", "IOReaderAbstract",
                               "IOSyncReaderAbstract")},
          f"{_GL11} the file-reader bases."),
    Alias("guideloom.types.primitive",
          {_STORAGE_ABSTRACT: ("StorageBufferTypes", "UserBufferTypes", "Vector")},
          f"{_GL11} the buffer and vector aliases."),
    Alias("guideloom.types.stateful_dataloader",
          {_STORAGE_ABSTRACT: ("StatefulDataLoaderStateDict",)},
          f"{_GL11} the loader checkpoint type."),
    Alias("guideloom.types.stream_storage",
          {_STORAGE_ABSTRACT: ("StreamStorageAbstract", "StreamStorageAsyncReaderAbstract",
                               "StreamStorageSyncReaderAbstract",
                               "StreamStorageSyncWriterAbstract")},
          f"{_GL11} the stream-storage bases."),
    Alias("guideloom.types.stream_storage_format", {_STORAGE_TYPES: ("StreamStorageFormat",)},
          f"{_GL11} the stream format protocol."),
    Alias("guideloom.types.stream_with_meta_storage_format",
          {_STORAGE_TYPES: ("StreamWithMetaStorageFormat",)},
          f"{_GL11} the stream-with-metadata format protocol."),
)
