"""Storages reading through a file backend written for GuideLoom 1.1.

:class:`LegacyReadInterface` wraps a subclass of :class:`guideloom.types.IOReaderAbstract` (its
``sync_reader()`` factory of per-file readers) as a guideloom read interface.
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Callable
from typing import Any

from guideloom.storage.abstract import IOReaderAbstract
from guideloom.storage.types import FileReader, ReadInterface

__all__ = ["LegacyReadInterface"]


class _LegacyFile(FileReader):
    """A guideloom :class:`FileReader` over an opened GuideLoom 1.1 style sync reader."""

    def __init__(self, reader: Any, path: Any) -> None:
        self._reader = reader
        self._path = path
        self._size = int(reader.filesize())

    def size(self) -> int:
        return self._size

    def readinto(self, offset: int, buffer: Any) -> None:
        view = memoryview(buffer).cast("B")
        try:
            data = self._reader.read(offset, len(view))
        except IndexError as error:
            raise EOFError(f"{self._path}: {error}") from None
        if len(data) != len(view):
            raise EOFError(f"{self._path}: wanted {len(view)} bytes at {offset}, got {len(data)}")
        view[:] = memoryview(data).cast("B")

    def close(self) -> None:
        self._reader.close()


class LegacyReadInterface(ReadInterface):
    """Reads shard files through a GuideLoom 1.1 backend (an ``IOReaderAbstract``).

    Shard files are found by listing a local directory, or (for a path the backend defines,
    such as a remote ``PurePath``) by opening ``shard-000000.gls``, ``shard-000001.gls``, ...
    until one does not exist.
    """

    def __init__(self, backend: IOReaderAbstract) -> None:
        self.backend = backend
        # called with what ``join`` returns (the backend's own path type), passed on unchanged
        self._make: Callable[[Any], Any] = backend.sync_reader()

    def is_supported(self) -> bool:  # type: ignore[override]
        """Return what the backend says."""
        return bool(type(self.backend).is_supported())

    def open(self, path: str | os.PathLike[str]) -> FileReader:
        """Open ``path`` with the backend's sync reader."""
        reader = self._make(path)
        reader.open()
        try:
            return _LegacyFile(reader, path)
        except BaseException:
            reader.close()
            raise

    def join(self, directory: Any, name: str) -> Any:
        """Return ``directory / name`` (keeping the backend's path type)."""
        if not isinstance(directory, pathlib.PurePath):
            directory = pathlib.Path(directory)
        return directory / name

    def list_names(self, directory: Any) -> list[str]:
        """Return the shard file names under ``directory``."""
        if isinstance(directory, pathlib.Path):
            return super().list_names(directory)
        from guideloom.storage.shards import shard_name

        names: list[str] = []
        while True:
            name = shard_name(len(names))
            try:
                self.open(self.join(directory, name)).close()
            except FileNotFoundError:
                return names
            names.append(name)

    def __repr__(self) -> str:
        return f"LegacyReadInterface({self.backend!r})"
