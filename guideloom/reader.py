"""``load_export``: one light, memory-mapped reader for every export kind.

It depends on the format readers (:mod:`guideloom.formats`) and the layout module only, never on
the executor, the staging area or Dask.

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

import numbers
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

from guideloom.errors import (
    CorruptExportError,
    IncompleteExportError,
    UntrustedExportError,
    UnverifiableExportError,
    UnverifiedExportWarning,
    warn,
)
from guideloom.formats import ExportFormat, FormatReader, get_format
from guideloom.formats.checksums import VerifyReport, verify_export
from guideloom.formats.generations import Pin
from guideloom.formats.layout import directory_identity, read_export_manifest, resolve_target
from guideloom.formats.manifest_types import ExportManifest
from guideloom.formats.rddac_layout import describe_rddac_export, is_rddac_export
from guideloom.formats.storage import needs_trust, untrusted_message


class Export:
    """A finished export: rows of ``{field: ndarray}`` in ``sim_ids`` order.

    Attributes:
        root: Where the export lives (path or URL).
        manifest: The contents of ``export.json`` (of an rddac export: the few keys
            :func:`~guideloom.formats.rddac_layout.describe_rddac_export` describes, with
            ``"unverified": True``).
        kind: ``"npy"``, ``"npz"``, ``"zarr"`` or ``"storage"``.
    """

    def __init__(self, root: str, manifest: ExportManifest, fields: Sequence[str] | None = None,
                 trust: bool = False, identity: tuple[int, int] | None = None):
        self.root = root
        self._trust = trust
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
        self._backend: FormatReader | None = None
        # the backend's (field, mapped array) pairs when its rows are views of them (npy):
        # export[i] indexes them here, with no call into the backend
        self._views: tuple[tuple[str, np.ndarray], ...] | None = None
        self._lazy = False  # the backend opens files per read: check the directory after each
        self._sim_ids: np.ndarray | None = None
        self._row_of: dict[Any, int] | None = None
        self._reopened = False
        self._identity = identity
        self._pin: Pin | None = None  # the directory held open (lazily read local exports)

    # --- lifetime -------------------------------------------------------------------
    def close(self) -> None:
        """Stop reading: release the files (and the directory of an npz or zarr export,
        which an update or overwrite that replaced it keeps until its last reader closes)."""
        self._backend = self._views = None
        pin, self._pin = self._pin, None
        if pin is not None:
            pin.close()

    def __enter__(self) -> Export:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- protocol -------------------------------------------------------------------
    @property
    def fields(self) -> tuple[str, ...]:
        """The fields each row has, sorted."""
        return self._fields

    @property
    def directory(self) -> Path | str:
        """Where the export lives, as a ``Path`` when local (rddac's name for :attr:`root`)."""
        return self.root if "://" in self.root else Path(self.root)

    @property
    def generation(self) -> int | None:
        """Which generation of the export this reader reads: the number of ``export.json``'s
        last ``generations`` entry (1 for a full export, one more for each update), ``None``
        for an export written without generations. With :attr:`export_id` it is what a
        loader state records (``docs/updating.md``)."""
        generations = self.manifest.get("generations") or []
        return int(generations[-1]["generation"]) if generations else None

    @property
    def export_id(self) -> str | None:
        """The id of the published export read (a new one for each generation)."""
        return self.manifest.get("export_id")

    @property
    def sim_ids(self) -> np.ndarray:
        """Experiment id of each row."""
        if self._sim_ids is None:
            self._open()
        assert self._sim_ids is not None
        return self._sim_ids

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, index: int | slice) -> dict[str, np.ndarray]:
        """``export[i]`` is one row; ``export[i:j]`` stacks rows like :meth:`batch`.

        A row of an npy export holds read-only views of the memory-mapped files (no copy);
        ``.copy()`` a field to change it.
        """
        views = self._views
        if views is not None and type(index) is int:  # the hot path: views of the maps
            key, row = (index, ...), {}  # one key for every field; a loop, no comprehension
            try:  # (a comprehension's call and a key per field were 30% of a row's cost)
                for f, a in views:
                    row[f] = a[key]  # the arrays hold just the rows
                return row
            except IndexError:
                pass  # out of range: said below in the export's words
        if type(index) is int:
            n = self._n
            if 0 <= index < n or -n <= index < 0:
                if self._lazy:
                    return self._read("row", index % n, self._fields)
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
        return self._read("row", i % n, self._fields)

    def __getitems__(self, indices: Sequence[int]) -> list[dict[str, np.ndarray]]:
        """Rows ``indices`` as a list; torch's DataLoader fetches its batches through this.

        Formats that read batches vectorised (npy) return writable rows of one fresh batch, so
        collating them needs no further copy.
        """
        return self._read("rows", self._checked(indices), self._fields)

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        for i in range(len(self)):
            yield self[i]

    def batch(self, indices: Sequence[int] | np.ndarray) -> dict[str, np.ndarray]:
        """Rows ``indices`` stacked per field, read with one vectorised read per field."""
        return self._read("batch", self._checked(indices), self._fields)

    def _mapped_fields(self) -> tuple[tuple[str, np.ndarray], ...] | None:
        """The ``(field, array)`` pairs whose rows :meth:`batch` copies (the mapped files of an
        npy export, cut to its rows), or ``None`` for a format read per call. The loader
        copies a batch's rows into arrays it reuses (:mod:`guideloom.loader.sample_sources`)."""
        if self._backend is None:
            self._open()
        return self._views

    def _checked(self, indices: Sequence[int] | np.ndarray) -> np.ndarray:
        """Integer row numbers in range, negatives counted from the end (like a list)."""
        idx = np.asarray(indices)
        if idx.dtype == bool or (idx.size and idx.dtype.kind not in "iu"):
            raise TypeError("batch indices must be integers")
        idx = idx.astype(np.int64, copy=False).reshape(-1)
        n = len(self)
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise IndexError(f"batch indices out of range for an export of {n} rows")
        return idx % max(n, 1)

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
        views = self._views
        if views is not None:  # views of the maps, as export[i]
            key, row = (i, ...), {}
            for f, a in views:
                row[f] = a[key]
            return row
        return self._read("row", i, self._fields)

    def verify(self) -> VerifyReport:
        """Read the whole export and compare it with the checksums recorded at write time.

        Runs the open-time checks again, then recomputes the xxh3_64 checksum of every row
        (npy, zarr: over the decoded row), experiment file (npz) or shard (storage), streaming
        with bounded memory. Costs one full read of the export.

        Returns:
            What was checked: rows, files, bytes and seconds (``report.line()`` says it).

        Raises:
            CorruptExportError: Naming the file, the first row that differs (with its sim id)
                and both checksums; or the directory was replaced since this Export was opened.
            UnverifiableExportError: The export records no checksums (written by an earlier
                guideloom, or with them turned off): nothing beyond the open-time checks can
                be verified; export it again to make it verifiable.
        """
        if self.manifest.get("unverified"):
            raise UnverifiableExportError(
                f"{self.root} has no export.json (written by rddac/ddacs): no checksums to "
                "verify against; export it again with guideloom to make it verifiable")
        root, now = read_export_manifest(self.root)
        if now.get("export_id") != self.manifest.get("export_id"):
            raise _replaced(self.root)
        fmt = kind_of(root, now)
        fmt.check_published(root, now)
        return verify_export(root, now, fmt, fmt.open_reader(root, now).sim_ids())

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
        state["_backend"] = state["_views"] = None  # the maps are reopened, not pickled
        state["_row_of"] = None
        state["_reopened"] = True
        state["_pin"] = None  # a pin is this process's: the copy opens the path again
        return state

    def _open(self) -> FormatReader:
        """The format reader, made on first use; its files are checked to be this export's.

        The directory's identity is compared after the reader opened its files (npy maps
        them all), so the rows it serves belong to the manifest this Export holds.
        """
        if self._backend is None:
            if self._reopened and self.manifest.get("unverified"):  # an rddac export
                self._reopened = False
            if self._reopened:  # unpickled elsewhere: the directory must still be this export
                identity = directory_identity(self.root)
                _, now = read_export_manifest(self.root)
                if now.get("export_id") != self.manifest.get("export_id"):
                    raise _replaced(self.root)
                self._identity, self._reopened = identity, False
            fmt = kind_of(self.root, self.manifest)
            if self._pin is None and self._identity is not None:
                self._pin = _pinned(self.root, self._identity)
            where = self.root if self._pin is None else self._pin.path  # this generation's
            backend = fmt.open_reader(where, self.manifest, trust=self._trust)
            sim_ids = backend.sim_ids() if self._sim_ids is None else self._sim_ids
            self._check_unchanged()
            self._backend, self._sim_ids, self._lazy = backend, sim_ids, backend.reads_lazily
            views = None if self._lazy else backend.row_views(self._fields)
            self._views = views or None  # no fields: the checked path
        return self._backend

    def _check_unchanged(self) -> None:
        """Raise :class:`CorruptExportError` if the directory is no longer the one opened
        (a pinned one is read through its handle: replacing the path changes nothing)."""
        if self._pin is not None:
            if self._pin.removed():  # retired, then removed (keep_retired): no rows of it
                self._backend = self._views = None
                raise _retired(self.root, self.manifest)
            return
        if self._identity is not None and directory_identity(self.root) != self._identity:
            self._backend = self._views = None
            raise _replaced(self.root)

    def _read(self, method: str, *args: Any) -> Any:
        """Call the backend's ``method``; for a backend that opens files per read, check
        afterwards (also when it failed) that they were this export's."""
        backend = self._backend or self._open()
        if not self._lazy:
            return getattr(backend, method)(*args)
        try:
            value = getattr(backend, method)(*args)
        except Exception as exc:
            self._check_unchanged()  # a file of the old export missing: say it was replaced
            pin = self._pin
            if pin is not None and pin.path in str(exc):  # name the export, not the handle
                if isinstance(exc, CorruptExportError):
                    raise CorruptExportError(str(exc).replace(pin.path, self.root)) from exc
                if isinstance(exc, OSError) and exc.filename is not None:
                    raise type(exc)(exc.errno, exc.strerror, str(exc.filename).replace(
                        pin.path, self.root)) from exc
            raise
        self._check_unchanged()
        return value


