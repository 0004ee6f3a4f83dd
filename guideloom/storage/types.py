"""Protocols for GuideLoom storage formats and the abstract file-reader interfaces.

A *format* turns user records into what a storage writes and turns what a read returns back into
samples. A *read interface* opens shard files for positional reads; :mod:`guideloom.storage.io`
has three (seek, mmap, pread) and a user can add another (for example HTTP range reads) by
subclassing :class:`ReadInterface` and :class:`FileReader`.
"""

from __future__ import annotations

import asyncio
import functools
import os
import sys
from abc import ABC, abstractmethod
from collections.abc import Generator, Hashable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, Union, runtime_checkable

import numpy as np

# PEP 696 defaults (``DocumentStorageFormat[MyDoc]`` means in = out = MyDoc) are in typing from
# Python 3.13; before, typing_extensions has them (a dependency there, see pyproject.toml).
if sys.version_info >= (3, 13):
    from typing import TypeVar
else:
    from typing_extensions import TypeVar

__all__ = [
    "DocumentStorageFormat",
    "FileReader",
    "InDataT",
    "OutDataT",
    "ReadInterface",
    "SampleT",
    "StorageFormat",
    "StreamDType",
    "StreamStorageFormat",
    "StreamWithMetaStorageFormat",
]

#: What a writer's ``append`` takes (the record type).
InDataT = TypeVar("InDataT", default=Any)
#: What a reader returns (the sample type); defaults to ``InDataT``.
OutDataT = TypeVar("OutDataT", default=InDataT)
#: The NumPy scalar type of one stream element (GuideLoom 1.1's third type parameter).
StreamDType = TypeVar("StreamDType", default=Any)
#: The sample type of a reader or dataset (its one type parameter).
SampleT = TypeVar("SampleT", default=Any)

# The protocols' own type variables carry the variance their methods imply (records go in,
# samples come out), so a format for a wider record type or a narrower sample type still
# matches; the storages keep the invariant ones above.
_InContraT = TypeVar("_InContraT", contravariant=True, default=Any)
_StreamDTypeCoT = TypeVar("_StreamDTypeCoT", covariant=True, default=Any)
if TYPE_CHECKING:
    _OutCoT = TypeVar("_OutCoT", covariant=True, default=_InContraT)
else:
    # at run time the default stays the public InDataT, so ``DocumentStorageFormat[MyDoc]``
    # reads ``(MyDoc, ~InDataT)`` as before (tests/test_storage_types_pythons.py)
    _OutCoT = TypeVar("_OutCoT", covariant=True, default=InDataT)


@runtime_checkable
class StreamStorageFormat(Protocol[_InContraT, _OutCoT, _StreamDTypeCoT]):
    """Encodes records as 1-D arrays of ``stream_dtype`` and decodes read windows.

    Generic in the record type, the sample type and the element type, as in GuideLoom 1.1:
    ``class TokenFormat(StreamStorageFormat[dict, dict, np.int32])``; one argument sets both
    record and sample type, and the element type may be left out.

    Attributes:
        stream_dtype: The dtype of one stream element (use explicit byte order).
    """

    stream_dtype: np.dtype

    def __init__(self, stream_dtype: Any = None) -> None:
        """Set :attr:`stream_dtype` (1.1's subclasses call ``super().__init__(dtype)``).

        Without an argument a class attribute ``stream_dtype`` is kept.
        """
        if stream_dtype is not None:
            self.stream_dtype = np.dtype(stream_dtype)

    def pack(self, data: _InContraT) -> np.ndarray:
        """Return ``data`` as a 1-D array of ``stream_dtype``."""
        ...

    def unpack(
        self, stream: np.ndarray, shard_lengths: np.ndarray, shards: np.ndarray
    ) -> _OutCoT:
        """Return the sample for a read window.

        Args:
            stream: The window, a fresh 1-D array of ``stream_dtype`` the format may keep.
            shard_lengths: Element count of each consecutive shard segment of the window.
            shards: The shard number of each segment.
        """
        ...


