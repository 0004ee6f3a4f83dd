"""Protocols for GuideLoom storage formats and the abstract file-reader interfaces.

A *format* turns user records into what a storage writes and turns what a read returns back into
samples. A *read interface* opens shard files for positional reads; :mod:`guideloom.storage.io`
has three (seek, mmap, pread) and a user can add another (for example HTTP range reads) by
subclassing :class:`ReadInterface` and :class:`FileReader`.
"""

from __future__ import annotations

import asyncio
import os
from abc import ABC, abstractmethod
from collections.abc import Generator, Hashable
from typing import Any, Protocol, runtime_checkable

import numpy as np

__all__ = [
    "DocumentStorageFormat",
    "FileReader",
    "ReadInterface",
    "StreamStorageFormat",
    "StreamWithMetaStorageFormat",
]


@runtime_checkable
class StreamStorageFormat(Protocol):
    """Encodes records as 1-D arrays of ``stream_dtype`` and decodes read windows.

    Attributes:
        stream_dtype: The dtype of one stream element (use explicit byte order).
    """

    stream_dtype: np.dtype

    def pack(self, data: Any) -> np.ndarray:
        """Return ``data`` as a 1-D array of ``stream_dtype``."""
        ...

    def unpack(self, stream: np.ndarray, shard_lengths: np.ndarray, shards: np.ndarray) -> Any:
        """Return the sample for a read window.

        Args:
            stream: The window, a fresh 1-D array of ``stream_dtype`` the format may keep.
            shard_lengths: Element count of each consecutive shard segment of the window.
            shards: The shard number of each segment.
        """
        ...


@runtime_checkable
class DocumentStorageFormat(Protocol):
    """Encodes each record whole as bytes."""

    def pack(self, data: Any) -> bytes:
        """Return the encoded record."""
        ...

    def unpack(self, encoded: bytes, shard: int) -> Any:
        """Return the record decoded from ``encoded``, stored in shard ``shard``."""
        ...


@runtime_checkable
class StreamWithMetaStorageFormat(Protocol):
    """A stream whose elements point at variable-size payloads (for example concept lists).

    Attributes:
        stream_dtype: The dtype of one stream element (use explicit byte order).
    """

    stream_dtype: np.dtype

    def size(self, data: Any) -> int:
        """Return the number of stream elements ``data`` packs to."""
        ...

    def pack(self, data: Any) -> Generator[tuple[Hashable, bytes | None], None, np.ndarray]:
        """Yield one ``(key, payload | None)`` per element, then return the 1-D stream array.

        Consecutive equal keys share one stored payload, so only the first element of a run needs
        one (later payloads of the run are ignored). A key may not reappear after another key within
        one record.
        """
        ...

    def unpack(
        self,
        stream_data: np.ndarray,
        document_shard: np.ndarray,
        document_index: np.ndarray,
        document_data: list[bytes],
    ) -> Any:
        """Return the sample for a read window.

        Args:
            stream_data: The window, a 1-D array of ``stream_dtype``.
            document_shard: The shard of each entry of ``document_data``.
            document_index: For each element of the window, the index of its payload in
                ``document_data``.
            document_data: The payloads this window needs, in stream order.
        """
        ...


class FileReader(ABC):
    """One open file supporting positional reads. Implementations must be thread-safe."""

    @abstractmethod
    def size(self) -> int:
        """Return the file size in bytes."""

    @abstractmethod
    def readinto(self, offset: int, buffer: Any) -> None:
        """Fill the whole writable, C-contiguous ``buffer`` with the bytes at ``offset``.

        Raises:
            EOFError: The file ends before the buffer is full.
        """

    def read(self, offset: int, nbytes: int) -> bytes:
        """Return ``nbytes`` bytes at ``offset``."""
        buffer = bytearray(nbytes)
        if nbytes:
            self.readinto(offset, buffer)
        return bytes(buffer)

    async def areadinto(self, offset: int, buffer: Any) -> None:
        """Asynchronous :meth:`readinto`; by default runs it in a worker thread."""
        await asyncio.to_thread(self.readinto, offset, buffer)

    @abstractmethod
    def close(self) -> None:
        """Release the file."""

    def __enter__(self) -> FileReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ReadInterface(ABC):
    """Opens files for :class:`FileReader` access. Instances must be picklable."""

    @classmethod
    def is_supported(cls) -> bool:
        """Return whether this interface works on this platform."""
        return True

    @abstractmethod
    def open(self, path: str | os.PathLike[str]) -> FileReader:
        """Open ``path`` for reading."""
