"""The :class:`ByteSource` protocol and its local and fsspec implementations.

A byte source is one file of known size. ``read(offset, size)`` returns exactly ``size`` bytes
or raises; ``read_ranges`` returns the bytes of many ranges in the order asked, and is where a
remote implementation coalesces neighbouring ranges and issues them concurrently.

Example:
    >>> src = open_byte_source("archive.zip")                            # doctest: +SKIP
    >>> src.read(src.size() - 22, 22)[:4]                                # doctest: +SKIP
    b'PK\\x05\\x06'
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from guideloom import os_support
from guideloom.caches import BoundedCache, cache
from guideloom.remote.ranges import COALESCE_GAP, coalesce_ranges, split_coalesced

__all__ = ["COALESCE_GAP", "ByteSource", "FsspecSource", "LocalFileSource", "clear_source_cache",
           "coalesce_ranges", "is_remote", "open_byte_source", "split_coalesced"]

REMOTE_SCHEMES = ("http://", "https://", "s3://", "gs://", "az://", "abfs://", "memory://")


@runtime_checkable
class ByteSource(Protocol):
    """One file's bytes, read by offset."""

    @property
    def name(self) -> str:
        """The path or URL, for messages."""
        ...

    def size(self) -> int:
        """The file's size in bytes."""
        ...

    def read(self, offset: int, size: int) -> bytes:
        """Exactly ``size`` bytes from ``offset``; raises ``OSError`` when fewer exist."""
        ...

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        """The bytes of each ``(offset, size)`` range, in the order given."""
        ...


def is_remote(location: str | os.PathLike[str]) -> bool:
    """True when ``location`` is a URL that :func:`open_byte_source` reads remotely."""
    return isinstance(location, str) and location.lower().startswith(REMOTE_SCHEMES)


