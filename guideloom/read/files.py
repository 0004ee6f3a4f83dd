"""Files named relative to a data root: the name checks, remote paths and file entries, and
what the scanners read of a remote root and of a dataset (protocols, so that the layers below
:mod:`guideloom.read.roots` need neither it nor the manifest module)."""

from __future__ import annotations

import posixpath
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from guideloom.errors import ManifestError

DOI_PREFIX = "doi:"
TOKEN_HEADER = "X-Dataverse-key"
LOOSE_SUBDIR = "h5"


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


class RemoteFiles(Protocol):
    """What the remote scanners and fetchers read of a remote root
    (:class:`guideloom.read.roots.RemoteRoot`)."""

    @property
    def url(self) -> str: ...

    @property
    def files(self) -> tuple[RemoteFileEntry, ...]: ...

    @property
    def headers(self) -> tuple[tuple[str, str], ...]: ...

    @property
    def options(self) -> Mapping[str, Any]: ...

    @property
    def listed(self) -> bool: ...

    def entry(self, relpath: str) -> RemoteFileEntry | None: ...


class ScanSpec(Protocol):
    """What scanning reads of a :class:`~guideloom.select.manifest.DatasetSpec`."""

    @property
    def member_pattern(self) -> str: ...

    @property
    def id_format(self) -> str: ...


class ScannedDataset(Protocol):
    """What scanning reads of a :class:`~guideloom.select.manifest.Dataset`."""

    @property
    def name(self) -> str: ...

    @property
    def data_dir(self) -> Any: ...

    @property
    def spec(self) -> ScanSpec: ...

    @property
    def archives(self) -> tuple[str, ...]: ...

    @property
    def id_column_type(self) -> str | None: ...

    def index(self) -> Any: ...

    def file_in_data_dir(self, root: Any, name: str, what: str) -> Any: ...


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


def url_part(root_url: str, relpath: str) -> str:
    """``relpath`` as it is appended to ``root_url``: percent-encoded for an http(s) root, so a
    name is a file name (``%2e%2e``, ``?`` and ``#`` name no other path on the server)."""
    if root_url.lower().startswith(("http://", "https://")):
        return urllib.parse.quote(relpath, safe="/")
    return relpath


def confined(root: str | Path, name: str, where: str) -> Path:
    """``root / name``, refused unless it stays inside ``root`` once symlinks are resolved.

    Raises:
        ManifestError: Naming ``where`` (the manifest entry), ``name`` and where it leads.
    """
    base = Path(root).resolve()
    if not isinstance(name, str) or not name:
        raise ManifestError(f"{where} is {name!r}, not a file name: fix the manifest")
    path = Path(root) / name
    resolved = path.resolve()
    if Path(name).is_absolute() or not resolved.is_relative_to(base) or resolved == base:
        raise ManifestError(
            f"{where} names {name!r}, which is not a file inside the data directory {base} "
            f"(it leads to {resolved}); a manifest may name only files in its own data "
            "directory: fix the manifest or move the file there")
    return path
