"""``load_export``: one light, memory-mapped reader for every export kind.

The returned :class:`Export` follows the map-style dataset protocol (``len`` and ``[i]``), so it
plugs into ``torch.utils.data.DataLoader``, a JAX or TensorFlow input pipeline, or a plain loop.
It never imports torch, and it pickles without its open files (they reopen lazily in the
receiving process), so DataLoader worker processes share the OS page cache.

Example:
    >>> export = guideloom.load_export("./data/tutorial_export")      # doctest: +SKIP
    >>> row = export[0]; batch = export.batch([3, 1, 4])              # doctest: +SKIP
    >>> export.by_sim_id(4500)["max_total_force"]                     # doctest: +SKIP
"""

from __future__ import annotations

import json
import numbers
import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from guideloom.errors import GuideloomError
from guideloom.export.staging import EXPORT_MANIFEST, STAGING_SUFFIX, Staging


class IncompleteExportError(GuideloomError, ValueError):
    """The directory is not a finished guideloom export."""


class Export:
    """A finished export: rows of ``{field: ndarray}`` in ``sim_ids`` order.

    Attributes:
        root: Where the export lives (path or URL).
        manifest: The contents of ``export.json``.
        kind: ``"npy"``, ``"npz"``, ``"zarr"`` or ``"storage"``.
    """

    def __init__(self, root: str, manifest: dict[str, Any], fields: Sequence[str] | None = None):
        self.root = root
        self.manifest = manifest
        self.kind: str = manifest["kind"]
        available = tuple(sorted(manifest["fields"]))
        if fields is None:
            chosen = available
        else:
            chosen = tuple(fields)
            unknown = [f for f in chosen if f not in available]
            if unknown:
                raise ValueError(
                    f"unknown field(s) {unknown} in export {root}; fields: {', '.join(available)}"
                )
        self._fields = chosen
        self._n = int(manifest["count"])
        self._backend: _Backend | None = None
        self._sim_ids: np.ndarray | None = None
        self._row_of: dict[Any, int] | None = None

    # --- protocol -------------------------------------------------------------------
    @property
    def fields(self) -> tuple[str, ...]:
        """The fields each row has, sorted."""
        return self._fields

    @property
    def sim_ids(self) -> np.ndarray:
        """Experiment id of each row."""
        if self._sim_ids is None:
            self._sim_ids = self._open().sim_ids()
        return self._sim_ids

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index: int | slice) -> dict[str, np.ndarray]:
        """``export[i]`` is one row; ``export[i:j]`` stacks rows like :meth:`batch`.

        A row of an npy export holds read-only views of the memory-mapped files (no copy);
        ``.copy()`` a field to change it.
        """
        if type(index) is int:  # the hot path: a plain int, checked once
            n = self._n
            if 0 <= index < n or -n <= index < 0:
                return (self._backend or self._open()).row(index % n, self._fields)
            raise IndexError(f"row {index} out of range for an export of {n} rows")
        if isinstance(index, slice):
            return self.batch(np.arange(len(self))[index])
        if isinstance(index, bool) or not isinstance(index, numbers.Integral):
            raise TypeError(f"export indices are integers or slices, not {type(index).__name__}")
        i = int(index)
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"row {index} out of range for an export of {n} rows")
        return self._open().row(i % n, self._fields)

    def __getitems__(self, indices: Sequence[int]) -> list[dict[str, np.ndarray]]:
        """Rows ``indices`` as a list; torch's DataLoader fetches its batches through this.

        For npy exports this is one vectorised read per field, and the rows are writable
        (views of that fresh copy), so collating them needs no further copy.
        """
        if self.kind != "npy":
            return [self[int(i)] for i in indices]
        stacked = self.batch(indices)
        return [{f: stacked[f][k, ...] for f in self._fields} for k in range(len(indices))]

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        for i in range(len(self)):
            yield self[i]

    def batch(self, indices: Sequence[int] | np.ndarray) -> dict[str, np.ndarray]:
        """Rows ``indices`` stacked per field, read with one vectorised read per field."""
        idx = np.asarray(indices)
        if idx.dtype == bool or (idx.size and idx.dtype.kind not in "iu"):
            raise TypeError("batch indices must be integers")
        idx = idx.astype(np.int64, copy=False).reshape(-1)
        n = len(self)
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise IndexError(f"batch indices out of range for an export of {n} rows")
        return self._open().batch(idx % max(n, 1), self._fields)

    def by_sim_id(self, sim_id: Any) -> dict[str, np.ndarray]:
        """The row of experiment ``sim_id`` (O(1) after the first call)."""
        row_of = self._row_of
        if row_of is None:
            row_of = self._row_of = dict(zip(self.sim_ids.tolist(), range(self._n), strict=True))
        i = row_of.get(sim_id)  # numpy ints and strs hash like their Python values
        if i is None:
            key = sim_id.item() if hasattr(sim_id, "item") else sim_id
            i = row_of.get(key)
            if i is None:
                raise KeyError(f"experiment {sim_id!r} is not in export {self.root}")
        return (self._backend or self._open()).row(i, self._fields)

    def __repr__(self) -> str:
        shapes = ", ".join(
            f"{f}: {tuple(s['shape']) if s['shape'] is not None else 'variable'} {s['dtype']}"
            for f, s in ((f, self.manifest["fields"][f]) for f in self._fields)
        )
        return (f"Export({self.root!r}, kind={self.kind!r}, view={self.manifest['view']!r}, "
                f"rows={len(self)}, fields={{{shapes}}})")

    # --- pickling: no open files travel --------------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_backend"] = None
        state["_row_of"] = None
        return state

    def _open(self) -> _Backend:
        if self._backend is None:
            if self.kind == "storage":
                import guideloom.export.storage_writer  # noqa: F401 - registers its backend
            backend_cls = _BACKENDS.get(self.kind)
            if backend_cls is None:
                raise IncompleteExportError(f"{self.root}: unknown export kind {self.kind!r}")
            self._backend = backend_cls(self.root, self.manifest)
        return self._backend


