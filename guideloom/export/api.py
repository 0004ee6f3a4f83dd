"""The export functions users call; each builds an :class:`ExportSpec` and runs it."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from guideloom.croissant import Dataset, View
from guideloom.export.run import run_export
from guideloom.export.spec import (
    ExportSpec,
    FieldTransform,
    OnError,
    RecordTransform,
    callable_name,
)
from guideloom.selection import RowFilter, resolve_dataset


def build_spec(
    view: str | View,
    output: str,
    target: str | os.PathLike[str],
    *,
    data_dir: str | Path | None = None,
    dataset: Dataset | None = None,
    source: str | Path | None = None,
    sim_ids: Iterable[Any] | None = None,
    where: RowFilter | None = None,
    where_description: str | None = None,
    transforms: Mapping[str, FieldTransform] | None = None,
    record_transform: RecordTransform | None = None,
    partition_size: int | None = None,
    on_error: OnError = "raise",
    overwrite: bool = False,
    options: Mapping[str, Any] | None = None,
) -> ExportSpec:
    """Build the job description shared by every export function, the CLI and workflows."""
    ds, root = resolve_dataset(data_dir, dataset, source)
    resolved = ds.view(view) if isinstance(view, str) else view
    return ExportSpec(
        view=resolved,
        dataset=ds,
        data_dir=root,
        output=output,  # type: ignore[arg-type]
        target=os.fspath(target),
        sim_ids=None if sim_ids is None else tuple(sim_ids),
        where=where,
        where_description=where_description or (callable_name(where) if where else None),
        transforms=dict(transforms or {}),
        record_transform=record_transform,
        partition_size=partition_size,
        on_error=on_error,
        overwrite=overwrite,
        options=dict(options or {}),
    )


_COMMON_DOC = """
    Args:
        view: A view name (published, or added with :func:`guideloom.add_view`) or a View.
        data_dir: Directory with the experiment files (default: the dataset's, else ./data).
        dataset: A loaded dataset (needed for views added in memory).
        source: Manifest path when ``dataset`` is not given.
        sim_ids: Allowlist of experiment ids; output rows follow this order.
        where: Row filter on the typed index row.
        transforms: ``{alias: fn}`` applied to single fields first.
        record_transform: ``fn(record) -> dict`` applied after ``transforms``; its keys are the
            output aliases. ``record["_sim_id"]`` is the experiment id (never written).
        show_progress: Show a progress bar of experiments done.
        client: ``None`` (active client, else an embedded LocalCluster), a
            ``distributed.Client``, a scheduler address, ``"local:N"`` or ``"sync"``.
        partition_size: Experiments per Dask task (default: about 4 tasks per worker, ≤ 64).
        on_error: ``"raise"`` (default) fails on the first bad experiment, publishing nothing;
            ``"skip"`` leaves bad experiments out and lists them in ``export.json``.
        overwrite: Replace an existing complete export.
"""


def export_to_numpy(
    view: str | View,
    out_dir: str | os.PathLike[str],
    *,
    data_dir: str | Path | None = None,
    dataset: Dataset | None = None,
    source: str | Path | None = None,
    sim_ids: Iterable[Any] | None = None,
    where: RowFilter | None = None,
    transforms: Mapping[str, FieldTransform] | None = None,
    record_transform: RecordTransform | None = None,
    show_progress: bool = False,
    client: Any = None,
    partition_size: int | None = None,
    on_error: OnError = "raise",
    overwrite: bool = False,
) -> dict[str, Path]:
    """Export a view to one ``.npy`` memmap per output alias, plus ``sim_ids.npy``.

    Every alias has shape ``(n_records, *field_shape)``; shapes and dtypes come from the first
    record and every other record must match (else a ValueError naming the experiment; use
    :func:`export_to_numpy_per_sim` for variable shapes). Row ``i`` of every array is the
    experiment ``sim_ids[i]``. The export is complete or absent: it appears at ``out_dir`` by one
    rename after ``export.json`` is written; rerunning an interrupted export resumes it.

    Returns:
        ``{alias: path}`` including ``"sim_ids"``.
    """
    spec = build_spec(view, "npy", out_dir, data_dir=data_dir, dataset=dataset, source=source,
                      sim_ids=sim_ids, where=where, transforms=transforms,
                      record_transform=record_transform, partition_size=partition_size,
                      on_error=on_error, overwrite=overwrite)
    result = run_export(spec, client=client, show_progress=show_progress)
    root = Path(result.target)
    paths = {alias: root / f"{alias}.npy" for alias in result.manifest["fields"]}
    paths["sim_ids"] = root / "sim_ids.npy"
    return paths


def export_to_numpy_per_sim(
    view: str | View,
    out_dir: str | os.PathLike[str],
    *,
    data_dir: str | Path | None = None,
    dataset: Dataset | None = None,
    source: str | Path | None = None,
    sim_ids: Iterable[Any] | None = None,
    where: RowFilter | None = None,
    transforms: Mapping[str, FieldTransform] | None = None,
    record_transform: RecordTransform | None = None,
    compressed: bool = False,
    show_progress: bool = False,
    client: Any = None,
    partition_size: int | None = None,
    on_error: OnError = "raise",
    overwrite: bool = False,
) -> Path:
    """Export a view to one ``<experiment_id>.npz`` per experiment (shapes may vary).

    Each file is written under a temporary name and renamed when complete; ``compressed=True``
    uses ``np.savez_compressed``. Text values (e.g. a geometry column) are stored as numpy
    string arrays, never pickled.

    Returns:
        The export directory.
    """
    spec = build_spec(view, "npz", out_dir, data_dir=data_dir, dataset=dataset, source=source,
                      sim_ids=sim_ids, where=where, transforms=transforms,
                      record_transform=record_transform, partition_size=partition_size,
                      on_error=on_error, overwrite=overwrite, options={"compressed": compressed})
    return Path(run_export(spec, client=client, show_progress=show_progress).target)


def export_to_zarr(
    view: str | View,
    store: str | os.PathLike[str],
    *,
    data_dir: str | Path | None = None,
    dataset: Dataset | None = None,
    source: str | Path | None = None,
    sim_ids: Iterable[Any] | None = None,
    where: RowFilter | None = None,
    transforms: Mapping[str, FieldTransform] | None = None,
    record_transform: RecordTransform | None = None,
    compressor: str | None = "lz4",
    show_progress: bool = False,
    client: Any = None,
    partition_size: int | None = None,
    on_error: OnError = "raise",
    overwrite: bool = False,
) -> str:
    """Export a view to a zarr v3 group: one array per alias plus ``sim_ids``.

    Arrays are chunked along records with chunk boundaries on partition boundaries, so no two
    tasks write one chunk; ``compressor`` is ``"lz4"`` (Blosc, shuffle; default), ``"zstd"``,
    ``"gzip"`` or ``None``. ``store`` is a local path or an fsspec URL (``file://``,
    ``memory://``, ``s3://`` …) that every worker can reach.

    Returns:
        The store path or URL, for :func:`guideloom.load_export`.
    """
    spec = build_spec(view, "zarr", store, data_dir=data_dir, dataset=dataset, source=source,
                      sim_ids=sim_ids, where=where, transforms=transforms,
                      record_transform=record_transform, partition_size=partition_size,
                      on_error=on_error, overwrite=overwrite, options={"compressor": compressor})
    return run_export(spec, client=client, show_progress=show_progress).target


for _fn in (export_to_numpy, export_to_numpy_per_sim, export_to_zarr):
    _fn.__doc__ = (_fn.__doc__ or "") + _COMMON_DOC
