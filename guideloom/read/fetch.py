"""One byte source per remote file and process, and fetching a remote root's small files whole
(the manifest, the index table).

Dask workers receive locations (URLs and offsets), never open connections: each process opens
its own source per URL on first use (:func:`source_of`) and reuses it, with its connection pool.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from guideloom.errors import ConfigError, RemoteReadError
from guideloom.read.byte_source import ByteSource, open_byte_source
from guideloom.read.files import TOKEN_HEADER, RemoteFiles, RemotePath
from guideloom.read.fsspec_source import FsspecSource
from guideloom.read.http import HttpRangeSource

logger = logging.getLogger(__name__)


def source_of(url: str, size: int | None = None,
              headers: tuple[tuple[str, str], ...] = (),
              options: Mapping[str, Any] | None = None) -> ByteSource:
    """This process's byte source of ``url`` (opened on first use, then reused: see
    :func:`~guideloom.read.byte_source.open_byte_source`); the token among ``headers`` goes to the
    Dataverse server only (:class:`~guideloom.read.http.HttpRangeSource`); ``options``
    are the root's fsspec storage options."""
    token = dict(headers).get(TOKEN_HEADER)
    opts = dict(options or {})
    src = open_byte_source(url, token=token, size=size, **opts) if token else \
        open_byte_source(url, size=size, **opts) \
        if url.lower().startswith(("http://", "https://")) else open_byte_source(url, **opts)
    if size and isinstance(src, FsspecSource) and src._size is None:
        src._size = size
    return src


def http_validator(url: str, timeout: float | None = None) -> tuple[int, str]:
    """The size of the file at ``url`` and its ETag or Last-Modified ('' when none), from one
    ``HEAD`` request (an archive replaced on the server is noticed by these); a 429/5xx answer,
    a reset or a timeout is retried as ranged reads are (:func:`~guideloom.read.http.
    env_settings`).

    Raises:
        FileNotFoundError: The server answers 404 or 410 (no such file).
        RemoteReadError: Any other failure, after the retries (naming ``url``).
    """
    import urllib.error
    import urllib.request

    from guideloom.errors import DownloadError, RemoteReadError
    from guideloom.net.deadline import open_url
    from guideloom.net.fetch import with_retries
    from guideloom.read.http import env_settings

    settings = env_settings()

    def once() -> Any:
        req = urllib.request.Request(url, method="HEAD",
                                     headers={"User-Agent": "guideloom-remote"})
        try:  # the answer within the timeout in all (http_deadline)
            with open_url(req, timeout or settings.timeout) as resp:
                return resp.headers
        except urllib.error.HTTPError as exc:
            if exc.code in (404, 410):  # not retried
                return exc
            raise

    def give_up(reason: str, attempts: int) -> Exception:
        return RemoteReadError(f"cannot find the size of {url}: failed after {attempts} "
                               f"attempts (last: {reason}); check that the server is reachable "
                               "and try again", url=url)

    try:
        headers = with_retries(once, url, "HEAD", settings, give_up=give_up)
    except DownloadError as exc:  # a permanent HTTP answer (401, 403, ...): not retried
        raise RemoteReadError(f"cannot find the size of {url}: {exc}", url=url) from exc
    if isinstance(headers, urllib.error.HTTPError):
        raise FileNotFoundError(f"{url}: HTTP {headers.code} {headers.reason}")
    length = headers.get("Content-Length")
    if length is None:
        raise OSError(f"{url}: the server gives no size (Content-Length)")
    return int(length), headers.get("ETag") or headers.get("Last-Modified") or ""


MAX_WHOLE = 256 << 20  # bytes of a file fetched whole (a manifest, an index table)
FIRST_WHOLE = 1 << 20  # bytes asked for at first: a smaller file comes whole in one request


def fetch_bytes(root: RemoteFiles, relpath: str, what: str) -> tuple[bytes, RemotePath]:
    """The whole file ``relpath`` of ``root`` and its :class:`RemotePath`.

    Raises:
        FileNotFoundError: The root has no such file or it cannot be read (naming its URL and
            ``what``).
    """
    entry = root.entry(relpath)
    if entry is None:
        raise FileNotFoundError(f"{what} {relpath!r} is not in {root}")
    try:
        src = source_of(entry.url, entry.size, root.headers, root.options)
        data, size = _whole(src)
    except ConfigError:  # a bad setting (GUIDELOOM_HTTP_TIMEOUT=0) is no missing manifest
        raise
    except (OSError, ValueError) as exc:
        raise FileNotFoundError(f"{what} not found or not readable: {entry.url} ({exc})") \
            from exc
    if data is None:
        raise FileNotFoundError(f"{what} {entry.url} has {size} bytes, more than the "
                                f"{MAX_WHOLE >> 20} MiB a manifest or index table may have; "
                                "check the URL")
    return data, RemotePath(entry.url)


def _whole(src: ByteSource) -> tuple[bytes | None, int]:
    """The file's bytes (``None`` when larger than :data:`MAX_WHOLE`) and its size. Over HTTP
    one request for the last :data:`FIRST_WHOLE` bytes brings a smaller file whole and tells
    its size (no size request first); the bytes before them come in one more."""
    if not isinstance(src, HttpRangeSource):
        size = src.size()
        return (src.read(0, size) if size <= MAX_WHOLE else None), size
    try:
        tail = src.read_tail(FIRST_WHOLE)
    except RemoteReadError as exc:  # an empty file answers 416 (and its size: 0)
        try:
            empty = src.size() == 0
        except (OSError, ValueError):
            raise exc from None
        if empty:
            return b"", 0
        raise
    size = src.size()  # known from the answer
    if len(tail) >= size:
        return tail, size
    if size > MAX_WHOLE:
        return None, size
    return src.read(0, size - len(tail)) + tail, size