class _Backend:
    def __init__(self, root: str, manifest: dict[str, Any]):
        self.root, self.manifest = root, manifest

    def sim_ids(self) -> np.ndarray:
        return np.load(os.path.join(self.root, "sim_ids.npy"))

    def row(self, i: int, fields: Sequence[str]) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def batch(self, idx: np.ndarray, fields: Sequence[str]) -> dict[str, np.ndarray]:
        raise NotImplementedError


class _NpyBackend(_Backend):
    def __init__(self, root: str, manifest: dict[str, Any]):
        super().__init__(root, manifest)
        self._arrays: dict[str, np.ndarray] = {}
        self._pairs: dict[tuple[str, ...], tuple[tuple[str, np.ndarray], ...]] = {}

    def _array(self, field: str) -> np.ndarray:
        arr = self._arrays.get(field)
        if arr is None:
            # a plain ndarray over the map: indexing it skips np.memmap's Python-level hooks
            arr = self._arrays[field] = np.asarray(
                np.load(os.path.join(self.root, f"{field}.npy"), mmap_mode="r"))
        return arr

    def row(self, i: int, fields: Sequence[str]) -> dict[str, np.ndarray]:
        pairs = self._pairs.get(fields)  # type: ignore[arg-type] - Export passes a tuple
        if pairs is None:
            pairs = self._pairs[tuple(fields)] = tuple((f, self._array(f)) for f in fields)
        return {f: a[i, ...] for f, a in pairs}  # read-only views; 0-d arrays for scalars

    def batch(self, idx: np.ndarray, fields: Sequence[str]) -> dict[str, np.ndarray]:
        return {f: self._array(f)[idx] for f in fields}


