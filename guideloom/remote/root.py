"""A data directory that is not on this machine: an ``https://`` or fsspec URL, or a DOI.

:func:`open_root` turns what the user gave as ``data_dir`` into a :class:`RemoteRoot`, which
maps the release's relative file names (``metadata.json``, ``h5/concave.zip``) to URLs:

* an ``https://`` (or ``http://``) URL of a directory holding the layout ``guideloom download``
  writes: names are appended to it;
* an fsspec URL (``s3://bucket/prefix``, ``memory://...``): the same, and ``*.zip`` files
  can also be listed;
* a Dataverse DOI (``doi:10.18419/DARUS-5589``): the dataset version's file list is read once
  through the Dataverse API (:mod:`guideloom.dataverse`, as ``guideloom download`` reads it)
  and each file is its access URL; the server is ``server=`` or ``$GUIDELOOM_DATAVERSE_URL``
  (default DaRUS), the token ``token=`` or ``$GUIDELOOM_DATAVERSE_TOKEN``.

A root is small and picklable: Dask workers receive it (with the job's locations) and open
their own connections.
"""

from __future__ import annotations

import posixpath
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, TypeGuard

from guideloom.errors import ManifestError
from guideloom.remote.byte_source import is_remote

DOI_PREFIX = "doi:"
TOKEN_HEADER = "X-Dataverse-key"
VERSION_ENV = "GUIDELOOM_DATAVERSE_VERSION"  # the dataset version a DOI reads (default 2.0)


def is_remote_root(location: object) -> TypeGuard[str | RemoteRoot]:
    """True for a ``data_dir`` read remotely: a URL :func:`open_root` understands, a DOI, or
    a :class:`RemoteRoot`."""
    if isinstance(location, RemoteRoot):
        return True
    return isinstance(location, str) and (is_remote(location)
                                          or location.lower().startswith(DOI_PREFIX))


@dataclass(frozen=True)
class RemotePath:
    """One remote file, where a local path would be (``.name``, ``.parent``, ``str()``)."""

    url: str

    @property
    def name(self) -> str:
        return posixpath.basename(urllib.parse.urlsplit(self.url).path) or self.url

    @property
    def parent(self) -> str:
        return self.url.rsplit("/", 1)[0]

    def __str__(self) -> str:
        return self.url


@dataclass(frozen=True)
class RemoteFileEntry:
    """A file of a listed root (a DOI): its relative name, URL and size."""

    relpath: str
    url: str
    size: int | None = None
    checksum: str = ""  # the repository's checksum (a validator for the cache)


@dataclass(frozen=True)
class RemoteRoot:
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
        """Keyword arguments for :func:`~guideloom.remote.open_byte_source`."""
        return {"headers": dict(self.headers)} if self.headers else {}

    def entry(self, relpath: str) -> RemoteFileEntry | None:
        """The file ``relpath`` (``None`` when a listed root lacks it)."""
        relpath = checked_relpath(relpath, str(self))
        if self.listed:
            return next((f for f in self.files if f.relpath == relpath), None)
        return RemoteFileEntry(relpath, f"{self.url}/{_url_part(self.url, relpath)}")

    def path(self, relpath: str) -> RemotePath:
        """The :class:`RemotePath` of ``relpath`` (for messages; it may not exist)."""
        found = self.entry(relpath)
        return RemotePath(found.url if found else f"{self} :: {relpath}")


def checked_relpath(name: str, where: str) -> str:
    """``name`` as a relative file name inside the root (no ``..``, not absolute).

    Raises:
        ManifestError: ``name`` would leave the data directory.
    """
    parts = name.split("/") if isinstance(name, str) else []
    if (not parts or name.startswith("/") or "\\" in name or "\0" in name
            or any(p in ("", ".", "..") for p in parts) or "://" in name):
        raise ManifestError(f"{where}: the manifest names {name!r}, which is not a file inside "
                            "the data directory; fix the manifest")
    return name


def _url_part(root_url: str, relpath: str) -> str:
    """``relpath`` as it is appended to ``root_url``: percent-encoded for an http(s) root, so a
    name is a file name (``%2e%2e``, ``?`` and ``#`` name no other path on the server)."""
    if root_url.lower().startswith(("http://", "https://")):
        return urllib.parse.quote(relpath, safe="/")
    return relpath


def open_root(location: str | RemoteRoot, *, server: str | None = None,
              token: str | None = None, version: str | None = None,
              storage_options: Mapping[str, Any] | None = None) -> RemoteRoot:
    """The :class:`RemoteRoot` of a URL or DOI (a DOI's file list is fetched here).

    ``storage_options`` (as ``xarray.open_zarr`` or ``pandas.read_csv`` take them) go to
    fsspec for every file of the root; given for an ``https://`` root they send its reads
    through fsspec's HTTP filesystem instead of guideloom's own client.

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


def _doi_root(doi: str, server: str | None, token: str | None,
              version: str | None) -> RemoteRoot:
    from guideloom import dataverse

    base = dataverse.server_url(server)
    secret = dataverse.api_token(token)
    from guideloom import config

    version = version or config.get("dataverse_version") or dataverse.DEFAULT_VERSION
    _, files = dataverse.version_files(version, server=base, doi=doi, token=secret)
    entries = tuple(RemoteFileEntry(f.relpath,
                                    f"{base}/api/access/datafile/{f.id}?format=original",
                                    f.size or None, f.checksum.value if f.checksum else "")
                    for f in files)
    headers = ((TOKEN_HEADER, secret),) if secret else ()
    return RemoteRoot(url=doi, files=entries, server=base, headers=headers)
