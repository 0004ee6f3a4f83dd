"""The one table of guideloom's compatibility import paths.

Each :class:`Alias` is a module path that code written for rddac 2.0, ddacs 3.2 or GuideLoom 1.1
imports from (their published wheels' paths, and ``guideloom.ddacs_visualization``, where ddacs'
own plots are; ``docs/api.md`` lists them), with the modules that hold its names now and the
names it re-exports. ``python -m guideloom.compat.generate`` writes every path as a thin stub
module (an ordinary file, no import hook); ``tests/test_import_paths.py`` checks that each stub
is what the generator writes from this table. To change a stub, change its entry here and
regenerate. guideloom's own internal module paths have no entries: they may move freely.

This module is plain data and imports nothing of guideloom.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["ALIASES", "ALL", "MODULE", "Alias"]

#: In :attr:`Alias.names`: every name of the target module's ``__all__``.
ALL = "*"

#: In :attr:`Alias.names` (as the only target): the old path *is* the target module, not a copy
#: of its names. The stub puts the target into ``sys.modules`` under its own name (when it is
#: first imported; no import hook), so that replacing one of its functions through the old path
#: (``monkeypatch.setattr(old, "f", ...)``) replaces the one every caller uses.
MODULE = "module"


@dataclass(frozen=True)
class Alias:
    """One old module path, kept importable as a stub.

    Attributes:
        path: The old module path, e.g. ``"guideloom.io.mmap"``.
        names: Target module -> the names the stub re-exports from it, :data:`ALL` for the
            target's whole ``__all__``, or :data:`MODULE` for the module itself.
            ``"NewName as OldName"`` keeps a renamed object under its old name.
        doc: The stub's docstring: whose path this is and where the names are defined.
    """

    path: str
    names: Mapping[str, tuple[str, ...] | str]
    doc: str


_ABSTRACT = "guideloom.storage.abstract"
_TYPES = "guideloom.storage.types"
_IO = "guideloom.storage.io"
_GL11 = "GuideLoom 1.1's import path for"

# Names a GuideLoom 1.1 module had because it imported them from another public 1.1 module (the
# module had no ``__all__``, so they were its public names too); the stubs keep them.
_CONTEXT = ("AsyncContextManager", "SyncContextManager")
_IO_BASES = ("IOAsyncReaderAbstract", "IOReaderAbstract", "IOSyncReaderAbstract")
_BUFFERS = ("StorageBufferTypes", "UserBufferTypes")
_DATASET_BASES = ("DatasetAbstract", "DatasetAsyncReaderAbstract", "DatasetSyncReaderAbstract")
_STREAM_BASES = ("StreamStorageAbstract", "StreamStorageAsyncReaderAbstract",
                 "StreamStorageSyncReaderAbstract", "StreamStorageSyncWriterAbstract")
_DOCUMENT_BASES = ("DocumentStorageAbstract", "DocumentStorageAsyncReaderAbstract",
                   "DocumentStorageSyncReaderAbstract", "DocumentStorageSyncWriterAbstract")

ALIASES: tuple[Alias, ...] = (
    # ---------------------------------------------------------------- rddac 2.0 / ddacs 3.2
    Alias("guideloom.spec",
          {"guideloom.select.presets": ("DDACS_SAMPLE_SIM_ID", "DDACS_SPEC", "RDDAC_SPEC",
                                        "DatasetSpec")},
          "Dataset specifications under rddac 2.0's / ddacs 3.2's module name (``rddac.spec``,\n"
          "``ddacs.spec``), defined in :mod:`guideloom.select.presets`."),
    Alias("guideloom.streaming",
          {"guideloom.select.stream": ("iter_view",),
           "guideloom.export.api": ("export_to_numpy", "export_to_numpy_per_sim",
                                    "export_to_storage", "export_to_zarr"),
           "guideloom.reader": ("Export", "load_export"),
           "guideloom.read.records": ("SIM_ID_KEY",),
           "guideloom.errors": ("MissingDataWarning",),
           "guideloom.h5_tools": ("DEFAULT_DATA_DIR",)},
          "rddac 2.0's ``streaming``: the records of a view (``iter_view``, defined in\n"
          ":mod:`guideloom.select.stream`), the exports (defined in :mod:`guideloom.export.api`)\n"
          "and their reader (:mod:`guideloom.reader`)."),
    Alias("guideloom.visualization", {"guideloom.compat.visualization": ALL},
          "rddac 2.0's ``visualization`` (and ddacs 3.2's plots, as ddacs code finds them),\n"
          "defined in :mod:`guideloom.compat.visualization`."),
    Alias("guideloom.ddacs_visualization", {"guideloom.compat.ddacs_visualization": ALL},
          "ddacs 3.2's plots of meshes, point clouds and vector fields, defined in\n"
          ":mod:`guideloom.compat.ddacs_visualization`."),
    Alias("guideloom.croissant", {"guideloom.select.manifest": MODULE},
          "rddac 2.0's / ddacs 3.2's ``croissant``: the Croissant manifest parser, which is the\n"
          "module :mod:`guideloom.select.manifest` itself."),
    # ------------------------------------------------------------------------- GuideLoom 1.1
    Alias("guideloom.version", {"guideloom": ("__version__",)},
          "GuideLoom 1.1's ``guideloom.version``: the package version."),
    Alias("guideloom.dataset", {"guideloom.storage.dataset": ("DocumentDataset", "StreamDataset")},
          "GuideLoom 1.1's ``guideloom.dataset``: dataset views, defined in\n"
          ":mod:`guideloom.storage.dataset`."),
    Alias("guideloom.dataset.document_dataset",
          {"guideloom.storage.dataset": (
              "AsyncDocumentDatasetReader as DocumentAsyncReaderDataset", "DocumentDataset",
              "DocumentDatasetReader as DocumentSyncReaderDataset"),
           _ABSTRACT: (*_DATASET_BASES, "DocumentStorageAbstract")},
          f"{_GL11} :class:`~guideloom.storage.dataset.DocumentDataset` and its\n"
          "readers (1.1's ``DocumentSyncReaderDataset`` / ``DocumentAsyncReaderDataset`` are\n"
          "guideloom's ``DocumentDatasetReader`` / ``AsyncDocumentDatasetReader``)."),
    Alias("guideloom.dataset.stream_dataset",
          {"guideloom.storage.dataset": (
              "AsyncStreamDatasetReader as StreamAsyncReaderDataset", "StreamDataset",
              "StreamDatasetReader as StreamSyncReaderDataset"),
           _ABSTRACT: (*_DATASET_BASES, "StreamStorageAbstract")},
          f"{_GL11} :class:`~guideloom.storage.dataset.StreamDataset` and its\n"
          "readers (1.1's ``StreamSyncReaderDataset`` / ``StreamAsyncReaderDataset`` are\n"
          "guideloom's ``StreamDatasetReader`` / ``AsyncStreamDatasetReader``)."),
    Alias("guideloom.filesystem.document",
          {"guideloom.filesystem": ("FileSystemDocument",), _IO: ("SeekIO",),
           _ABSTRACT: (*_CONTEXT, *_IO_BASES, *_BUFFERS, "Vector")},
          f"{_GL11} :class:`~guideloom.filesystem.FileSystemDocument`."),
    Alias("guideloom.filesystem.stream",
          {"guideloom.filesystem": ("FileSystemStream",), _IO: ("SeekIO",),
           _ABSTRACT: (*_CONTEXT, *_IO_BASES, "Vector")},
          f"{_GL11} :class:`~guideloom.filesystem.FileSystemStream`."),
    Alias("guideloom.io", {_IO: ("MmapIO", "PosixPreadIO", "SeekIO")},
          "GuideLoom 1.1's ``guideloom.io``: the file-reading backends, defined in\n"
          ":mod:`guideloom.storage.io`."),
    Alias("guideloom.io.mmap", {_IO: ("MmapIO",), _ABSTRACT: _IO_BASES},
          f"{_GL11} :class:`~guideloom.storage.io.MmapIO`."),
    Alias("guideloom.io.posix_pread", {_IO: ("PosixPreadIO",), _ABSTRACT: _IO_BASES},
          f"{_GL11} :class:`~guideloom.storage.io.PosixPreadIO`."),
    Alias("guideloom.io.seek", {_IO: ("SeekIO",), _ABSTRACT: _IO_BASES},
          f"{_GL11} :class:`~guideloom.storage.io.SeekIO`."),
    Alias("guideloom.shuffle.feistel", {"guideloom.shuffle": ("FeistelShuffler",)},
          f"{_GL11} :class:`~guideloom.shuffle.FeistelShuffler`."),
    Alias("guideloom.storage.document_storage",
          {"guideloom.storage.document": ("DocumentStorage",),
           "guideloom.filesystem": ("FileSystemDocument",), _IO: ("SeekIO",),
           _ABSTRACT: (*_DOCUMENT_BASES, "IOReaderAbstract", "Vector"),
           _TYPES: ("DocumentStorageFormat",)},
          f"{_GL11} :class:`~guideloom.storage.DocumentStorage`."),
    Alias("guideloom.storage.stream_meta_storage",
          {"guideloom.storage.stream_meta": ("StreamWithMetaStorage",),
           "guideloom.filesystem": ("FileSystemDocument", "FileSystemStream"), _IO: ("SeekIO",),
           _ABSTRACT: (*_STREAM_BASES, "IOReaderAbstract", "Vector"),
           _TYPES: ("StreamWithMetaStorageFormat",)},
          f"{_GL11} :class:`~guideloom.storage.StreamWithMetaStorage`."),
    Alias("guideloom.storage.stream_storage",
          {"guideloom.storage.stream": ("StreamStorage",),
           "guideloom.filesystem": ("FileSystemStream",), _IO: ("SeekIO",),
           _ABSTRACT: (*_STREAM_BASES, "IOReaderAbstract", "Vector"),
           _TYPES: ("StreamStorageFormat",)},
          f"{_GL11} :class:`~guideloom.storage.StreamStorage`."),
    Alias("guideloom.storage_format",
          {"guideloom.storage.formats": ("DocumentPickleFormat", "StreamNumpyFormat")},
          "GuideLoom 1.1's ``guideloom.storage_format``: the storage formats, defined in\n"
          ":mod:`guideloom.storage.formats`."),
    Alias("guideloom.storage_format.document_pickle_format",
          {"guideloom.storage.formats": ("DocumentPickleFormat",),
           _ABSTRACT: ("StorageBufferTypes",), _TYPES: ("DocumentStorageFormat",)},
          f"{_GL11} :class:`~guideloom.storage.formats.DocumentPickleFormat`."),
    Alias("guideloom.storage_format.stream_numpy_format",
          {"guideloom.storage.formats": ("StreamNumpyFormat",), _ABSTRACT: ("Vector",),
           _TYPES: ("StreamStorageFormat",)},
          f"{_GL11} :class:`~guideloom.storage.formats.StreamNumpyFormat`."),
    Alias("guideloom.types",
          {_ABSTRACT: (*_CONTEXT, *_DATASET_BASES, *_DOCUMENT_BASES, *_IO_BASES,
                       "StatefulDataLoaderStateDict", *_BUFFERS, *_STREAM_BASES, "Vector"),
           _TYPES: ("DocumentStorageFormat", "StorageFormat", "StreamStorageFormat",
                    "StreamWithMetaStorageFormat")},
          "GuideLoom 1.1's ``guideloom.types``: the format protocols, abstract base classes and\n"
          "aliases, defined in :mod:`guideloom.storage.abstract` (abstract bases) and\n"
          ":mod:`guideloom.storage.types` (format protocols)."),
    Alias("guideloom.types.context_manager", {_ABSTRACT: _CONTEXT},
          f"{_GL11} the context-manager bases."),
    Alias("guideloom.types.dataset",
          {_ABSTRACT: (*_DATASET_BASES, *_CONTEXT, "DocumentStorageAbstract",
                       "StreamStorageAbstract")},
          f"{_GL11} the dataset bases."),
    Alias("guideloom.types.document_storage", {_ABSTRACT: (*_DOCUMENT_BASES, *_CONTEXT, "Vector")},
          f"{_GL11} the document-storage bases."),
    Alias("guideloom.types.document_storage_format",
          {_TYPES: ("DocumentStorageFormat",), _ABSTRACT: _BUFFERS},
          f"{_GL11} the document format protocol."),
    Alias("guideloom.types.io_reader", {_ABSTRACT: (*_IO_BASES, "StorageBufferTypes")},
          f"{_GL11} the file-reader bases."),
    Alias("guideloom.types.primitive", {_ABSTRACT: (*_BUFFERS, "Vector")},
          f"{_GL11} the buffer and vector aliases."),
    Alias("guideloom.types.stateful_dataloader", {_ABSTRACT: ("StatefulDataLoaderStateDict",)},
          f"{_GL11} the loader checkpoint type."),
    Alias("guideloom.types.stream_storage", {_ABSTRACT: (*_STREAM_BASES, *_CONTEXT)},
          f"{_GL11} the stream-storage bases."),
    Alias("guideloom.types.stream_storage_format",
          {_TYPES: ("StreamStorageFormat",), _ABSTRACT: ("Vector",)},
          f"{_GL11} the stream format protocol."),
    Alias("guideloom.types.stream_with_meta_storage_format",
          {_TYPES: ("StreamWithMetaStorageFormat",), _ABSTRACT: (*_BUFFERS, "Vector")},
          f"{_GL11} the stream-with-metadata format protocol."),
)