class LocalFileSource:
    """A local file read with ``os.pread`` (thread-safe, no shared file position)."""

    def __init__(self, path: str | os.PathLike[str]):
        self._path = os.fspath(path)
        self._fd = os.open(self._path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        self._size = os.fstat(self._fd).st_size

    @property
    def name(self) -> str:
        return self._path

    def size(self) -> int:
        return self._size

    def read(self, offset: int, size: int, *, sim_id: object = None) -> bytes:
        data = os_support.pread(self._fd, size, offset)
        if len(data) != size:
            who = f" (experiment {sim_id})" if sim_id is not None else ""
            raise OSError(f"{self._path}{who}: {len(data)} of {size} bytes at offset {offset}")
        return data

    def read_ranges(self, ranges: Sequence[tuple[int, int]], *, sim_id: object = None
                    ) -> list[bytes]:
        return [self.read(o, s, sim_id=sim_id) for o, s in ranges]

    def read_tail(self, size: int, *, sim_id: object = None) -> bytes:
        """The file's last ``size`` bytes (all of it when smaller)."""
        n = max(0, min(size, self._size))
        return self.read(self._size - n, n, sim_id=sim_id)

    def close(self) -> None:
        """Close the descriptor."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> LocalFileSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class FsspecSource:
    """A file on any fsspec filesystem; ``read_ranges`` goes through ``cat_ranges``, which async
    filesystems (HTTP, S3) issue concurrently."""

    def __init__(self, url: str, fs: Any = None, **storage_options: Any):
        import fsspec

        if fs is None:
            fs, path = fsspec.core.url_to_fs(url, **storage_options)
        else:
            path = url
        self._url = url
        self._fs = fs
        self._path = path
        self._size: int | None = None

    @property
    def name(self) -> str:
        return self._url

    def size(self) -> int:
        if self._size is None:
            try:
                self._size = int(self._fs.size(self._path))
            except Exception as exc:  # noqa: BLE001 - any backend's error, named with the URL
                from guideloom.errors import RemoteReadError

                raise RemoteReadError(f"cannot find the size of {self._url}: "
                                      f"{type(exc).__name__}: {exc}{_access_hint(exc)}",
                                      url=self._url) from exc
        return self._size

    def read(self, offset: int, size: int, *, sim_id: object = None) -> bytes:
        return self.read_ranges([(offset, size)], sim_id=sim_id)[0]

    def read_ranges(self, ranges: Sequence[tuple[int, int]], *, sim_id: object = None
                    ) -> list[bytes]:
        """The bytes of each range; a failure is a :class:`~guideloom.errors.RemoteReadError`
        naming the URL, the bytes and ``sim_id`` (fsspec's filesystem does the retrying)."""
        if not ranges:
            return []
        merged = coalesce_ranges(ranges)
        try:
            blobs = self._fs.cat_ranges([self._path] * len(merged), [o for o, _ in merged],
                                        [o + s for o, s in merged], on_error="return")
        except Exception as exc:  # noqa: BLE001 - any backend's error, named with the URL
            blobs = [exc] * len(merged)
        for (offset, size), blob in zip(merged, blobs, strict=True):
            if isinstance(blob, BaseException) or len(blob) != size:
                from guideloom.errors import RemoteReadError

                who = f" for experiment {sim_id}" if sim_id is not None else ""
                why = (f"{type(blob).__name__}: {blob}" if isinstance(blob, BaseException)
                       else f"{len(blob)} bytes came back")
                raise RemoteReadError(
                    f"cannot read bytes {offset}-{offset + size - 1} ({size} bytes) of "
                    f"{self._url}{who}: {why}", url=self._url, ranges=[(offset, size)],
                    sim_id=sim_id) from (blob if isinstance(blob, BaseException) else None)
        return split_coalesced(ranges, merged, blobs)

    def read_tail(self, size: int, *, sim_id: object = None) -> bytes:
        """The file's last ``size`` bytes (all of it when smaller)."""
        total = self.size()
        n = max(0, min(size, total))
        return self.read(total - n, n, sim_id=sim_id)


def _access_hint(exc: BaseException) -> str:
    """What to do when the store refused or found no credentials ('' for other errors)."""
    if isinstance(exc, PermissionError) or "credential" in type(exc).__name__.lower():
        return ("; pass the credentials and endpoint as storage_options= (or --storage-option "
                "KEY=VALUE, or the filesystem's own environment variables), see docs/remote.md")
    return ""


_SOURCE_CACHE: BoundedCache[tuple[Any, ...], ByteSource] = cache("byte_sources")


def open_byte_source(location: str | os.PathLike[str], *, token: str | None = None,
                     settings: Any = None, size: int | None = None, **storage_options: Any
                     ) -> ByteSource:
    """A :class:`ByteSource` for a local path or a URL.

    ``http://`` and ``https://`` URLs are read by :class:`~guideloom.remote.http.HttpRangeSource`
    (standard library, pooled keep-alive connections; ``token`` is the Dataverse API token,
    ``settings`` a :class:`~guideloom.http_fetch.Settings`, ``size`` the size when known);
    given ``storage_options`` they go to fsspec's HTTP filesystem instead. Other URLs
    (``s3://``, ``gs://``, ...) are read by :class:`FsspecSource` with ``storage_options``
    (and ``token``, which gcsfs takes). Remote sources are kept per process, so a Dask worker
    asking again for the same URL reuses its source, its connections and what it learnt.
    """
    if not is_remote(location):
        return LocalFileSource(Path(location))
    url = str(location)
    if url.lower().startswith(("http://", "https://")) and not storage_options:
        from guideloom.remote.http import http_source

        return http_source(url, token=token, settings=settings, size=size)
    if token is not None:
        storage_options = {**storage_options, "token": token}
    key = (url, token, repr(sorted(storage_options.items())))
    def make() -> ByteSource:
        src = FsspecSource(url, **storage_options)
        src._size = size
        return src

    return _SOURCE_CACHE.get_or_create(key, make)


def clear_source_cache() -> None:
    """Forget the remote sources this process keeps (the next open starts afresh)."""
    from guideloom.remote.http import clear_http_sources

    _SOURCE_CACHE.clear()
    clear_http_sources()
