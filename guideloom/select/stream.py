"""A view's records streamed from the selected experiments: :func:`iter_view`.

rddac's path ``guideloom.streaming`` is a stub (``guideloom/compat/aliases.py``) holding this
and the names rddac had beside it: the exports (:mod:`guideloom.export.api`) and their reader
(:mod:`guideloom.reader`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from guideloom.read.records import RecordReader
from guideloom.read.roots import DataRoot
from guideloom.read.views import View
from guideloom.select.parse import Dataset
from guideloom.select.presets import DatasetSpec
from guideloom.select.selection import (
    RowFilter,
    Selection,
    SimIdsOrder,
    resolve_dataset,
    select,
)

__all__ = ["iter_view"]


def iter_view(
    view: str | View,
    *,
    data_dir: str | os.PathLike[str] | DataRoot | None = None,
    dataset: Dataset | None = None,
    source: str | Path | None = None,
    sim_ids: Iterable[Any] | None = None,
    where: RowFilter | None = None,
    verify_crc: bool = False,
    spec: DatasetSpec | None = None,
    sim_ids_order: SimIdsOrder = "index",
    storage_options: Mapping[str, Any] | None = None,
) -> Iterator[dict[str, Any]]:
    """Yield one record per experiment of ``view``.

    Each record maps the view's aliases to values (HDF5 fields as numpy arrays with slicing
    applied, index columns as typed scalars) plus ``"_sim_id"``, the experiment id.

    The view, the filters and the local files are checked when this is called; records are
    read lazily, one experiment at a time. Ids without local data, and ids of ``sim_ids`` that
    are not in the index table, are skipped with a :class:`~guideloom.errors.MissingDataWarning`.

    Args:
        view: A view name (published or added with :func:`guideloom.add_view`) or a View.
        data_dir: Directory with the files (default: the dataset's, else ``./data``), or an
            ``https://``/fsspec URL or DOI of a release, or its
            :class:`~guideloom.read.roots.RemoteRoot` (read by byte ranges).
        dataset: A loaded dataset (for views added in memory).
        source: The manifest path when ``dataset`` is not given.
        sim_ids: Allowlist of experiment ids; records come in the index table's order (as in
            rddac), or in the allowlist's own order with ``sim_ids_order="sim_ids"``.
        where: Row filter on the typed index row, e.g. ``lambda row: row["split"] == "train"``.
        verify_crc: Check the CRC-32 of each stored zip member before its data is used (a
            whole pass over the member, once per process). By default a member read in part is
            trusted; see "Input integrity" in the README.
        spec: A :class:`~guideloom.select.manifest.DatasetSpec` for loading the manifest (ignored
            with ``dataset``).
        sim_ids_order: ``"index"`` (default) or ``"sim_ids"``, see ``sim_ids``.
        storage_options: fsspec options for a remote ``data_dir`` (credentials, endpoint:
            ``{"key": ..., "secret": ..., "client_kwargs": {"endpoint_url": ...}}``).

    Example:
        >>> for rec in guideloom.streaming.iter_view("force-curve", data_dir="./data",
        ...                                          sim_ids=[0]):          # doctest: +SKIP
        ...     print(rec["force_data"].shape, rec["_sim_id"])

    Raises:
        ValueError: Unknown view, or an id listed twice in ``sim_ids``.
        guideloom.errors.ExperimentReadError: A file is damaged or lacks a field (raised when
            that record is reached): a :class:`~guideloom.errors.CorruptDataError` for damaged
            data or metadata (or a CRC-32 mismatch), a
            :class:`~guideloom.errors.MissingFieldError` for an absent field.
    """
    ds, root = resolve_dataset(data_dir, dataset, source, spec, storage_options)
    resolved = ds.view(view) if isinstance(view, str) else view
    selection = select(ds, root, sim_ids=sim_ids, where=where, order=sim_ids_order)
    return _records(resolved, selection, verify_crc)


def _records(view: View, selection: Selection, verify_crc: bool = False
             ) -> Iterator[dict[str, Any]]:
    from guideloom.read.readahead import ReadAhead

    reader = RecordReader(view, verify_crc=verify_crc)
    with ReadAhead(reader, selection.locations, selection.rows) as ahead:  # remote: fetched ahead
        for loc, row in zip(selection.locations, selection.rows, strict=True):
            yield ahead.read(loc, row)

