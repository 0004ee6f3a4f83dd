"""The bytes layer: the one :class:`ByteSource` protocol, the local file, and the dispatch.

A byte source is one file of known size. ``read(offset, size)`` returns exactly ``size`` bytes
or raises; ``read_many`` (also called ``read_ranges``) returns the bytes of many ranges in the
order asked, and is where a remote implementation coalesces neighbouring ranges and issues them
concurrently. Implementations: :class:`LocalFileSource` (``os.pread`` on a descriptor it owns or
leases from :class:`~guideloom.read.handles.ArchiveHandles`), :class:`MemorySource` (bytes held in
memory: an inflated member, or a local input read once for its content digest and decoded from
there, :class:`~guideloom.read.types.Held`),
:class:`~guideloom.read.http.HttpRangeSource` and
:class:`~guideloom.read.fsspec_source.FsspecSource`. :func:`open_byte_source` picks one for a
path or URL, :func:`source_for` for a location (from the location's own fields).

The protocol (:mod:`guideloom.read.types`) declares every capability the layers above use
instead of testing types: ``high_latency`` (True for network sources: every request is a
round trip, so the record reader fetches ahead and caches metadata), ``fd`` (a local file's
descriptor, which the HDF5 fast paths read directly; ``None`` elsewhere), ``view`` (bytes held
in memory, handed to the decoders in place; ``None`` elsewhere), ``read_tail``, ``readinto``
and ``close``.

Example:
    >>> src = open_byte_source("archive.zip")                            # doctest: +SKIP
    >>> src.read(src.size() - 22, 22)[:4]                                # doctest: +SKIP
    b'PK\\x05\\x06'
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guideloom.read.access import open_fd
from guideloom.read.fsspec_source import FsspecSource, fsspec_filesystem
from guideloom.read.handles import ArchiveHandles, ArchiveLease, process_handles
from guideloom.read.http import TOKEN_HEADER
from guideloom.read.ranges import COALESCE_GAP, coalesce_ranges, split_coalesced
from guideloom.read.types import ByteSource, SourceDefaults
from guideloom.runtime import os_support
from guideloom.runtime.caches import BoundedCache, cache

if TYPE_CHECKING:
    from guideloom.read.types import Located as Location

__all__ = ["COALESCE_GAP", "REMOTE_SCHEMES", "ByteSource", "FsspecSource", "LocalFileSource",
           "MemorySource", "clear_source_cache", "coalesce_ranges", "fsspec_filesystem",
           "is_remote", "open_byte_source", "slow_location", "source_for", "split_coalesced",
           "url_source"]

logger = logging.getLogger(__name__)
REMOTE_SCHEMES = ("http://", "https://", "s3://", "gs://", "az://", "abfs://", "memory://")


def slow_location(loc: Location) -> bool:
    """Whether ``loc``'s bytes come from a high-latency source (a URL), decided from the
    location alone (no source is opened): records worth reading ahead, metadata worth asking
    for at once."""
    return is_remote(loc.path)


def is_remote(location: str | os.PathLike[str]) -> bool:
    """True when ``location`` is a URL that :func:`open_byte_source` reads remotely."""
    return isinstance(location, str) and location.lower().startswith(REMOTE_SCHEMES)


class LocalFileSource:
    """A local file read with ``os.pread`` (thread-safe, no shared file position).

    Opens and owns a descriptor for ``path``; or reads the descriptor ``fd`` it is given
    (``owned`` says whether :meth:`close` closes it; a ``lease`` of a shared archive
    descriptor is released instead). ``size`` defaults to the descriptor's size.
    """

    high_latency = False

    def __init__(self, path: str | os.PathLike[str] | None = None, *, fd: int | None = None,
                 owned: bool = True, size: int | None = None, lease: ArchiveLease | None = None,
                 name: str | None = None):
        if fd is None:
            assert path is not None, "a LocalFileSource needs a path or a descriptor"
            fd = open_fd(path)
            owned = True
        self._fd, self._owned, self._lease = fd, owned, lease
        self._size: int | None
        self._path = name if name is not None else os.fspath(path) if path is not None else ""
        self._size = size
        if size is None and lease is None:
            try:
                self._size = os.fstat(fd).st_size
            except BaseException:
                self.close()
                raise

    @classmethod
    def leased(cls, lease: ArchiveLease, name: str, size: int | None = None) -> LocalFileSource:
        """A source over a shared archive descriptor; closing it releases ``lease``."""
        return cls(fd=lease.fd, owned=False, size=size, lease=lease, name=name)

    @property
    def name(self) -> str:
        return self._path

    @property
    def fd(self) -> int:
        """The descriptor (for the fast paths that read it directly)."""
        return self._fd

    def size(self) -> int:
        if self._size is None:  # a leased archive descriptor: asked only when needed
            self._size = os.fstat(self._fd).st_size
        return self._size

    def read(self, offset: int, size: int, *, sim_id: object = None) -> bytes:
        data = os_support.pread(self._fd, size, offset)
        if len(data) != size:
            who = f" (experiment {sim_id})" if sim_id is not None else ""
            raise OSError(f"{self._path}{who}: {len(data)} of {size} bytes at offset {offset}")
        return data

    def readinto(self, buffer: Any, offset: int) -> int:
        """Bytes read into ``buffer`` from ``offset`` (fewer at the end of the file)."""
        return os_support.preadinto(self._fd, buffer, offset)

    def read_ranges(self, ranges: Sequence[tuple[int, int]], *, sim_id: object = None
                    ) -> list[bytes]:
        return [self.read(o, s, sim_id=sim_id) for o, s in ranges]

    read_many = read_ranges

    def read_tail(self, size: int, *, sim_id: object = None) -> bytes:
        """The file's last ``size`` bytes (all of it when smaller)."""
        total = self.size()
        n = max(0, min(size, total))
        return self.read(total - n, n, sim_id=sim_id)

    def view(self, offset: int, size: int) -> memoryview | None:
        """``None``: a file's bytes are read, not held."""
        return None

    def close(self) -> None:
        """Close the descriptor if owned (release the lease if leased); idempotent."""
        fd, self._fd = self._fd, -1
        if self._owned and fd >= 0:
            os.close(fd)
        lease, self._lease = self._lease, None
        if lease is not None:
            lease.release()

    def __enter__(self) -> LocalFileSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class MemorySource(SourceDefaults):
    """Bytes held in memory as a byte source: ``view`` is the file's bytes from offset ``base``
    on (an inflated member from 0; a :class:`~guideloom.read.types.Held` input from where it
    was read), its size ``base + len(view)``; nothing to close. :meth:`view` hands them out
    in place (read-only), :meth:`read` as copies (what a caller may keep)."""

    high_latency = False

    def __init__(self, view: memoryview, name: str, base: int = 0):
        self._view, self._name, self._base = view.toreadonly(), name, base

    @property
    def name(self) -> str:
        return self._name

    def size(self) -> int:
        return self._base + len(self._view)

    def view(self, offset: int, size: int) -> memoryview:
        """The ``size`` bytes from ``offset``, in place.

        Raises:
            OSError: The range is not all held.
        """
        at = offset - self._base
        if at < 0 or size < 0 or at + size > len(self._view):
            raise OSError(f"{self._name}: {size} bytes at offset {offset} are outside the "
                          f"bytes held ({len(self._view)} from offset {self._base})")
        return self._view[at:at + size]

    def read(self, offset: int, size: int) -> bytes:
        return bytes(self.view(offset, size))

    def readinto(self, buffer: Any, offset: int) -> int:
        at = offset - self._base
        if at < 0:
            raise OSError(f"{self._name}: offset {offset} is before the bytes held (from "
                          f"{self._base})")
        n = max(0, min(len(buffer), len(self._view) - at))
        memoryview(buffer).cast("B")[:n] = self._view[at:at + n]
        return n

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        return [self.read(o, s) for o, s in ranges]

    read_many = read_ranges

    def close(self) -> None:
        """Nothing to release (the buffer goes with the last reference)."""


