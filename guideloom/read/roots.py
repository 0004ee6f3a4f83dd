"""Data roots: where a dataset's files are, a local folder or a remote release.

:func:`open_root` is the one place that looks at what the user gave as ``data_dir``: a folder
becomes a :class:`LocalRoot`; an ``https://`` or fsspec URL, or a DOI, a :class:`RemoteRoot`,
which maps the release's relative file names (``metadata.json``, ``h5/concave.zip``) to URLs:

* an ``https://`` (or ``http://``) URL of a directory holding the layout ``guideloom download``
  writes: names are appended to it;
* an fsspec URL (``s3://bucket/prefix``, ``memory://...``): the same, and ``*.zip`` files
  can also be listed;
* a Dataverse DOI (``doi:10.18419/DARUS-5589``): the dataset version's file list is read once
  through the Dataverse API (:mod:`guideloom.net.dataverse`, as ``guideloom download`` reads it)
  and each file is its access URL; the server is ``server=`` or ``$GUIDELOOM_DATAVERSE_URL``
  (default DaRUS), the token ``token=`` or ``$GUIDELOOM_DATAVERSE_TOKEN``.

Every root (:class:`DataRoot`) answers the same questions, so code above the read package never
asks which kind it has: a file the manifest names (:meth:`~DataRoot.file`, confined to the
root), a small file's bytes (:meth:`~DataRoot.read_bytes`, :meth:`~DataRoot.index_bytes`), the
experiments' locations (:meth:`~DataRoot.locations`) and the job fingerprint of their inputs
(:meth:`~DataRoot.fingerprint`). A root is small, frozen and picklable: Dask workers receive it
(with the job's locations) and open their own connections.
"""

from __future__ import annotations

import logging
import os
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol, TypeGuard

from guideloom.read.access import read_bytes
from guideloom.read.byte_source import is_remote
from guideloom.read.fetch import fetch_bytes
from guideloom.read.files import (
    DOI_PREFIX,
    TOKEN_HEADER,
    RemoteFileEntry,
    RemotePath,
    ScannedDataset,
    checked_relpath,
    confined,
    url_part,
)
from guideloom.read.fingerprint import local_fingerprint, remote_fingerprint
from guideloom.read.locations import Location
from guideloom.read.remote_loose import loose_locations
from guideloom.read.remote_scan import remote_locations
from guideloom.read.scan import local_locations

logger = logging.getLogger(__name__)

__all__ = [
    "DOI_PREFIX",
    "TOKEN_HEADER",
    "VERSION_ENV",
    "DataRoot",
    "LocalRoot",
    "RemoteFileEntry",
    "RemotePath",
    "RemoteRoot",
    "as_root",
    "checked_relpath",
    "checked_storage_options",
    "clear_remote_cache",
    "folder_of",
    "is_remote_root",
    "job_root",
    "open_remote_root",
    "open_root",
    "refuse_local_storage_options",
    "release_locations",
]

VERSION_ENV = "GUIDELOOM_DATAVERSE_VERSION"  # the dataset version a DOI reads (default 2.0)
INDEX_WHAT = "the index table (the CSV FileObject's 'name')"


class IndexedDataset(ScannedDataset, Protocol):
    """What a root reads of a :class:`~guideloom.select.manifest.Dataset` for its index table."""

    @property
    def index_file(self) -> str: ...

    @property
    def manifest_path(self) -> Path | None: ...

    def fetched_index_bytes(self) -> bytes | None: ...