class _NpzBackend(_Backend):
    def _load(self, i: int, fields: Sequence[str]) -> dict[str, np.ndarray]:
        sim_id = self.sim_ids_cached()[i]
        with np.load(os.path.join(self.root, f"{sim_id}.npz"), allow_pickle=False) as npz:
            return {f: npz[f] for f in fields}

    def sim_ids_cached(self) -> np.ndarray:
        if not hasattr(self, "_ids"):
            self._ids = self.sim_ids()
        return self._ids

    def row(self, i: int, fields: Sequence[str]) -> dict[str, np.ndarray]:
        return self._load(i, fields)

    def batch(self, idx: np.ndarray, fields: Sequence[str]) -> dict[str, np.ndarray]:
        rows = [self._load(int(i), fields) for i in idx]
        out = {}
        for f in fields:
            shapes = {r[f].shape for r in rows}
            if len(shapes) > 1:
                raise ValueError(f"field {f!r} has variable shapes {sorted(shapes)} in this "
                                 "npz export; read rows one by one with export[i]")
            out[f] = np.stack([r[f] for r in rows]) if rows else np.empty((0,))
        return out


class _ZarrBackend(_Backend):
    def __init__(self, root: str, manifest: dict[str, Any]):
        super().__init__(root, manifest)
        import zarr

        from guideloom.export.writers import zarr_store

        self._group = zarr.open_group(zarr_store(root), mode="r")

    def sim_ids(self) -> np.ndarray:
        return self._group["sim_ids"][...]

    def row(self, i: int, fields: Sequence[str]) -> dict[str, np.ndarray]:
        return {f: np.asarray(self._group[f][i]) for f in fields}

    def batch(self, idx: np.ndarray, fields: Sequence[str]) -> dict[str, np.ndarray]:
        unique, inverse = np.unique(idx, return_inverse=True)
        return {f: self._group[f].get_orthogonal_selection((unique,))[inverse] for f in fields}


_BACKENDS: dict[str, type[_Backend]] = {
    "npy": _NpyBackend,
    "npz": _NpzBackend,
    "zarr": _ZarrBackend,
}


def register_backend(kind: str, backend: type[_Backend]) -> None:
    """Let another module (e.g. storage exports) serve its kind through :class:`Export`."""
    _BACKENDS[kind] = backend


def read_export_manifest(root: str | os.PathLike[str]) -> tuple[str, dict[str, Any]]:
    """Return ``(root, export.json)`` or raise :class:`IncompleteExportError`."""
    staging = Staging.for_target(root)
    text = staging.url
    if not staging.fs.exists(staging.target):
        if staging.fs.exists(staging.root):
            raise IncompleteExportError(
                f"{text} is not published yet: its job is running or was interrupted "
                f"(staging area {staging.root}); rerun the export to resume it"
            )
        raise FileNotFoundError(f"no export at {text}")
    if staging.target.endswith(STAGING_SUFFIX):
        raise IncompleteExportError(f"{text} is the staging area of an unfinished export")
    try:
        with staging.fs.open(f"{staging.target}/{EXPORT_MANIFEST}", "rb") as fh:
            manifest = json.loads(fh.read())
    except FileNotFoundError:
        raise IncompleteExportError(
            f"{text} has no {EXPORT_MANIFEST}: not a complete guideloom export"
        ) from None
    except json.JSONDecodeError as exc:
        raise IncompleteExportError(f"{text}/{EXPORT_MANIFEST} is damaged ({exc})") from exc
    if manifest.get("format") != "guideloom-export":
        raise IncompleteExportError(f"{text}/{EXPORT_MANIFEST} is not a guideloom export manifest")
    root_text = staging.target if staging.is_local else text
    return root_text, manifest


def load_export(directory: str | os.PathLike[str], fields: Sequence[str] | None = None) -> Export:
    """Open a finished export (npy, npz, zarr or storage) for reading.

    Args:
        directory: The export directory, zarr store path, or fsspec URL.
        fields: Subset of fields to read (default: all).

    Raises:
        IncompleteExportError: Unfinished, damaged or foreign directory.
        ValueError: Unknown field names (the message lists the fields).
    """
    root, manifest = read_export_manifest(directory)
    return Export(root, manifest, fields)