def _pinned(root: str, identity: tuple[int, int]) -> Pin | None:
    """A pin of the local export directory ``root`` while it is still the directory of
    ``identity`` (else ``None``: the check after each read says it was replaced)."""
    if "://" in root:
        return None
    pin = Pin.of(root)
    if pin is not None and pin.identity() != identity:
        pin.close()
        return None
    return pin


def _retired(root: str, manifest: Mapping[str, Any]) -> CorruptExportError:
    from guideloom import config

    return CorruptExportError(
        f"{root}: the generation this Export opened (export_id {manifest.get('export_id')}) "
        "was replaced by an update or overwrite, retired and then removed (at most "
        f"keep_retired={config.get('keep_retired')} replaced generations are kept for their "
        "readers); open the export again with load_export")


def _replaced(root: str) -> CorruptExportError:
    return CorruptExportError(f"{root} was replaced by another export since this Export was "
                              "opened; open it again with load_export")


def load_export(directory: str | os.PathLike[str], fields: Sequence[str] | None = None, *,
                trust: bool = False) -> Export:
    """Open a finished export (npy, npz, zarr or storage) for reading.

    A directory that rddac 2.0 / ddacs 3.2 ``export_to_numpy`` wrote (``sim_ids.npy`` and one
    ``.npy`` per field, no ``export.json``) opens too, read-only and with an
    :class:`~guideloom.errors.UnverifiedExportWarning`: its shapes and row counts are checked,
    but it records no checksums (:meth:`Export.verify` raises ``UnverifiableExportError``).

    Args:
        directory: The export directory, zarr store path, or fsspec URL.
        fields: Subset of fields to read (default: all).
        trust: Needed for an export whose rows are pickled (a storage export with
            ``DocumentPickleFormat``): unpickling runs code chosen by the export's author, so
            pass it only for exports you or someone you trust wrote.

    Raises:
        IncompleteExportError: Unfinished, damaged or foreign directory.
        UntrustedExportError: The rows are pickled and ``trust`` is false.
        ValueError: Unknown field names (the message lists the fields).
    """
    return _opened(directory, fields, trust, sealed=False)