class DataRoot(ABC):
    """Where a dataset's files are (see :mod:`guideloom.read.roots`)."""

    #: True for a folder on this machine (its files are read with ``pread``).
    is_local: bool = True
    #: The published dataset version the files are of (a DOI's, e.g. ``"2.0"``), else "".
    release_version: str = ""
    #: True when the index table's bytes are worth keeping once read (a round trip to fetch
    #: again): the job identity is then taken from the kept bytes.
    keeps_index_bytes: bool = False
    #: True when a process forked from this one may read the root: its files are on this
    #: machine, so a child inherits no half-used connection or client thread.
    can_fork: bool = True
    #: True when each read is a network round trip: read ahead, batch the requests and keep
    #: what was fetched rather than read it again.
    high_latency: bool = False
    #: What the root's data is, for a line printed to the user ("local data").
    data_phrase: str = "local data"

    def local_folder(self) -> Path | None:
        """The folder on this machine that holds the root's files (to write next to them, to
        keep an export from overwriting them, to hand to a tool that reads paths), or
        ``None`` for a release read by URL."""
        return None

    def absolute(self) -> DataRoot:
        """This root as a job keeps it: a folder made absolute against the current directory
        (on the driver: Dask workers may run in another directory); a URL as it is."""
        return self

    @property
    @abstractmethod
    def name(self) -> str:
        """The folder's or URL's last part (a default dataset name)."""

    @abstractmethod
    def file(self, relpath: str, what: str, manifest: Path | None = None) -> Path | RemotePath:
        """The file ``relpath`` the manifest names, confined to the root.

        Raises:
            ManifestError: ``relpath`` would leave the root (names ``what`` and the manifest).
        """

    @abstractmethod
    def read_bytes(self, relpath: str, what: str, manifest: Path | None = None
                   ) -> tuple[bytes, Path | RemotePath]:
        """The whole small file ``relpath`` (a manifest, an index table) and where it is.

        Raises:
            FileNotFoundError: It is not there or cannot be read.
            ManifestError: ``relpath`` would leave the root.
        """

    @abstractmethod
    def locations(self, ds: ScannedDataset, ids: Iterable[Any] | None = None
                  ) -> dict[Any, Location]:
        """Map every experiment id with data in the root to its location (``ids``: the ones
        looked for where the root cannot be listed; default the index table's).

        Raises:
            GuideloomError: An archive or folder cannot be read.
            ManifestError: Two files or members hold one experiment.
        """

    @abstractmethod
    def fingerprint(self, index_bytes: bytes, locations: Iterable[Location]) -> str:
        """The identity of a job's input: the index table's bytes and the locations' files
        (no member data is read)."""

    def index_bytes(self, ds: IndexedDataset) -> bytes:
        """The bytes of the dataset's index table, for the job identity."""
        return self.read_bytes(ds.index_file, "the index table", ds.manifest_path)[0]

    @abstractmethod
    def missing_experiment(self, ds: ScannedDataset, sim_id: Any) -> str:
        """Why ``sim_id`` has no location here: where was looked, what to do."""


@dataclass(frozen=True)
class LocalRoot(DataRoot):
    """A data directory on this machine.

    Attributes:
        path: The folder.
    """

    path: Path
    is_local = True

    def __str__(self) -> str:
        return str(self.path)

    def local_folder(self) -> Path:
        return self.path

    def absolute(self) -> LocalRoot:
        return self if self.path.is_absolute() else LocalRoot(Path(os.path.abspath(self.path)))

    @property
    def name(self) -> str:
        return self.path.name

    def file(self, relpath: str, what: str, manifest: Path | None = None) -> Path:
        return confined(self.path, relpath, f"{manifest or 'the manifest'}: {what}")

    def read_bytes(self, relpath: str, what: str, manifest: Path | None = None
                   ) -> tuple[bytes, Path]:
        path = self.file(relpath, what, manifest)
        if not path.is_file():
            raise FileNotFoundError(f"{what} not found: {path}")
        return read_bytes(path), path

    def locations(self, ds: ScannedDataset, ids: Iterable[Any] | None = None
                  ) -> dict[Any, Location]:
        return local_locations(ds, self.path)

    def fingerprint(self, index_bytes: bytes, locations: Iterable[Location]) -> str:
        return local_fingerprint(index_bytes, locations)

    def missing_experiment(self, ds: ScannedDataset, sim_id: Any) -> str:
        root = self.path
        return (f"experiment {sim_id!r} has no HDF5 file under {root} (looked for loose "
                f"{root}/h5/<id>.h5 files and members of {', '.join(ds.archives) or '*.zip'} in "
                f"{root} and {root}/h5); download it or check the id")


