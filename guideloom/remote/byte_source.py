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

import bisect
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

REMOTE_SCHEMES = ("http://", "https://", "s3://", "gs://", "az://", "abfs://", "memory://")
COALESCE_GAP = 1 << 16  # ranges closer than this are fetched as one request


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


def coalesce_ranges(ranges: Sequence[tuple[int, int]], gap: int = COALESCE_GAP
                    ) -> list[tuple[int, int]]:
    """Merge ``(offset, size)`` ranges that overlap or lie within ``gap`` bytes of each other.

    Returns the merged ranges sorted by offset; :func:`split_coalesced` cuts their bytes back
    into the ranges asked for.
    """
    merged: list[list[int]] = []
    for offset, size in sorted(ranges):
        end = offset + size
        if merged and offset <= merged[-1][1] + gap:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([offset, end])
    return [(start, end - start) for start, end in merged]


def split_coalesced(ranges: Sequence[tuple[int, int]], merged: Sequence[tuple[int, int]],
                    blobs: Sequence[bytes]) -> list[bytes]:
    """The bytes of each of ``ranges`` cut out of the ``blobs`` fetched for ``merged``."""
    starts = [m[0] for m in merged]
    out: list[bytes] = []
    for offset, size in ranges:
        i = bisect.bisect_right(starts, offset) - 1
        start = starts[i]
        blob = blobs[i]
        piece = bytes(blob[offset - start: offset - start + size])
        if len(piece) != size:
            raise OSError(f"short read: {len(piece)} of {size} bytes at offset {offset}")
        out.append(piece)
    return out


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

    def read(self, offset: int, size: int) -> bytes:
        data = os.pread(self._fd, size, offset)
        if len(data) != size:
            raise OSError(f"{self._path}: {len(data)} of {size} bytes at offset {offset}")
        return data

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        return [self.read(o, s) for o, s in ranges]

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
            self._size = int(self._fs.size(self._path))
        return self._size

    def read(self, offset: int, size: int) -> bytes:
        return self.read_ranges([(offset, size)])[0]

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        if not ranges:
            return []
        merged = coalesce_ranges(ranges)
        blobs = self._fs.cat_ranges([self._path] * len(merged), [o for o, _ in merged],
                                    [o + s for o, s in merged])
        for blob in blobs:
            if isinstance(blob, BaseException):
                raise OSError(f"{self._url}: {blob}") from blob
        return split_coalesced(ranges, merged, blobs)


def open_byte_source(location: str | os.PathLike[str], **storage_options: Any) -> ByteSource:
    """A :class:`ByteSource` for a local path or a URL (``https://``, ``s3://``, ...)."""
    if is_remote(location):
        return FsspecSource(str(location), **storage_options)
    return LocalFileSource(Path(location))
