"""Shared pieces of the three storages: the storage handle and the shard writer session."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Generic, TypeGuard, TypeVar

import numpy as np

from guideloom.runtime.flush import fsync_all
from guideloom.storage.copying import ShardFiles, ShardSource, list_shards
from guideloom.storage.io import resolve_read_interface
from guideloom.storage.shards import (
    ShardFileWriter,
    check_shard_number,
    fsync_directory,
    mark_empty,
)

S = TypeVar("S", bound="ShardState")
#: The storage format type of a storage.
F = TypeVar("F")


def is_url(location: Any) -> TypeGuard[str]:
    """Return whether ``location`` is a URL string (``scheme://...``) rather than a local path."""
    return isinstance(location, str) and "://" in location


class BaseStorage(Generic[F]):
    """A directory of shards, a format and a read interface. Cheap to create and to pickle.

    ``directory`` is a local path, or a URL (kept as a string) for a remote read interface such
    as :class:`guideloom.storage.http.HTTPIO`; remote storages are read-only.
    """

    def __init__(
        self,
        storage_dir: str | os.PathLike[str] | None,
        storage_format: F | None,
        read_interface: Any = None,
        *,
        directory: str | os.PathLike[str] | None = None,
    ) -> None:
        location = storage_dir if directory is None else directory
        if location is None or (storage_dir is not None and directory is not None):
            raise TypeError(
                f"{type(self).__name__}() takes one storage directory: "
                f"{type(self).__name__}(storage_dir, storage_format)"
            )
        if storage_format is None:
            raise TypeError(f"{type(self).__name__}() needs a storage_format")
        self.directory: Any = location.rstrip("/") if is_url(location) else Path(location)
        self.format: F = storage_format
        self.read_interface = resolve_read_interface(read_interface)

    @property
    def storage_dir(self) -> Any:
        """The storage directory (GuideLoom 1.1's name for :attr:`directory`)."""
        return self.directory

    @property
    def storage_format(self) -> F:
        """The storage format (GuideLoom 1.1's name for :attr:`format`)."""
        return self.format

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({str(self.directory)!r}, {self.format!r}, "
            f"read_interface={self.read_interface!r})"
        )


class ShardState:
    """What a writer keeps about one shard it is writing."""

    def __init__(self, file: ShardFileWriter) -> None:
        self.file = file
        self.records = 0


class BaseWriter(Generic[S]):
    """A writing session: each shard it appends to is rewritten and committed on close.

    Use it as a context manager. On a clean exit every shard it touched is atomically renamed into
    place (replacing an older version); if the block raises, nothing is committed. Only the files of
    the shards passed to :meth:`append` are touched, so processes may write distinct shards of one
    directory at once; two writers must never write the same shard concurrently.
    """

    #: The storage kind written in shard footers (and in the empty-storage marker).
    kind = ""
    #: The sections every shard of the kind has.
    sections: tuple[str, ...] = ()

    def __init__(self, storage: Any) -> None:
        if is_url(storage.directory):
            raise ValueError(
                f"cannot write to {storage.directory}: remote storages are read-only; write the "
                "shards to a local directory and publish that directory"
            )
        self._storage = storage
        self._shards: dict[int, S] = {}
        self._closed = False

    def _new_state(self, file: ShardFileWriter) -> S:  # pragma: no cover - abstract
        raise NotImplementedError

    def _finish(self, state: S) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def element_dtype(self) -> np.dtype | None:
        """The dtype of the shards' elements (``None``: documents have none)."""
        return None

    def published_shards(self, directory: str | os.PathLike[str]) -> ShardFiles:
        """The shards of the published storage at ``directory`` (of this writer's class and
        format), validated, to copy records from (:meth:`copy_records`)."""
        other = type(self._storage)(directory, self._storage.format,
                                    self._storage.read_interface)
        return list_shards(other, self.kind, self.element_dtype(), self.sections)

    def copy_records(self, shard: int, source: ShardSource, first: int,
                     count: int) -> list[int]:  # pragma: no cover - abstract
        """Append records ``first .. first+count-1`` of the published shard ``source`` (of
        :meth:`published_shards`) to ``shard`` as the bytes they are there, without the
        format; return each record's element count."""
        raise NotImplementedError

    def _state(self, shard: Any) -> S:
        if self._closed:
            raise RuntimeError("this writer is closed")
        number = check_shard_number(shard)
        state = self._shards.get(number)
        if state is None:
            state = self._new_state(ShardFileWriter(self._storage.directory, number))
            self._shards[number] = state
        return state

    def create(self, shard: int) -> None:
        """Start ``shard`` so it is committed (replacing an older one) even if nothing is appended.

        An export task with no data calls this so the shard numbering has no gap.
        """
        self._state(shard)

    def open(self) -> None:
        """Start the session (GuideLoom 1.1 calls this; ``with`` does not need it)."""
        if self._closed:
            raise RuntimeError("this writer is closed")
        Path(self._storage.directory).mkdir(parents=True, exist_ok=True)

    def length(self, shard: int) -> int:
        """Elements (records for documents) appended to ``shard`` in this session.

        Raises:
            KeyError: Nothing was appended to ``shard`` by this writer (as in GuideLoom 1.1).
        """
        number = check_shard_number(shard)
        if number not in self._shards:
            raise KeyError(shard)
        return self.elements(number)

    def elements(self, shard: int) -> int:
        """Elements appended to ``shard`` so far through this writer (records for documents)."""
        state = self._shards.get(check_shard_number(shard))
        if state is None:
            return 0
        return int(getattr(state, "elements", state.records))

    @property
    def shards(self) -> list[int]:
        """The shard numbers this writer has appended to."""
        return sorted(self._shards)

    def close(self) -> None:
        """Commit every shard written by this writer."""
        if self._closed:
            return
        self._closed = True
        if not self._shards:
            mark_empty(self._storage.directory, self.kind)
        # a group commit: every shard is sealed (all its bytes in the file), then all are
        # fsynced at once (one journal commit: runtime/flush.py), then each is renamed, then
        # the directory is fsynced once; a shard is renamed only after its own fsync returned
        states = list(self._shards.values())
        try:
            for state in states:
                state.file.deferred = True
                self._finish(state)
            errors = fsync_all([state.file.fileno() for state in states])
            for state, error in zip(states, errors, strict=True):
                if error is not None:
                    raise type(error)(error.errno, f"cannot flush {state.file.temp_path}: "
                                                   f"{error.strerror or error}") from error
            while states:
                states[0].file.publish(synced=True)
                states.pop(0)
            if self._shards:
                fsync_directory(Path(self._storage.directory))
        finally:
            for state in states:
                state.file.abort()

    def abort(self) -> None:
        """Discard everything this writer wrote; existing shards stay as they were."""
        if self._closed:
            return
        self._closed = True
        for state in self._shards.values():
            state.file.abort()

    def __enter__(self) -> BaseWriter[S]:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()
