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
_READ = "guideloom's earlier read path"
_MOVED = "guideloom's earlier flat path of"

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
          {"guideloom.select.manifest": ("DDACS_SAMPLE_SIM_ID", "DDACS_SPEC", "RDDAC_SPEC",
                                   "DatasetSpec")},
          "Dataset specifications under rddac 2.0's / ddacs 3.2's module name (``rddac.spec``,\n"
          "``ddacs.spec``), defined in :mod:`guideloom.select.manifest`."),
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
    # ------------------------------------------ guideloom's earlier read path (now guideloom.read)
    Alias("guideloom.sources",
          {"guideloom.read.scan": ("LOOSE_SUBDIR", "add_member_locations", "archive_members",
                                   "archive_paths", "id_parser", "scan_locations"),
           "guideloom.read.zipdir": ("LOCAL_HEADER", "Member", "ZipFormatError",
                                     "parse_local_header", "read_members"),
           "guideloom.read.zipmember": ("DEFLATE_MAX_RATIO", "DEFLATE_SLACK", "INFLATE_BLOCK",
                                        "INFLATE_MEMORY_SHARE", "checked_data_offset",
                                        "inflate_budget", "member_data_offset", "corrupt",
                                        "corrupt as raise_corrupt"),
           "guideloom.read.fileobj": ("ByteRangeFile", "MemoryFile", "SeekableReader"),
           "guideloom.read.handles": ("ArchiveHandles", "ArchiveLease"),
           "guideloom.read.hdf5": ("MemberFile", "file_access"),
           "guideloom.read.locations": ("Location",),
           "guideloom.read.legacy": ("DescriptorSource", "inflate_member", "open_location",
                                     "open_location_bytes", "open_location_raw"),
           "guideloom.h5_tools": ("open_h5",)},
          f"{_READ}: where each experiment's HDF5 file lives (:mod:`guideloom.read.scan`) and\n"
          "opening it (the zip-member and HDF5 layers, :mod:`guideloom.read.zipmember` and\n"
          ":mod:`guideloom.read.hdf5`; the old signatures in :mod:`guideloom.read.legacy`)."),
    Alias("guideloom.records",
          {"guideloom.read.records": ("NATIVE_ENV", "REFERENCE_RECORDS", "SIM_ID_KEY",
                                      "RecordReader", "described_first", "native_default",
                                      "reference_dtypes"),
           "guideloom.read.hdf5": ("LARGE_FIELD_BYTES", "check_declared_size",
                                   "check_self_contained"),
           "guideloom.h5native.stats": ("NATIVE_STATS", "NativeStats", "native_stats")},
          f"{_READ}: reading one view record, defined in :mod:`guideloom.read.records` (its\n"
          "checks in :mod:`guideloom.read.hdf5`)."),
    Alias("guideloom.zipcrc", {"guideloom.read.zipmember": MODULE},
          f"{_READ}: the CRC-32 checks of zip members, which is the module\n"
          ":mod:`guideloom.read.zipmember` itself (one check and one verdict cache)."),
    Alias("guideloom.remote",
          {"guideloom.read.byte_source": ("ByteSource", "LocalFileSource", "clear_source_cache",
                                          "is_remote", "open_byte_source"),
           "guideloom.read.fsspec_source": ("FsspecSource",),
           "guideloom.read.http": ("HttpRangeSource",),
           "guideloom.read.ranges": ("coalesce_ranges", "split_coalesced")},
          f"{_READ}: byte sources, defined in the bytes layer of :mod:`guideloom.read`."),
    Alias("guideloom.remote.byte_source",
          {"guideloom.read.byte_source": ("REMOTE_SCHEMES", "ByteSource", "LocalFileSource",
                                          "clear_source_cache", "high_latency", "is_remote",
                                          "open_byte_source", "source_for", "url_source"),
           "guideloom.read.fsspec_source": ("FsspecSource", "fsspec_filesystem"),
           "guideloom.read.ranges": ("COALESCE_GAP", "coalesce_ranges", "split_coalesced")},
          f"{_READ}: the ByteSource protocol and the local and fsspec sources, defined in\n"
          ":mod:`guideloom.read.byte_source` and :mod:`guideloom.read.fsspec_source`."),
    Alias("guideloom.remote.cache",
          {"guideloom.read.metacache": ("CACHE_ENV", "DEFAULT_MAX_BYTES", "FORMAT", "SIZE_ENV",
                                        "SUBDIR", "MetaCache", "cache_root", "max_bytes",
                                        "process_cache", "payload_digest as _digest")},
          f"{_READ}: the on-disk metadata cache, defined in\n"
          ":mod:`guideloom.read.metacache`."),
    Alias("guideloom.remote.dataset", {"guideloom.read.manifest": ("remote_manifest",)},
          f"{_READ}: a remote release's manifest, read by :mod:`guideloom.read.manifest`."),
    Alias("guideloom.remote.fetch",
          {"guideloom.read.fetch": ("FIRST_WHOLE", "MAX_WHOLE", "fetch_bytes", "http_validator",
                                    "source_of")},
          f"{_READ}: small files fetched whole, defined in :mod:`guideloom.read.fetch`."),
    Alias("guideloom.remote.http",
          {"guideloom.read.http": ("EXPIRED_STATUS", "MAX_IDLE_PER_HOST", "MAX_REDIRECTS",
                                   "MAX_THREADS", "MIN_RATE", "REDIRECT_STATUS", "RETRIES_ENV",
                                   "TIMEOUT_ENV", "TOKEN_HEADER", "USER_AGENT", "WATCH_PERIOD",
                                   "HttpRangeSource", "clear_http_sources", "close_connections",
                                   "env_settings", "http_source", "run_concurrently")},
          f"{_READ}: the HTTP range source, defined in :mod:`guideloom.read.http`."),
    Alias("guideloom.remote.locations",
          {"guideloom.read.fingerprint": ("remote_fingerprint",),
           "guideloom.read.locations": ("RemoteLocation", "archive_key"),
           "guideloom.read.remote_scan": ("ARCHIVE_LANES", "DIRECTORY_KIND", "info_validator",
                                          "location_source", "loose_location",
                                          "remote_locations", "stat_file")},
          f"{_READ}: remote locations (:mod:`guideloom.read.locations`), the remote archive\n"
          "scan (:mod:`guideloom.read.remote_scan`) and the input fingerprint\n"
          "(:mod:`guideloom.read.fingerprint`)."),
    Alias("guideloom.remote.loose",
          {"guideloom.read.remote_loose": ("FALLBACK_FORMATS", "PROBE_FIRST", "PROBE_THREADS",
                                           "loose_locations")},
          f"{_READ}: a remote release's loose files, found by\n"
          ":mod:`guideloom.read.remote_loose`."),
    Alias("guideloom.remote.ranges",
          {"guideloom.read.ranges": ("COALESCE_GAP", "coalesce_ranges", "split_coalesced")},
          f"{_READ}: coalescing byte ranges, defined in :mod:`guideloom.read.ranges`."),
    Alias("guideloom.remote.readahead",
          {"guideloom.read.readahead": ("DEFAULT_DEPTH", "DEPTH_ENV", "Peeking", "ReadAhead",
                                        "readahead_depth")},
          f"{_READ}: the record read-ahead, defined in :mod:`guideloom.read.readahead`."),
    Alias("guideloom.remote.records",
          {"guideloom.read.hdf5": ("FIRST_READ", "META_KIND", "NATIVE_FIRST_READ", "NATIVE_KIND",
                                   "REACH_MARGIN", "SPECULATE_MAX"),
           "guideloom.read.wrappers": ("BLOCK", "RECORD_MAX", "MemberMeta"),
           "guideloom.read.zipmember": ("CRC_BLOCK", "NAME_SLACK"),
           "guideloom.read.legacy": ("open_remote",)},
          f"{_READ}: remote records are read by :class:`guideloom.read.records.RecordReader` as\n"
          "local ones are; the round-trip savings are in :mod:`guideloom.read.hdf5` and\n"
          ":mod:`guideloom.read.wrappers`, the member checks in :mod:`guideloom.read.zipmember`."),
    Alias("guideloom.remote.root",
          {"guideloom.read.files": ("DOI_PREFIX", "TOKEN_HEADER", "RemoteFileEntry", "RemotePath"),
           "guideloom.read.roots": ("VERSION_ENV", "RemoteRoot", "checked_relpath",
                                    "checked_storage_options", "is_remote_root",
                                    "open_remote_root as open_root")},
          f"{_READ}: remote data roots, defined in :mod:`guideloom.read.roots` (``open_root``\n"
          "here is :func:`~guideloom.read.roots.open_remote_root`) and their file names in\n"
          ":mod:`guideloom.read.files`."),
    Alias("guideloom.remote.scan", {"guideloom.read.roots": ("release_locations",)},
          f"{_READ}: a remote release's experiments, scanned by\n"
          ":mod:`guideloom.read.roots`."),
    Alias("guideloom.remote.zipdir",
          {"guideloom.read.zipdir": ("LOCAL_HEADER", "LOCAL_SIG", "MAX_COMMENT", "MAX_DIRECTORY",
                                     "MAX_OFFSET", "TAIL_READ", "UTF8_NAME", "ZIP_STORED",
                                     "Directory", "Member", "ZipFormatError", "find_directory",
                                     "overlapping_members", "parse_directory",
                                     "parse_local_header", "read_members")},
          f"{_READ}: the zip directory parser, defined in :mod:`guideloom.read.zipdir`."),
    # ----------------------------------------------------- guideloom's own earlier module paths
    Alias("guideloom.plot_backend", {"guideloom.compat.plot_backend": ALL},
          "guideloom's earlier path of the matplotlib loader, defined in\n"
          ":mod:`guideloom.compat.plot_backend`."),
    Alias("guideloom.mlc_compat", {"guideloom.compat.mlc": ALL},
          "guideloom's earlier path of the ``mlcroissant.Dataset`` face, defined in\n"
          ":mod:`guideloom.compat.mlc`."),
    # -------------- guideloom's earlier flat modules, moved into their layers (the module itself)
    Alias("guideloom.croissant", {"guideloom.select.manifest": MODULE},
          f"{_MOVED} the Croissant manifest parser, :mod:`guideloom.select.manifest`."),
    Alias("guideloom.index_table", {"guideloom.select.index": MODULE},
          f"{_MOVED} the typed index table, :mod:`guideloom.select.index`."),
    Alias("guideloom.selection", {"guideloom.select.selection": MODULE},
          f"{_MOVED} choosing a job's experiments, :mod:`guideloom.select.selection`."),
    Alias("guideloom.inspect_views", {"guideloom.select.views": MODULE},
          f"{_MOVED} describing a dataset's views, :mod:`guideloom.select.views`."),
    Alias("guideloom.caches", {"guideloom.runtime.caches": MODULE},
          f"{_MOVED} the in-process caches, :mod:`guideloom.runtime.caches`."),
    Alias("guideloom.cache_bounds", {"guideloom.runtime.cache_bounds": MODULE},
          f"{_MOVED} the caches' default bounds, :mod:`guideloom.runtime.cache_bounds`."),
    Alias("guideloom.private_files", {"guideloom.runtime.private_files": MODULE},
          f"{_MOVED} files safe in shared folders, :mod:`guideloom.runtime.private_files`."),
    Alias("guideloom.fallbacks", {"guideloom.runtime.fallbacks": MODULE},
          f"{_MOVED} the fallback counts, :mod:`guideloom.runtime.fallbacks`."),
    Alias("guideloom.buffers", {"guideloom.runtime.buffers": MODULE},
          f"{_MOVED} aligned buffers, :mod:`guideloom.runtime.buffers`."),
    Alias("guideloom.os_support", {"guideloom.runtime.os_support": MODULE},
          f"{_MOVED} what the operating system offers, :mod:`guideloom.runtime.os_support`."),
    Alias("guideloom.faults", {"guideloom.runtime.faults": MODULE},
          f"{_MOVED} the test fault points, :mod:`guideloom.runtime.faults`."),
    Alias("guideloom.export_croissant", {"guideloom.export.publish": MODULE},
          f"{_MOVED} an export's Croissant description, :mod:`guideloom.export.publish`."),
    Alias("guideloom.extract", {"guideloom.export.extract": MODULE},
          f"{_MOVED} the zip-to-loose extraction job, :mod:`guideloom.export.extract`."),
    Alias("guideloom.http_deadline", {"guideloom.net.deadline": MODULE},
          f"{_MOVED} the deadlines of HTTP requests, :mod:`guideloom.net.deadline`."),
    Alias("guideloom.http_fetch", {"guideloom.net.fetch": MODULE},
          f"{_MOVED} fetching one file over HTTP, :mod:`guideloom.net.fetch`."),
    Alias("guideloom.download_folder", {"guideloom.net.folder": MODULE},
          f"{_MOVED} a download's folders and files, :mod:`guideloom.net.folder`."),
    Alias("guideloom.dataverse", {"guideloom.net.dataverse": MODULE},
          f"{_MOVED} the Dataverse API calls, :mod:`guideloom.net.dataverse`."),
    Alias("guideloom.release", {"guideloom.releases.release": MODULE},
          f"{_MOVED} a published release and its download, :mod:`guideloom.releases.release`."),
    Alias("guideloom.release_server", {"guideloom.releases.server": MODULE},
          f"{_MOVED} ``guideloom serve-release``, :mod:`guideloom.releases.server`."),
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
