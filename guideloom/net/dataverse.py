"""The Dataverse API calls that list a published dataset (DaRUS): versions and their files.

:mod:`guideloom.releases.release` downloads what these list; :mod:`guideloom.read` reads the
files in place. The server is ``server=``, else ``$GUIDELOOM_DATAVERSE_URL``, else DaRUS; the token
``token=``, else ``$GUIDELOOM_DATAVERSE_TOKEN``.
"""

from __future__ import annotations

import json
import urllib.parse
from dataclasses import dataclass
from typing import Any

from guideloom import config
from guideloom.errors import DownloadError, UsageError
from guideloom.net.fetch import HASH_NAMES, Checksum, Settings, get_json

DEFAULT_SERVER = "https://darus.uni-stuttgart.de"
RDDAC_DOI = "doi:10.18419/DARUS-5589"
DEFAULT_VERSION = "2.0"  # the release rddac 2.0 downloads
SERVER_ENV = "GUIDELOOM_DATAVERSE_URL"
TOKEN_ENV = "GUIDELOOM_DATAVERSE_TOKEN"


@dataclass(frozen=True)
class RemoteFile:
    """One file of a dataset version, as the Dataverse API lists it."""

    id: int
    name: str
    directory: str
    size: int
    checksum: Checksum | None
    description: str = ""

    @property
    def relpath(self) -> str:
        """Where the file goes below the output directory (``h5/concave.zip``)."""
        return f"{self.directory}/{self.name}" if self.directory else self.name


def server_url(server: str | None) -> str:
    """The Dataverse base URL: ``server``, else ``$GUIDELOOM_DATAVERSE_URL``, else DaRUS."""
    url = (server or config.get("dataverse_url") or DEFAULT_SERVER).rstrip("/")  # SERVER_ENV
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise UsageError(f"the server {url!r} is not an http(s) URL")
    return url


def api_token(token: str | None) -> str | None:
    """The API token: ``token``, else ``$GUIDELOOM_DATAVERSE_TOKEN`` (``None`` when unset)."""
    return token or config.get("dataverse_token") or None  # TOKEN_ENV, read now


def safe_part(text: str, what: str, fid: Any) -> str:
    """A file or directory name from the server, checked to stay below the output directory."""
    parts = text.split("/")
    if text and ("\\" in text or "\0" in text or any(p in ("", ".", "..") for p in parts)):
        raise DownloadError(f"the repository lists file {fid} with the {what} {text!r}, which "
                            "would be written outside the output directory; not downloading it")
    return text


def remote_file(entry: dict[str, Any]) -> RemoteFile:
    """One entry of a version's file list (names checked to stay below an output folder)."""
    df = entry.get("dataFile") or {}
    fid = df.get("id")
    name = df.get("originalFileName") or df.get("filename") or entry.get("label")
    if fid is None or not name:
        raise DownloadError(f"the repository's file list has an entry without id or name: "
                            f"{json.dumps(entry)[:200]}")
    size = df.get("originalFileSize", df.get("filesize"))
    listed = df.get("checksum") or {}
    algorithm = HASH_NAMES.get(str(listed.get("type", "")).upper())
    if algorithm and listed.get("value"):
        checksum = Checksum(algorithm, str(listed["value"]).lower())
    elif df.get("md5"):
        checksum = Checksum("md5", str(df["md5"]).lower())
    else:
        checksum = None
    return RemoteFile(
        id=int(fid), name=safe_part(str(name), "name", fid),
        directory=safe_part(str(entry.get("directoryLabel") or ""), "folder", fid),
        size=int(size) if size is not None else 0, checksum=checksum,
        description=str(entry.get("description") or df.get("description") or ""))


def api_data(server: str, path: str, doi: str, settings: Settings, what: str) -> Any:
    """The ``data`` of one Dataverse API answer about the dataset ``doi``."""
    url = f"{server}/api/{path}?persistentId={urllib.parse.quote(doi, safe=':/')}"
    doc = get_json(url, settings, what)
    if not isinstance(doc, dict) or "data" not in doc:
        raise DownloadError(f"{what}: {url} answered without a 'data' field: "
                            f"{str(doc)[:200]}")
    return doc["data"]


def title_of(version: dict[str, Any]) -> str:
    """The dataset title in a version's citation metadata ('' when absent)."""
    fields = version.get("metadataBlocks", {}).get("citation", {}).get("fields", [])
    return next((f.get("value", "") for f in fields if f.get("typeName") == "title"), "")


def version_files(version: str, *, server: str | None = None, doi: str = RDDAC_DOI,
                  token: str | None = None, timeout: float = 60.0, retries: int = 5
                  ) -> tuple[dict[str, Any], list[RemoteFile]]:
    """The metadata of one dataset version and its files.

    Args:
        version: ``"2.0"``, ``":latest-published"``, ``":draft"`` (needs a token), ...
        server: Dataverse base URL (default ``$GUIDELOOM_DATAVERSE_URL`` or DaRUS).
        doi: The dataset's persistent id.
        token: API token (default ``$GUIDELOOM_DATAVERSE_TOKEN``).
        timeout: Seconds per connect or read.
        retries: Retries of the request after the first attempt.

    Raises:
        DownloadError: The list cannot be fetched, or it names a file that would leave the
            output folder, or two different files at one path (naming both).
    """
    settings = Settings(timeout=timeout, retries=retries, token=api_token(token))
    what = f"dataset {doi} version {version}"
    data = api_data(server_url(server), f"datasets/:persistentId/versions/{version}", doi,
                    settings, what)
    return data, unique_paths([remote_file(e) for e in data.get("files", [])], what)


def unique_paths(files: list[RemoteFile], what: str) -> list[RemoteFile]:
    """``files`` with one entry per path (a file listed twice, same id, counts once).

    Raises:
        DownloadError: Two different files (ids) at one path, which would overwrite each
            other: the message names both.
    """
    seen: dict[str, RemoteFile] = {}
    out = []
    for f in files:
        first = seen.setdefault(f.relpath, f)
        if first is f:
            out.append(f)
        elif first.id != f.id:
            raise DownloadError(
                f"{what}: the repository lists two different files at {f.relpath}: file "
                f"{first.id} ({first.size} bytes) and file {f.id} ({f.size} bytes); one would "
                "overwrite the other, so nothing is downloaded (tell the dataset's "
                "maintainers)")
    return out


def dataset_versions(*, server: str | None = None, doi: str = RDDAC_DOI,
                     token: str | None = None, timeout: float = 60.0, retries: int = 5
                     ) -> list[dict[str, Any]]:
    """Every version of the dataset the server shows (newest first), each with ``files``."""
    base = server_url(server)
    settings = Settings(timeout=timeout, retries=retries, token=api_token(token))
    versions = api_data(base, "datasets/:persistentId/versions", doi, settings,
                        f"dataset {doi} versions")
    for v in versions:
        if "files" not in v:
            number = f"{v.get('versionNumber')}.{v.get('versionMinorNumber', 0)}"
            v["files"] = api_data(base, f"datasets/:persistentId/versions/{number}/files", doi,
                                  settings, f"dataset {doi} version {number} files")
    return versions