@dataclass(frozen=True)
class RemoteRoot(DataRoot):
    """A remote data directory.

    Attributes:
        url: The directory URL without a trailing slash, or the DOI.
        files: For a DOI, every file of the dataset version (else empty).
        server: For a DOI, the Dataverse server.
        headers: HTTP headers sent with every request (the API token); kept out of ``repr``.
        options: fsspec storage options for every file of the root (``storage_options=``:
            credentials, endpoint); kept out of ``repr``, ``str`` and comparisons, shipped to
            Dask workers with the job.
    """

    url: str
    files: tuple[RemoteFileEntry, ...] = ()
    server: str = ""
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    options: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)
    release_version: str = ""
    is_local = False
    keeps_index_bytes = True
    can_fork = False
    high_latency = True
    data_phrase = "data in the remote release"

    def __str__(self) -> str:
        return f"{self.url} on {self.server}" if self.server else self.url

    @property
    def name(self) -> str:
        """The last part of the URL (a default dataset name)."""
        return self.url.rstrip("/").rsplit("/", 1)[-1]

    @property
    def listed(self) -> bool:
        """True when :attr:`files` is the complete list of the root's files (a DOI)."""
        return bool(self.server)

    def storage_options(self) -> dict[str, Any]:
        """Keyword arguments for :func:`~guideloom.read.byte_source.open_byte_source`."""
        return {"headers": dict(self.headers)} if self.headers else {}

    def entry(self, relpath: str) -> RemoteFileEntry | None:
        """The file ``relpath`` (``None`` when a listed root lacks it)."""
        relpath = checked_relpath(relpath, str(self))
        if self.listed:
            return next((f for f in self.files if f.relpath == relpath), None)
        return RemoteFileEntry(relpath, f"{self.url}/{url_part(self.url, relpath)}")

    def path(self, relpath: str) -> RemotePath:
        """The :class:`RemotePath` of ``relpath`` (for messages; it may not exist)."""
        found = self.entry(relpath)
        return RemotePath(found.url if found else f"{self} :: {relpath}")

    def file(self, relpath: str, what: str, manifest: Path | None = None) -> RemotePath:
        return self.path(checked_relpath(relpath, f"{self}: {what}"))

    def read_bytes(self, relpath: str, what: str, manifest: Path | None = None
                   ) -> tuple[bytes, RemotePath]:
        return fetch_bytes(self, relpath, what)

    def index_bytes(self, ds: IndexedDataset) -> bytes:
        fetched = ds.fetched_index_bytes()  # the table the selection read: not fetched again
        return fetched if fetched is not None else super().index_bytes(ds)

    def locations(self, ds: ScannedDataset, ids: Iterable[Any] | None = None
                  ) -> dict[Any, Location]:
        return release_locations(ds, self, ids)

    def fingerprint(self, index_bytes: bytes, locations: Iterable[Location]) -> str:
        return remote_fingerprint(index_bytes, locations)[:32]

    def missing_experiment(self, ds: ScannedDataset, sim_id: Any) -> str:
        return (f"experiment {sim_id!r} has no HDF5 file in the remote release {self} (looked "
                f"for members of {', '.join(ds.archives) or '*.zip'} and loose h5/<id>.h5 "
                "files); check the id and the URL")


def release_locations(ds: ScannedDataset, root: RemoteRoot, ids: Iterable[Any] | None = None
                      ) -> dict[Any, Location]:
    """Map the experiment ids of the remote release ``root`` to their locations: the members
    of its archives (:func:`~guideloom.read.remote_scan.remote_locations`) or, when they hold
    none, its loose files (:func:`~guideloom.read.remote_loose.loose_locations`; ``ids``,
    default the index table's, are the experiments looked for on a server that cannot list).

    Raises:
        GuideloomError: An archive or folder cannot be read (naming its URL).
        ManifestError: Two members or loose files hold one experiment.
    """
    found = remote_locations(ds, root)
    if not found:  # no zip member: a loose release (h5/<id>.h5), read by ranges the same way
        found.update(loose_locations(ds, root, ds.index().ids if ids is None else ids))
    return found


def is_remote_root(location: object) -> TypeGuard[str | RemoteRoot]:
    """True for a ``data_dir`` read remotely: a URL :func:`open_root` understands, a DOI, or
    a :class:`RemoteRoot`."""
    if isinstance(location, DataRoot):
        return not location.is_local
    return isinstance(location, str) and (is_remote(location)
                                          or location.lower().startswith(DOI_PREFIX))


def folder_of(data_dir: str | os.PathLike[str] | DataRoot | None) -> Path | None:
    """The folder on this machine a ``data_dir`` names, or ``None`` for a URL, a DOI, a
    remote root or no ``data_dir`` (nothing is fetched: a DOI's file list is not read)."""
    if data_dir is None or is_remote_root(data_dir):
        return None
    return as_root(data_dir).local_folder()


def as_root(data_dir: str | os.PathLike[str] | DataRoot) -> DataRoot:
    """The root of a dataset's ``data_dir`` as it is kept (a folder's path, or the
    :class:`RemoteRoot` it was loaded from); nothing is fetched."""
    if isinstance(data_dir, DataRoot):
        return data_dir
    return LocalRoot(Path(data_dir))


