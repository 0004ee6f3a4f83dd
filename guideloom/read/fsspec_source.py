"""Files on any fsspec filesystem (S3, GCS, Azure, HTTP with storage options) as byte sources."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from guideloom.read.ranges import coalesce_ranges, split_coalesced
from guideloom.read.types import SourceDefaults
from guideloom.runtime.caches import BoundedCache, cache

logger = logging.getLogger(__name__)


class FsspecSource(SourceDefaults):
    """A file on any fsspec filesystem; ``read_ranges`` goes through ``cat_ranges``, which async
    filesystems (HTTP, S3) issue concurrently."""

    high_latency = True

    def __init__(self, url: str, fs: Any = None, **storage_options: Any):
        if fs is None:
            fs, path = fsspec_filesystem(url, storage_options)
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
            except Exception as exc:
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
        except Exception as exc:
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

    read_many = read_ranges

    def read_tail(self, size: int, *, sim_id: object = None) -> bytes:
        """The file's last ``size`` bytes (all of it when smaller)."""
        total = self.size()
        n = max(0, min(size, total))
        return self.read(total - n, n, sim_id=sim_id)

    def close(self) -> None:
        """Nothing: the source is shared by the process (see :func:`clear_filesystems`)."""


def _access_hint(exc: BaseException) -> str:
    """What to do when the store refused or found no credentials ('' for other errors)."""
    if isinstance(exc, PermissionError) or "credential" in type(exc).__name__.lower():
        return ("; pass the credentials and endpoint as storage_options= (or --storage-option "
                "KEY=VALUE, or the filesystem's own environment variables), see docs/remote.md")
    return ""


_FILESYSTEMS: BoundedCache[tuple[str, str], Any] = cache("fsspec_filesystems")


def fsspec_filesystem(url: str, storage_options: dict[str, Any]) -> tuple[Any, str]:
    """``(filesystem, path)`` for ``url``: one filesystem per protocol and storage options,
    kept in guideloom's cache (made with ``skip_instance_cache``, so fsspec's own unbounded
    instance cache does not keep it, and :func:`guideloom.clear_caches` makes the next one
    afresh, with the credentials the environment holds then). Chained URLs (``a::b``) go to
    ``fsspec.core.url_to_fs`` as given."""
    import fsspec

    if "::" in url:
        fs, path = fsspec.core.url_to_fs(url, **storage_options)
        return fs, str(path)
    protocol = fsspec.core.split_protocol(url)[0] or "file"
    cls = fsspec.get_filesystem_class(protocol)
    options = {**cls._get_kwargs_from_urls(url), **storage_options}
    fs = _FILESYSTEMS.get_or_create(
        (protocol, repr(sorted(options.items()))),
        lambda: cls(skip_instance_cache=True, **options))
    return fs, cls._strip_protocol(url)


def clear_filesystems() -> None:
    """Forget the filesystems this process keeps (the next one is made afresh)."""
    _FILESYSTEMS.clear()
