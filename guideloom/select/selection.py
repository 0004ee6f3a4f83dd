"""Choosing the experiments of a job: the index, an id allowlist, a row filter, local files."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from guideloom.errors import (
    ManifestError,
    MissingDataWarning,
    UnknownColumnError,
    summarize_ids,
    warn,
)
from guideloom.read.locations import Location
from guideloom.read.roots import DataRoot, as_root, job_root
from guideloom.select.index import IndexTable
from guideloom.select.manifest import load
from guideloom.select.parse import Dataset
from guideloom.select.presets import DatasetSpec

RowFilter = Callable[[Mapping[str, Any]], bool]


@dataclass(frozen=True)
class Selection:
    """The experiments a job reads, in order.

    Attributes:
        locations: One location per experiment with local data, in job order.
        rows: The typed index rows, parallel to ``locations``.
        missing: Ids selected by the filters but with no local HDF5 file.
    """

    locations: tuple[Location, ...]
    rows: tuple[Mapping[str, Any], ...]
    missing: tuple[Any, ...]

    @property
    def ids(self) -> list[Any]:
        """Experiment ids in job order."""
        return [loc.sim_id for loc in self.locations]


#: How rows follow an id allowlist: ``"index"`` (the index table's order, as rddac 2.0) or
#: ``"sim_ids"`` (the allowlist's own order).
SimIdsOrder = Literal["index", "sim_ids"]
SIM_IDS_ORDERS = ("index", "sim_ids")


def resolve_dataset(
    data_dir: str | os.PathLike[str] | DataRoot | None, dataset: Dataset | None,
    source: str | Path | None, spec: DatasetSpec | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> tuple[Dataset, DataRoot]:
    """Return the dataset and the root its files are read from (a folder made absolute, or
    the remote root read by URL, with ``storage_options`` for fsspec).

    Relative paths are made absolute against the current directory here, on the driver: the
    job's file locations are shipped to Dask workers, which may run in another directory.

    Raises:
        ValueError: ``storage_options`` for a local data directory.
    """
    if dataset is None:
        dataset = load(data_dir, source, spec=spec, storage_options=storage_options)
        # a URL or DOI is opened once, by load (the folder of a manifest's URL too)
        local = dataset.root.local_folder() is not None
        where = data_dir if data_dir is not None and local else dataset.root
    else:
        where = data_dir if data_dir is not None else dataset.root
        if dataset.root.absolute() != dataset.root or not (
                dataset.manifest_path is None or dataset.manifest_path.is_absolute()):
            dataset = replace(  # a Dataset built by hand with relative paths
                dataset, root=dataset.root.absolute(),
                manifest_path=None if dataset.manifest_path is None
                else Path(os.path.abspath(dataset.manifest_path)))
    return dataset, job_root(where, storage_options)


def order_sim_ids(ds: Dataset, sim_ids: Iterable[Any], order: SimIdsOrder) -> list[Any]:
    """Return the allowlist in the order rows will follow: the index table's order for
    ``"index"`` (ids not in the index keep their place at the end), unchanged for ``"sim_ids"``.

    Raises:
        ValueError: ``order`` is neither ``"index"`` nor ``"sim_ids"``.
    """
    if order not in SIM_IDS_ORDERS:
        raise ValueError(f"sim_ids_order must be 'index' or 'sim_ids', not {order!r}")
    ids = list(sim_ids)
    if order == "sim_ids":
        return ids
    index = ds.index()
    position = {i: n for n, i in enumerate(index.ids)}
    converted = [_as_index_id(i, index) for i in ids]
    last = len(position)
    ranked = sorted(range(len(ids)), key=lambda k: (position.get(converted[k], last), k))
    return [ids[k] for k in ranked]


def select(
    ds: Dataset,
    root: DataRoot | str | os.PathLike[str],
    *,
    sim_ids: Iterable[Any] | None = None,
    where: RowFilter | None = None,
    warn_missing: bool = True,
    order: SimIdsOrder = "sim_ids",
) -> Selection:
    """Select experiments: ``sim_ids`` (in ``order``) or the index order, then ``where``.

    Ids of ``sim_ids`` that are not in the index table, and ids without a local file, are
    dropped and reported with a :class:`MissingDataWarning` each (as rddac does). ``root`` is
    where the files are read: a :class:`~guideloom.read.roots.DataRoot` (``ds.root``, what
    :func:`resolve_dataset` returns), or a folder as a caller gives it (``ds.data_dir``).

    Raises:
        ValueError: ``sim_ids`` lists an id twice, or ``order`` is unknown.
    """
    index = ds.index()
    if sim_ids is None:
        chosen = index.ids
    else:
        chosen = [_as_index_id(i, index) for i in order_sim_ids(ds, sim_ids, order)]
        if len(set(chosen)) != len(chosen):
            raise ValueError("sim_ids lists an experiment more than once")
        unknown = [i for i in chosen if i not in index]
        if unknown:
            if warn_missing:
                warn(f"skipping {summarize_ids(unknown)} of sim_ids: not present in "
                     f"{index.path.name} (in {index.path.parent}); check the ids",
                     MissingDataWarning)
            chosen = [i for i in chosen if i in index]
    rows = [index.row(i) for i in chosen]
    if where is not None:
        rows = [r for r in rows if where(FilterRow(r, index.path.name))]
    available = as_root(root).locations(ds, [r[ds.id_column] for r in rows])
    kept, missing = [], []
    for row in rows:
        loc = available.get(row[ds.id_column])
        if loc is None:
            missing.append(row[ds.id_column])
        else:
            kept.append((loc, row))
    if missing and warn_missing:
        warn(
            f"skipping {summarize_ids(missing)} listed in {index.path.name} with no HDF5 file "
            f"under {root}",
            MissingDataWarning,
        )
    return Selection(
        locations=tuple(loc for loc, _ in kept),
        rows=tuple(row for _, row in kept),
        missing=tuple(missing),
    )


INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def check_storable_ids(ids: Sequence[Any], index_name: str) -> None:
    """Refuse integer ids outside int64: exports store ids in a plain numpy array
    (``sim_ids.npy`` or a zarr array), and a larger id would need pickle to store.

    Raises:
        ManifestError: Naming the ids and the index file.
    """
    too_big = [i for i in ids if isinstance(i, int) and not INT64_MIN <= i <= INT64_MAX]
    if too_big:
        raise ManifestError(
            f"{index_name}: experiment id(s) outside the 64-bit integer range, which exports "
            f"cannot store without pickle: {summarize_ids(too_big)}; leave them out with "
            "sim_ids= or where=, or renumber them in the index table"
        )
class FilterRow(Mapping[str, Any]):
    """The read-only index row a ``where=`` filter sees; looking up a column the table does
    not have raises :class:`~guideloom.errors.UnknownColumnError` listing the columns (a
    ``KeyError`` raised for another reason inside the filter passes unchanged)."""

    __slots__ = ("_row", "_table")

    def __init__(self, row: Mapping[str, Any], table: str):
        self._row = row
        self._table = table

    def __getitem__(self, column: str) -> Any:
        try:
            return self._row[column]
        except KeyError:
            raise UnknownColumnError(
                f"where= looked up {column!r}, which is not a column of {self._table}; "
                f"columns: {', '.join(self._row)} (fix the name in the filter)") from None

    def __contains__(self, column: object) -> bool:
        return column in self._row

    def __iter__(self) -> Iterator[str]:
        return iter(self._row)

    def __len__(self) -> int:
        return len(self._row)

    def __repr__(self) -> str:
        return repr(self._row)


def _as_index_id(value: Any, index: IndexTable) -> Any:
    """Accept numpy integers and the like for integer ids."""
    if value in index:
        return value
    try:
        as_int = int(value)
    except (TypeError, ValueError):
        return value
    return as_int if as_int == value else value
