"""Choosing the experiments of a job: the index, an id allowlist, a row filter, local files."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from guideloom.croissant import Dataset, load
from guideloom.errors import MissingDataWarning, UnknownColumnError, summarize_ids, warn
from guideloom.sources import Location, scan_locations

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


def resolve_dataset(
    data_dir: str | Path | None, dataset: Dataset | None, source: str | Path | None
) -> tuple[Dataset, Path]:
    """Return the dataset and the directory its files are read from, both with absolute paths.

    Relative paths are made absolute against the current directory here, on the driver: the
    job's file locations are shipped to Dask workers, which may run in another directory.
    """
    if dataset is None:
        dataset = load(data_dir if data_dir is not None else "./data", source)
    elif not Path(dataset.data_dir).is_absolute() or not (
            dataset.manifest_path is None or dataset.manifest_path.is_absolute()):
        dataset = replace(  # a Dataset built by hand with relative paths
            dataset, data_dir=Path(os.path.abspath(dataset.data_dir)),
            manifest_path=None if dataset.manifest_path is None
            else Path(os.path.abspath(dataset.manifest_path)))
    root = Path(os.path.abspath(data_dir if data_dir is not None else dataset.data_dir))
    if not root.is_dir():
        raise FileNotFoundError(f"data directory not found: {root}")
    return dataset, root


def select(
    ds: Dataset,
    root: Path,
    *,
    sim_ids: Iterable[Any] | None = None,
    where: RowFilter | None = None,
    warn_missing: bool = True,
) -> Selection:
    """Select experiments: ``sim_ids`` (in their order) or the index order, then ``where``.

    Ids without a local file are dropped and reported with one :class:`MissingDataWarning`.

    Raises:
        ValueError: ``sim_ids`` names ids that are not in the index table.
    """
    index = ds.index()
    if sim_ids is None:
        chosen = index.ids
    else:
        chosen = [_as_index_id(i, index) for i in sim_ids]
        unknown = [i for i in chosen if i not in index]
        if unknown:
            raise ValueError(f"sim_ids not in {index.path.name}: {summarize_ids(unknown)}")
        if len(set(chosen)) != len(chosen):
            raise ValueError("sim_ids lists an experiment more than once")
    rows = [index.row(i) for i in chosen]
    if where is not None:
        rows = [r for r in rows if where(FilterRow(r, index.path.name))]
    available = scan_locations(ds, root)
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


def _as_index_id(value: Any, index) -> Any:
    """Accept numpy integers and the like for integer ids."""
    if value in index:
        return value
    try:
        as_int = int(value)
    except (TypeError, ValueError):
        return value
    return as_int if as_int == value else value