@runtime_checkable
class DocumentStorageFormat(Protocol[_InContraT, _OutCoT]):
    """Encodes each record whole as bytes.

    Generic in the document type: ``class MyDocs(DocumentStorageFormat[MyDoc])`` (GuideLoom 1.1
    spells both types, ``DocumentStorageFormat[MyDoc, MyDoc]``; that works too). A type checker
    then sees ``reader.read(i)`` of a ``DocumentStorage(directory, MyDocs())`` as ``MyDoc``.
    """

    def pack(self, data: _InContraT) -> bytes:
        """Return the encoded record."""
        ...

    def unpack(self, encoded_data: bytes, shard: int) -> _OutCoT:
        """Return the record decoded from ``encoded_data``, stored in shard ``shard``."""
        ...


@runtime_checkable
class StreamWithMetaStorageFormat(Protocol[_InContraT, _OutCoT, _StreamDTypeCoT]):
    """A stream whose elements point at variable-size payloads (for example concept lists).

    Generic in the record type, the sample type and the element type:
    ``StreamWithMetaStorageFormat[MyMeta]`` (one type for both) or
    ``StreamWithMetaStorageFormat[MyRecord, MyWindow, np.int32]``.

    Attributes:
        stream_dtype: The dtype of one stream element (use explicit byte order).
    """

    stream_dtype: np.dtype

    def __init__(self, stream_dtype: Any = None) -> None:
        """Set :attr:`stream_dtype` (1.1's subclasses call ``super().__init__(dtype)``).

        Without an argument a class attribute ``stream_dtype`` is kept.
        """
        if stream_dtype is not None:
            self.stream_dtype = np.dtype(stream_dtype)

    def size(self, data: _InContraT) -> int:
        """Return the number of stream elements ``data`` packs to."""
        ...

    def pack(self, data: _InContraT) -> Generator[tuple[Hashable, bytes | None], None, np.ndarray]:
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
    ) -> _OutCoT:
        """Return the sample for a read window.

        Args:
            stream_data: The window, a 1-D array of ``stream_dtype``.
            document_shard: The shard of each entry of ``document_data``.
            document_index: For each element of the window, the index of its payload in
                ``document_data``.
            document_data: The payloads this window needs, in stream order.
        """
        ...


#: Any of the three format protocols (GuideLoom 1.1's ``StorageFormat[InT, OutT]``, importable
#: as ``guideloom.types.StorageFormat``).
StorageFormat = Union[  # noqa: UP007 - a runtime alias
    StreamWithMetaStorageFormat[Any, Any, Any],
    StreamStorageFormat[Any, Any, Any],
    DocumentStorageFormat[Any, Any],
]


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

    def list_names(self, directory: Any) -> list[str]:
        """Return the names of the files in ``directory`` (local directories by default).

        Raises:
            FileNotFoundError: ``directory`` does not exist.
        """
        directory = Path(directory)
        if not directory.is_dir():
            raise FileNotFoundError(f"storage directory {directory} does not exist")
        return [entry.name for entry in os.scandir(directory)]

    def join(self, directory: Any, name: str) -> Any:
        """Return the location of file ``name`` in ``directory`` (what :meth:`open` takes)."""
        return Path(directory) / name

    def sync_reader(self) -> Any:
        """Return the constructor of a GuideLoom 1.1 style reader of one file.

        ``make = io.sync_reader(); r = make(path); r.open(); r.read(offset, size); r.close()``;
        see :class:`guideloom.types.IOSyncReaderAbstract`.
        """
        from guideloom.storage.file_compat import SyncFile

        return functools.partial(SyncFile, self)

    def async_reader(self) -> Any:
        """Return the constructor of a GuideLoom 1.1 style asyncio reader of one file."""
        from guideloom.storage.file_compat import AsyncFile

        return functools.partial(AsyncFile, self)
