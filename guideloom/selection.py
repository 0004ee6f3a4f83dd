"""Choosing the experiments of a job: the index, an id allowlist, a row filter, local files."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from guideloom.croissant import Dataset, load
from guideloom.errors import ManifestError, MissingDataWarning, summarize_ids
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
    """Return the dataset and the directory its files are read from."""
    if dataset is None:
        dataset = load(data_dir if data_dir is not None else "./data", source)
    root = Path(data_dir) if data_dir is not None else Path(dataset.data_dir)
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
        rows = [r for r in rows if where(MappingProxyType(r))]
    available = scan_locations(ds, root)
    kept, missing = [], []
    for row in rows:
        loc = available.get(row[ds.id_column])
        if loc is None:
            missing.append(row[ds.id_column])
        else:
            kept.append((loc, row))
    if missing and warn_missing:
        warnings.warn(
            f"skipping {summarize_ids(missing)} listed in {index.path.name} with no HDF5 file "
            f"under {root}",
            MissingDataWarning,
            stacklevel=3,
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


def _as_index_id(value: Any, index) -> Any:
    """Accept numpy integers and the like for integer ids."""
    if value in index:
        return value
    try:
        as_int = int(value)
    except (TypeError, ValueError):
        return value
    return as_int if as_int == value else value
