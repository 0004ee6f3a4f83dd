"""One byte source per remote file and process, and fetching small files whole.

Dask workers receive locations (URLs and offsets), never open connections: each process opens
its own source per URL on first use (:func:`source_of`) and reuses it, with its connection pool.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from guideloom.remote.byte_source import ByteSource, FsspecSource, open_byte_source
from guideloom.remote.root import RemotePath, RemoteRoot

_SOURCES: dict[tuple[str, tuple[tuple[str, str], ...]], ByteSource] = {}
_SOURCES_LOCK = threading.Lock()


def source_of(url: str, size: int | None = None,
              headers: tuple[tuple[str, str], ...] = ()) -> ByteSource:
    """This process's byte source of ``url`` (opened on first use, then reused)."""
    key = (url, headers)
    with _SOURCES_LOCK:
        src = _SOURCES.get(key)
        if src is None:
            src = _SOURCES[key] = (TokenSource(url, headers) if headers
                                   else open_byte_source(url))
        if size and isinstance(src, FsspecSource | TokenSource):
            src._size = size  # noqa: SLF001 - known from the listing: no HEAD request
        return src


def _redirect_target(url: str, headers: dict[str, str], timeout: float) -> str | None:
    """Where ``url`` redirects to when asked with ``headers`` (``None``: it answers itself)."""
    import urllib.error
    import urllib.request

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None  # the 3xx is raised as an HTTPError: its Location is what we want

    req = urllib.request.Request(url, headers={**headers, "Range": "bytes=0-0"})
    try:
        with urllib.request.build_opener(NoRedirect).open(req, timeout=timeout):
            return None
    except urllib.error.HTTPError as exc:
        location = exc.headers.get("Location") if 300 <= exc.code < 400 else None
        if location is None:
            raise OSError(f"{url}: HTTP {exc.code} {exc.reason}") from None
        return urllib.parse.urljoin(url, location)  # (urllib.request imports urllib.parse)


class TokenSource:
    """A file behind an API token: the token goes to the server named in the URL only.

    Where that server redirects (DaRUS sends file bytes to its object store, by a pre-signed
    URL), requests go without the token: the redirect is resolved here, once, and again when the
    target stops answering (a pre-signed URL that expired).
    """

    def __init__(self, url: str, headers: tuple[tuple[str, str], ...], timeout: float = 60.0):
        self._url, self._headers, self._timeout = url, dict(headers), timeout
        self._target: ByteSource | None = None
        self._size: int | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._url

    def _resolve(self, again: bool = False) -> ByteSource:
        with self._lock:
            if self._target is None or again:
                elsewhere = _redirect_target(self._url, self._headers, self._timeout)
                self._target = (open_byte_source(elsewhere) if elsewhere
                                else open_byte_source(self._url, headers=self._headers))
                if self._size and isinstance(self._target, FsspecSource):
                    self._target._size = self._size  # noqa: SLF001 - known from the listing
            return self._target

    def size(self) -> int:
        if self._size is None:
            self._size = self._resolve().size()
        return self._size

    def read(self, offset: int, size: int) -> bytes:
        return self.read_ranges([(offset, size)])[0]

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        try:
            return self._resolve().read_ranges(ranges)
        except OSError:
            return self._resolve(again=True).read_ranges(ranges)


def fetch_bytes(root: RemoteRoot, relpath: str, what: str) -> tuple[bytes, RemotePath]:
    """The whole file ``relpath`` of ``root`` and its :class:`RemotePath`.

    Raises:
        FileNotFoundError: The root has no such file or it cannot be read (naming its URL and
            ``what``).
    """
    entry = root.entry(relpath)
    if entry is None:
        raise FileNotFoundError(f"{what} {relpath!r} is not in {root}")
    try:
        src = source_of(entry.url, entry.size, root.headers)
        return src.read(0, src.size()), RemotePath(entry.url)
    except (OSError, ValueError) as exc:
        raise FileNotFoundError(f"{what} not found or not readable: {entry.url} ({exc})") \
            from exc
