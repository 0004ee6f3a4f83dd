"""Sample sources: the small protocol the loader reads batches through.

A source has a length and fetches many samples at once::

    class SampleSource(Protocol):
        def __len__(self) -> int: ...
        def fetch(self, indices: np.ndarray) -> list | dict: ...

``fetch`` receives the sample indices of one batch in delivery order and returns whatever the
``collate_fn`` expects: a list of samples (storages) or a dict of stacked arrays (exports).
Sources are called from several worker threads at once and must be safe for that; with
``parallel_method="process"`` they are pickled to the worker processes.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import Any, Protocol, runtime_checkable

import numpy as np

from guideloom.loader.generations import ExportIdentity, sim_ids_digest

__all__ = ["ExportSource", "ExportWindows", "ReaderSource", "SampleSource"]


@runtime_checkable
class SampleSource(Protocol):
    """What :class:`~guideloom.loader.StatefulDataLoader` reads from."""

    def __len__(self) -> int: ...

    def fetch(self, indices: np.ndarray) -> Any: ...


class ReaderSource:
    """Serve a dataset that opens readers with ``dataset.sync_reader()``.

    Each concurrent fetch borrows one reader from a small pool, so worker threads never share
    a reader; readers are opened on demand and closed by :meth:`close`.

    Args:
        dataset: A :class:`~guideloom.StreamDataset`, :class:`~guideloom.DocumentDataset` or
            anything whose ``sync_reader()`` gives a sequence of samples (``len`` and ``[i]``;
            ``get_many(indices)`` is used when it has one). A context manager is entered, a
            reader with ``open()``/``close()`` is opened (GuideLoom 1.1's readers).
    """

    def __init__(self, dataset: Any) -> None:
        self.dataset = dataset
        self._lock = threading.Lock()
        self._idle: list[Any] = []
        self._stacks: list[contextlib.ExitStack] = []
        reader = self._acquire()
        try:
            self._len = len(reader)
        finally:
            self._release(reader)

    def _acquire(self) -> Any:
        with self._lock:
            if self._idle:
                return self._idle.pop()
            stack = contextlib.ExitStack()
            self._stacks.append(stack)
        reader = self.dataset.sync_reader()
        if hasattr(reader, "__enter__"):
            return stack.enter_context(reader)
        if hasattr(reader, "open"):  # a GuideLoom 1.1 style reader opened by hand
            reader.open()
            stack.callback(reader.close)
        return reader

    def _release(self, reader: Any) -> None:
        with self._lock:
            self._idle.append(reader)

    def __len__(self) -> int:
        return self._len

    def export_identity(self) -> ExportIdentity | None:
        """The export generation the dataset belongs to, when it says
        (:class:`ExportWindows`)."""
        get = getattr(self.dataset, "export_identity", None)
        return get() if callable(get) else None

    def fetch(self, indices: np.ndarray) -> list[Any]:
        """Read the samples at ``indices`` (in that order) with one ``get_many`` call."""
        reader = self._acquire()
        try:
            if hasattr(reader, "get_many"):
                return list(reader.get_many(indices))
            return [reader[int(i)] for i in indices]  # any sequence of samples
        finally:
            self._release(reader)

    def close(self) -> None:
        """Close every reader this source opened."""
        with self._lock:
            stacks, self._stacks, self._idle = self._stacks, [], []
        for stack in stacks:
            stack.close()

    def __getstate__(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "_len": self._len}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.dataset = state["dataset"]
        self._len = state["_len"]
        self._lock = threading.Lock()
        self._idle = []
        self._stacks = []


class ExportWindows:
    """A stream storage export's dataset of windows (``from_export(..., sequence_length=)``),
    with the generation of the export it reads: a loader state records it, and refuses it on
    another generation (:mod:`guideloom.loader.generations`).

    Args:
        dataset: The storage's :class:`~guideloom.StreamDataset`.
        identity: The export's generation (``sim_ids`` ``None``: the samples are windows).
    """

    def __init__(self, dataset: Any, identity: ExportIdentity) -> None:
        self.dataset = dataset
        self.identity = identity

    def sync_reader(self) -> Any:
        """The dataset's reader."""
        return self.dataset.sync_reader()

    def export_identity(self) -> ExportIdentity:
        """The export generation the windows are read from."""
        return self.identity


def _refs(arrays: list[np.ndarray], k: int) -> int:
    return sys.getrefcount(arrays[k])


class BatchBuffers:
    """Arrays of earlier batches, filled again for a new batch once nothing but this pool
    refers to them.

    A batch handed to training is usually dropped a step or two later; a fresh array for
    the next one costs its page faults (a 256-row batch of 8 MB: about as much CPU as copying
    its rows, as the memory of a batch still held cannot be reused by the allocator). An
    array here is reused only when its reference count says the pool holds the only
    reference: a batch, a tensor made from it (``torch.from_numpy`` refers to the array), or
    any view of it (a view refers to the array that owns the memory) keeps it from reuse.
    The count is compared with one taken the same way of an array only the pool holds
    (measured once, so it does not depend on how an interpreter counts); without
    ``sys.getrefcount`` nothing is reused. At most :data:`KEEP` arrays per shape and dtype
    are kept.
    """

    KEEP = 16

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._arrays: dict[tuple[tuple[int, ...], np.dtype], list[np.ndarray]] = {}
        probe = [np.empty(0)]
        self._alone = _refs(probe, 0) if hasattr(sys, "getrefcount") else -1

    def take(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
        """An array of ``shape`` and ``dtype`` no one else refers to (contents undefined)."""
        with self._lock:
            arrays = self._arrays.setdefault((shape, dtype), [])
            for k in range(len(arrays)):
                if _refs(arrays, k) == self._alone:
                    return arrays[k]  # referenced by the caller before the lock is let go
            fresh = np.empty(shape, dtype)
            if self._alone > 0 and len(arrays) < self.KEEP:
                arrays.append(fresh)
            return fresh


class ExportSource:
    """Serve a :func:`guideloom.reader.load_export` reader: one vectorised read per batch
    (of an npy export: into arrays of earlier batches that nothing refers to any more,
    :class:`BatchBuffers`)."""

    def __init__(self, export: Any) -> None:
        self.export = export
        self._identity: ExportIdentity | None = None
        self._buffers = BatchBuffers()

    def export_identity(self) -> ExportIdentity | None:
        """The generation served, for the loader's state (``None`` for an export without
        ``sim_ids``, e.g. an rddac export); computed once."""
        if self._identity is None:
            sim_ids = getattr(self.export, "sim_ids", None)
            if sim_ids is None:
                return None
            ids = np.asarray(sim_ids).tolist()
            self._identity = ExportIdentity(
                root=str(getattr(self.export, "root", "the export")),
                generation=getattr(self.export, "generation", None),
                export_id=getattr(self.export, "export_id", None),
                sim_ids=ids, digest=sim_ids_digest(ids))
        return self._identity

    def __getstate__(self) -> dict[str, Any]:
        return {"export": self.export, "_identity": None}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._buffers = BatchBuffers()

    def __len__(self) -> int:
        return len(self.export)

    def fetch(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        """Return ``export.batch(indices)``: a dict of arrays stacked in ``indices`` order
        (the same rows, in arrays this source may have handed out before)."""
        mapped = getattr(self.export, "_mapped_fields", None)
        fields = None if mapped is None else mapped()
        if not fields:
            return self.export.batch(indices)
        idx = self.export._checked(indices)  # in range: "wrap" below changes nothing
        batch = {}
        for name, rows in fields:
            out = self._buffers.take((len(idx), *rows.shape[1:]), rows.dtype)
            batch[name] = np.take(rows, idx, axis=0, out=out, mode="wrap")
        return batch

    def close(self) -> None:
        """Nothing to release (the export's memory maps close with it)."""