_SOURCE_CACHE: BoundedCache[tuple[Any, ...], ByteSource] = cache("byte_sources")


def open_byte_source(location: str | os.PathLike[str], *, token: str | None = None,
                     settings: Any = None, size: int | None = None, **storage_options: Any
                     ) -> ByteSource:
    """A :class:`ByteSource` for a local path or a URL.

    ``http://`` and ``https://`` URLs are read by :class:`~guideloom.read.http.HttpRangeSource`
    (standard library, pooled keep-alive connections; ``token`` is the Dataverse API token,
    ``settings`` a :class:`~guideloom.net.fetch.Settings`, ``size`` the size when known);
    given ``storage_options`` they go to fsspec's HTTP filesystem instead. Other URLs
    (``s3://``, ``gs://``, ...) are read by :class:`FsspecSource` with ``storage_options``
    (and ``token``, which gcsfs takes). Remote sources are kept per process, so a Dask worker
    asking again for the same URL reuses its source, its connections and what it learnt.
    """
    if not is_remote(location):
        return LocalFileSource(Path(location))
    url = str(location)
    if url.lower().startswith(("http://", "https://")) and not storage_options:
        from guideloom.read.http import http_source

        return http_source(url, token=token, settings=settings, size=size)
    if token is not None:
        storage_options = {**storage_options, "token": token}
    key = (url, token, repr(sorted(storage_options.items())))

    def make() -> ByteSource:
        src = FsspecSource(url, **storage_options)
        src._size = size
        return src

    return _SOURCE_CACHE.get_or_create(key, make)


