"""One byte source per remote file and process, and fetching small files whole.

Dask workers receive locations (URLs and offsets), never open connections: each process opens
its own source per URL on first use (:func:`source_of`) and reuses it, with its connection pool.
"""

from __future__ import annotations

import threading
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
            options: dict[str, Any] = {"headers": dict(headers)} if headers else {}
            src = _SOURCES[key] = open_byte_source(url, **options)
        if size and isinstance(src, FsspecSource):
            src._size = size  # noqa: SLF001 - known from the listing: no HEAD request
        return src


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
