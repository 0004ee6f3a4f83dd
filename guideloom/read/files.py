"""Files named relative to a data root: the name checks, remote paths and file entries, and
what the scanners read of a remote root and of a dataset (protocols, so that the layers below
:mod:`guideloom.read.roots` need neither it nor the manifest module), and a Croissant
``dataType`` in its ``sc:`` form (:func:`short_type`, which the index table uses too)."""

from __future__ import annotations

import os
import posixpath
import stat
import urllib.parse
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from guideloom.errors import ManifestError, user_text

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


_SCHEMA_ORG = ("https://schema.org/", "http://schema.org/")


def short_type(data_type: str | None) -> str:
    """Return a Croissant ``dataType`` in its ``sc:`` form (``sc:Text`` when absent).

    ``sc:Integer``, ``https://schema.org/Integer`` and ``http://schema.org/Integer`` all give
    ``sc:Integer`` (manifests spell schema.org both ways); other types are returned unchanged.
    """
    if data_type is None:
        return "sc:Text"
    data_type = data_type.strip()
    for prefix in _SCHEMA_ORG:
        if data_type.startswith(prefix):
            return "sc:" + data_type[len(prefix):]
    return data_type


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


def confined(root: str | Path, name: str, where: str,
             trusted_roots: Sequence[str | Path] | None = None) -> Path:
    """``root / name``, refused unless every symbolic link on its way may be followed.

    ``name`` may not be absolute nor climb with ``..``. A link on the way (the whole chain,
    links in link targets included) is followed when what it leads to stays inside ``root``,
    when it is yours (or root's: made by you, another user cannot change it), or when it leads
    into a trusted root (``trusted_roots``, else the configuration's ``trusted_roots``, which
    ``--trust-root DIR`` adds to). A link another user made, leading elsewhere, is refused.

    Raises:
        ManifestError: Naming ``where`` (the manifest entry), ``name``, the refused link and
            where it leads, and the option that would accept it.
    """
    base = Path(root).resolve()
    if not isinstance(name, str) or not name:
        raise ManifestError(f"{where} is {name!r}, not a file name: fix the manifest")
    path = Path(root) / name
    if Path(name).is_absolute() or ".." in Path(name).parts or "\0" in name:
        raise ManifestError(
            f"{where} names {name!r}, which is not a file inside the data directory {base} "
            f"(it leads to {os.path.realpath(path)}); a manifest may name only files in its "
            "own data directory, without '..': fix the manifest or move the file there")
    trusted = tuple(Path(t).resolve() for t in (
        configured_trusted_roots() if trusted_roots is None else trusted_roots))
    resolved = _followed(base, name, where, trusted)
    if resolved == base:
        raise ManifestError(f"{where} names {name!r}, which is the data directory {base} "
                            "itself, not a file in it: fix the manifest")
    return path


def configured_trusted_roots() -> tuple[str, ...]:
    """The folders of the configuration's ``trusted_roots`` (``GUIDELOOM_TRUSTED_ROOTS``,
    ``--trust-root``): links of other users into them are followed."""
    from guideloom import config

    value = config.get("trusted_roots") or ""
    return tuple(p for p in value.split(os.pathsep) if p)


_MAX_LINKS = 40  # as the kernel's own limit on the links of one path (ELOOP)


def _followed(base: Path, name: str, where: str, trusted: tuple[Path, ...]) -> Path:
    """Where ``base / name`` leads, each link on the way checked by :func:`_check_link`."""
    current = base
    pending = deque(p for p in name.split("/") if p not in ("", "."))
    links = 0
    while pending:
        part = pending.popleft()
        if part == "..":  # only from a link's target
            current = current.parent
            continue
        candidate = current / part
        try:
            st = os.lstat(candidate)
        except OSError:  # not there: nothing further can be a link
            return candidate.joinpath(*pending)
        if not stat.S_ISLNK(st.st_mode):
            current = candidate
            continue
        links += 1
        if links > _MAX_LINKS:
            raise ManifestError(f"{where} names {name!r}, which passes more than {_MAX_LINKS} "
                                f"symbolic links (a loop?) from {base}: fix the links")
        _check_link(candidate, st, base, name, where, trusted)
        target = os.readlink(candidate)
        if os.path.isabs(target):
            current = Path(os.sep)
        pending.extendleft(reversed([p for p in target.split("/") if p not in ("", ".")]))
    return current


def _check_link(link: Path, st: os.stat_result, base: Path, name: str, where: str,
                trusted: tuple[Path, ...]) -> None:
    """Refuse the link ``link`` (its ``lstat`` is ``st``) unless it may be followed."""
    leads = Path(os.path.realpath(link))
    if leads.is_relative_to(base) or st.st_uid in (os.geteuid(), 0):
        return
    if any(leads.is_relative_to(t) for t in trusted):
        return
    raise ManifestError(
        f"{where} names {name!r}, which passes the symbolic link {link}, made by "
        f"{user_text(st.st_uid)}, not by you; it leads to {leads}, outside the data directory "
        f"{base}. A link another user made is followed only into a folder you trust: if you "
        f"trust the files under {leads.parent}, name it with --trust-root DIR (or "
        f"trusted_roots in the configuration, GUIDELOOM_TRUSTED_ROOTS)")