def open_root(path_or_url: str | os.PathLike[str] | DataRoot,
              storage_options: Mapping[str, Any] | None = None, *, server: str | None = None,
              token: str | None = None, version: str | None = None) -> DataRoot:
    """The root of a folder, a URL or a DOI (a DOI's file list is fetched here).

    ``storage_options`` (as ``xarray.open_zarr`` or ``pandas.read_csv`` take them) go to
    fsspec for every file of a remote root; given for an ``https://`` root they send its reads
    through fsspec's HTTP filesystem instead of guideloom's own client.

    Raises:
        DownloadError: The Dataverse server cannot list the dataset version.
        TypeError: ``storage_options`` is not a mapping.
        ValueError: ``storage_options`` for a local folder (they would be ignored).
    """
    if is_remote_root(path_or_url):
        return open_remote_root(path_or_url, server=server, token=token, version=version,
                                storage_options=storage_options)
    if isinstance(path_or_url, DataRoot):
        refuse_local_storage_options(storage_options, path_or_url)
        return path_or_url
    refuse_local_storage_options(storage_options, os.fspath(path_or_url))
    return LocalRoot(Path(path_or_url))


def job_root(data_dir: str | os.PathLike[str] | DataRoot,
             storage_options: Mapping[str, Any] | None = None) -> DataRoot:
    """The root of a job's data directory as the job keeps it: a folder made absolute
    (:meth:`DataRoot.absolute`, here on the driver: Dask workers may run in another
    directory), or the :class:`RemoteRoot` of a URL or DOI (with ``storage_options`` for
    fsspec).

    Raises:
        FileNotFoundError: The folder does not exist.
        ValueError: ``storage_options`` for a local folder.
    """
    root = open_root(data_dir, storage_options).absolute()
    folder = root.local_folder()
    if folder is not None and not folder.is_dir():
        raise FileNotFoundError(f"data directory not found: {folder}")
    return root


def open_remote_root(location: str | RemoteRoot, *, server: str | None = None,
                     token: str | None = None, version: str | None = None,
                     storage_options: Mapping[str, Any] | None = None) -> RemoteRoot:
    """The :class:`RemoteRoot` of a URL or DOI (a DOI's file list is fetched here).

    Raises:
        DownloadError: The Dataverse server cannot list the dataset version.
        TypeError: ``storage_options`` is not a mapping.
    """
    options = checked_storage_options(storage_options)
    if isinstance(location, RemoteRoot):
        return replace(location, options=options) if options else location
    if location.lower().startswith(DOI_PREFIX):
        return replace(_doi_root(location, server, token, version), options=options)
    return RemoteRoot(url=location.rstrip("/"), options=options)


def checked_storage_options(options: Mapping[str, Any] | None) -> dict[str, Any]:
    """A copy of ``storage_options`` (``{}`` for ``None``).

    Raises:
        TypeError: It is not a mapping with string keys (the message shows no values: they
            may be secrets).
    """
    if options is None:
        return {}
    if not isinstance(options, Mapping) or not all(isinstance(k, str) for k in options):
        raise TypeError("storage_options must be a dict of fsspec options with string keys "
                        f"(got {type(options).__name__}), e.g. {{'key': ..., 'secret': ..., "
                        "'client_kwargs': {'endpoint_url': ...}}")
    return dict(options)


def refuse_local_storage_options(storage_options: Mapping[str, Any] | None,
                                 data_dir: object) -> None:
    """Refuse ``storage_options`` for a local data directory (they would be ignored).

    Raises:
        ValueError: Naming the directory (never the options' values).
    """
    if storage_options:
        raise ValueError(f"storage_options apply to a remote data_dir (s3://, https://, a DOI), "
                         f"but data_dir {data_dir!s} is a local folder: leave storage_options "
                         "out, or give the release's URL")


def _doi_root(doi: str, server: str | None, token: str | None,
              version: str | None) -> RemoteRoot:
    from guideloom import config
    from guideloom.net import dataverse

    base = dataverse.server_url(server)
    secret = dataverse.api_token(token)
    version = version or config.get("dataverse_version") or dataverse.DEFAULT_VERSION
    info, files = dataverse.version_files(version, server=base, doi=doi, token=secret)
    number = (f"{info.get('versionNumber')}.{info.get('versionMinorNumber', 0)}"
              if info.get("versionNumber") is not None else version)
    entries = tuple(RemoteFileEntry(f.relpath,
                                    f"{base}/api/access/datafile/{f.id}?format=original",
                                    f.size or None, f.checksum.value if f.checksum else "")
                    for f in files)
    headers = ((TOKEN_HEADER, secret),) if secret else ()
    logger.debug("DOI %s on %s: %d files", doi, base, len(entries))
    return RemoteRoot(url=doi, files=entries, server=base, headers=headers,
                      release_version=str(number))


def clear_remote_cache() -> tuple[Path, int, int]:
    """Forget what remote reads learnt on disk (``guideloom cache clear``): the cache folder,
    and how many entries of how many bytes were removed
    (:func:`guideloom.read.metacache.clear_cache`)."""
    from guideloom.read.metacache import clear_cache

    return clear_cache()