def url_source(url: str, size: int | None = None, headers: tuple[tuple[str, str], ...] = (),
               options: Mapping[str, Any] | None = None) -> ByteSource:
    """This process's byte source of ``url`` (opened on first use, then reused); the token
    among ``headers`` goes to the Dataverse server only; ``options`` are fsspec storage
    options. A size known from a listing spares the size request."""
    token = dict(headers).get(TOKEN_HEADER)
    opts = dict(options or {})
    src = open_byte_source(url, token=token, size=size, **opts) if token else \
        open_byte_source(url, size=size, **opts) \
        if url.lower().startswith(("http://", "https://")) else open_byte_source(url, **opts)
    if size and isinstance(src, FsspecSource) and src._size is None:
        src._size = size  # known from the listing: no metadata request
    return src


def source_for(loc: Location, handles: ArchiveHandles | None = None) -> ByteSource:
    """The byte source holding ``loc``'s bytes, decided from the location's own fields; close
    it when done (a shared remote source ignores that).

    A URL is read through this process's source of it (its size from ``archive_size``, its
    ``headers`` and fsspec ``options`` when the location has them); bytes held in memory
    (``loc.held``: read once for the input's content digest) from there; a loose local file
    through a descriptor of its own; a local archive through a lease of its descriptor in
    ``handles`` (default: the process's), the source ending where the member ends.
    """
    held = loc.held
    if held is not None:
        return MemorySource(held.data, loc.describe(), held.base)
    if is_remote(loc.path):
        return url_source(loc.path, loc.archive_size or None, loc.headers, loc.options)
    if loc.member is None:
        return LocalFileSource(loc.path)
    lease = (handles or process_handles()).lease(loc.path)
    return LocalFileSource.leased(lease, loc.describe(), lease.size)


def clear_source_cache() -> None:
    """Forget the remote sources this process keeps (the next open starts afresh)."""
    from guideloom.read.fsspec_source import clear_filesystems
    from guideloom.read.http import clear_http_sources

    _SOURCE_CACHE.clear()
    clear_filesystems()
    clear_http_sources()