def open_sealed(directory: str | os.PathLike[str]) -> Export:
    """Open an export for checking only (``guideloom verify``): it is never unpickled, so an
    export of any format can be verified without trusting its author."""
    return _opened(directory, None, False, sealed=True)


def _opened(directory: str | os.PathLike[str], fields: Sequence[str] | None, trust: bool,
            sealed: bool) -> Export:
    """Checked and opened: the format reader is made now (npy maps its files), so the Export
    keeps reading these files or, if the directory is replaced before it could, says so."""
    if is_rddac_export(directory):  # rddac 2.0 / ddacs 3.2 wrote it: no export.json
        root, described = os.fspath(directory), describe_rddac_export(directory)
        kind_of(root, described).check_published(root, described)  # shapes, sizes, row counts
        warn(f"{root} has no export.json (an rddac/ddacs export): reading it unverified, as "
             "it is", UnverifiedExportWarning)
        # not a whole ExportManifest: readers use .get for what rddac did not record
        return Export(root, cast(ExportManifest, described), fields)
    root = resolve_target(directory)[2]
    try:
        identity = directory_identity(root)  # taken before the manifest: a swap between shows
    except CorruptExportError:
        identity = None  # nothing there: read_export_manifest says so
    root, manifest = read_export_manifest(directory)
    if identity is None:
        identity = directory_identity(root)
    if needs_trust(manifest) and not trust and not sealed:
        raise UntrustedExportError(untrusted_message(root))
    kind_of(root, manifest).check_published(root, manifest)
    export = Export(root, manifest, fields, trust=trust, identity=identity)
    export._open()
    return export


def kind_of(root: str, manifest: Mapping[str, Any]) -> type[ExportFormat]:
    """The format class of a published export (an unknown kind is refused)."""
    try:
        return get_format(manifest["kind"])
    except ValueError as exc:
        raise IncompleteExportError(f"{root}: {exc}") from None
