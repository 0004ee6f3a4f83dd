"""The export functions users call: :func:`export` builds an :class:`ExportSpec` and runs it;
the four ``export_to_*`` functions are thin wrappers over it."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypedDict, Unpack

from guideloom.export.fingerprint import callable_name
from guideloom.export.run import ExportResult, run_export
from guideloom.export.spec import (
    ExportSpec,
    FieldTransform,
    OnError,
    RecordTransform,
)
from guideloom.formats.layout import SIM_IDS_FILE, array_file
from guideloom.read.roots import DataRoot
from guideloom.read.views import View
from guideloom.select.parse import Dataset
from guideloom.select.presets import DatasetSpec
from guideloom.select.selection import RowFilter, SimIdsOrder, order_sim_ids, resolve_dataset


def build_spec(
    view: str | View,
    output: str,
    target: str | os.PathLike[str],
    *,
    data_dir: str | os.PathLike[str] | DataRoot | None = None,
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
    verify_crc: bool = False,
    spec: DatasetSpec | None = None,
    sim_ids_order: SimIdsOrder = "index",
    storage_options: Mapping[str, Any] | None = None,
    update: bool = False,
    verify_inputs: bool = False,
    code_version: str | None = None,
) -> ExportSpec:
    """Build the job description shared by every export function, the CLI and workflows.

    Local paths (``data_dir``, ``source``, ``target``) are made absolute here, on the driver,
    so workers started in another directory read and write the same files; fsspec URLs
    (``s3://``, ``memory://`` …) are kept as given. The ``sim_ids`` allowlist is put in its
    output order here (``sim_ids_order``), so the spec holds the rows' order.
    """
    ds, root = resolve_dataset(data_dir, dataset, source, spec, storage_options)
    target_text = os.fspath(target)
    resolved = ds.view(view) if isinstance(view, str) else view
    if sim_ids is not None:
        sim_ids = order_sim_ids(ds, sim_ids, sim_ids_order)
    return ExportSpec(
        view=resolved,
        dataset=ds,
        data_dir=root,
        output=output,
        target=target_text if "://" in target_text else os.path.abspath(target_text),
        sim_ids=None if sim_ids is None else tuple(sim_ids),
        where=where,
        where_description=where_description or (callable_name(where) if where else None),
        transforms=dict(transforms or {}),
        record_transform=record_transform,
        partition_size=partition_size,
        on_error=on_error,
        overwrite=overwrite,
        options=dict(options or {}),
        verify_crc=verify_crc,
        update=update,
        verify_inputs=verify_inputs,
        code_version=code_version,
    )


class ExportOptions(TypedDict, total=False):
    """The keyword options every export function takes (one place for all their signatures).

    Attributes:
        data_dir: Directory with the experiment files (default: the dataset's, else ./data),
            or an ``https://``/fsspec URL or DOI of a release (read by byte ranges).
        dataset: A loaded dataset (needed for views added in memory).
        source: Manifest path when ``dataset`` is not given.
        sim_ids: Allowlist of experiment ids; output rows follow the index table's order (as in
            rddac), or the allowlist's own order with ``sim_ids_order="sim_ids"``. Ids not in
            the index table are skipped with a ``MissingDataWarning``.
        sim_ids_order: ``"index"`` (default) or ``"sim_ids"``, see ``sim_ids``.
        spec: A ``DatasetSpec`` for loading the manifest (ignored with ``dataset``).
        storage_options: fsspec options for a remote ``data_dir`` (credentials, endpoint, as
            ``xarray.open_zarr`` takes them). They travel to the Dask workers inside the job,
            as the rest of the spec does, and are never written to ``export.json`` or a log.
        where: Row filter on the typed index row.
        transforms: ``{alias: fn}`` applied to single fields first.
        record_transform: ``fn(record) -> dict`` applied after ``transforms``; its keys are the
            output aliases. ``record["_sim_id"]`` is the experiment id (never written).
        show_progress: Show a progress bar of experiments done (with the skipped count and
            MB/s), then a line per later phase.
        client: ``None`` (the active Client; else in-process for small jobs and the embedded
            local cluster when it pays), ``"sync"``, ``"local"``/``"local:N"``, a scheduler
            address ``"tls://host:port"`` (credentials found as
            :func:`guideloom.cluster.security.find_security` says) or ``"tcp://host:port"``,
            ``"slurm:N"``/``"pbs:N"``, or a
            ``distributed.Client``.
        partition_size: Experiments per task (default: from the data alone, the same on every
            placement: about 32 partitions of 0.1 to 2 s of estimated work, at least 2, at most
            256 experiments; see :func:`guideloom.cluster.runtime.job_partition_size`).
        on_error: ``"raise"`` (default) fails on the first bad experiment, publishing nothing;
            ``"skip"`` leaves bad experiments out and lists them in ``export.json``.
        overwrite: Replace an existing complete export.
        update: Update the complete export at the target instead of writing it again: only
            the experiments added or changed since it was written are read, the others'
            rows are carried, and the result equals a full export of the new selection (see
            docs/updating.md). Nothing at the target: a full export. Another view, transform,
            options or format than the export's: refused (``UpdateRefusedError``), naming
            what differs.
        verify_inputs: With ``update``: hash every carried experiment's input again and
            compare it with the content digest the export recorded, whatever the file
            system or server says of it (a pass over the inputs at the disk's read rate;
            without it only inputs whose size, times, inode or checksum changed are hashed).
        code_version: The version of the transforms' code, named by you: it replaces their
            automatic code identity (normalised source of what they reach, package versions)
            and lifts the refusal of transforms that read the environment, files, the clock
            or unseeded randomness, or hold values with no deterministic token. Your promise:
            code of the same ``code_version`` makes the same rows (changing it refuses an
            update). Recorded in ``export.json``'s recipe; see docs/updating.md.
        verify_crc: Check the CRC-32 of each stored zip member before its data is used (one
            pass over each member; by default a member read in part is trusted; see "Input
            integrity" in the README). A damaged member is a ``CorruptDataError`` (skipped with
            ``on_error="skip"``). It does not change the job's identity.
        report: Write a self-contained HTML run report there after the run (phase timeline,
            task stream per worker, throughput over time, skipped experiments, placement),
            also after a failed run.
        quiet: Print nothing on stderr of the job's own: on the embedded local cluster
            (``client="local"``, ``"local:N"``, or the default choosing it) an export prints
            one line (where it runs, the dashboard's and the ``/guideloom`` page's URLs)
            unless logging already shows guideloom's records on stderr; the log records are
            emitted either way. In-process exports print nothing.
    """

    data_dir: str | os.PathLike[str] | DataRoot | None
    dataset: Dataset | None
    source: str | Path | None
    sim_ids: Iterable[Any] | None
    sim_ids_order: SimIdsOrder
    spec: DatasetSpec | None
    storage_options: Mapping[str, Any] | None
    where: RowFilter | None
    transforms: Mapping[str, FieldTransform] | None
    record_transform: RecordTransform | None
    show_progress: bool
    client: Any
    partition_size: int | None
    on_error: OnError
    overwrite: bool
    update: bool
    verify_inputs: bool
    code_version: str | None
    verify_crc: bool
    report: str | Path | None
    quiet: bool


_RUN_OPTIONS = ("show_progress", "client", "report", "quiet")
_OPTIONS_DOC = """
    Args:
        view: A view name (published, or added with :func:`guideloom.add_view`) or a View.
        **options: See :class:`~guideloom.export.api.ExportOptions`: ``data_dir``, ``dataset``,
            ``source``, ``sim_ids``, ``sim_ids_order``, ``spec``, ``storage_options``, ``where``,
            ``transforms``, ``record_transform``,
            ``show_progress``, ``client``, ``partition_size``, ``on_error``, ``overwrite``,
            ``update``, ``verify_inputs``, ``code_version``, ``verify_crc``, ``report``,
            ``quiet``.
"""


def export(view: str | View, target: str | os.PathLike[str], *, kind: str,
           format_options: Mapping[str, Any] | None = None,
           **options: Unpack[ExportOptions]) -> ExportResult:
    """Export a view to ``target`` in the output format ``kind``; the one entry point.

    ``kind`` is a registered format (``"npy"``, ``"npz"``, ``"zarr"``, ``"storage"`` or a
    plugin, see :mod:`guideloom.formats`); ``format_options`` go to it (``compressed`` for npz,
    ``compressor`` for zarr, ``storage`` for storage). The export functions below are thin
    wrappers over this one.

    Returns:
        The :class:`~guideloom.export.run.ExportResult` (target and ``export.json`` contents).
    """
    unknown = sorted(set(options) - set(ExportOptions.__annotations__))
    if unknown:
        raise TypeError(f"unknown export option(s) {unknown}; options: "
                        f"{', '.join(ExportOptions.__annotations__)}")
    began = time.perf_counter()
    run = {k: options.pop(k) for k in _RUN_OPTIONS if k in options}  # type: ignore[misc]
    spec = build_spec(view, kind, target, options=format_options, **options)  # type: ignore[misc]
    return run_export(spec, **run, resolve_s=time.perf_counter() - began)


def export_to_numpy(view: str | View, out_dir: str | os.PathLike[str],
                    **options: Unpack[ExportOptions]) -> dict[str, Path]:
    """Export a view to one ``.npy`` memmap per output alias, plus ``sim_ids.npy``.

    Every alias has shape ``(n_records, *field_shape)``; shapes and dtypes come from the first
    record and every other record must match (else a ValueError naming the experiment; use
    :func:`export_to_numpy_per_sim` for variable shapes). Row ``i`` of every array is the
    experiment ``sim_ids[i]``. The export is complete or absent: it appears at ``out_dir`` by one
    rename after ``export.json`` is written; rerunning an interrupted export resumes it.

    Returns:
        ``{alias: path}`` including ``"sim_ids"``.
    """
    result = export(view, out_dir, kind="npy", **options)
    root = Path(result.target)
    paths = {alias: root / array_file(alias) for alias in result.manifest["fields"]}
    paths["sim_ids"] = root / SIM_IDS_FILE
    return paths


def export_to_numpy_per_sim(view: str | View, out_dir: str | os.PathLike[str], *,
                            compressed: bool = False,
                            **options: Unpack[ExportOptions]) -> Path:
    """Export a view to one ``<experiment_id>.npz`` per experiment (shapes may vary).

    Each file is written under a temporary name and renamed when complete; ``compressed=True``
    uses ``np.savez_compressed``. Text values (e.g. a geometry column) are stored as numpy
    string arrays, never pickled.

    Returns:
        The export directory.
    """
    result = export(view, out_dir, kind="npz", format_options={"compressed": compressed},
                    **options)
    return Path(result.target)


def export_to_zarr(view: str | View, store: str | os.PathLike[str], *,
                   compressor: str | None = "lz4", **options: Unpack[ExportOptions]) -> str:
    """Export a view to a zarr v3 group: one array per alias plus ``sim_ids``.

    Arrays are chunked along records with chunk boundaries on partition boundaries, so no two
    tasks write one chunk; ``compressor`` is ``"lz4"`` (Blosc, shuffle; default), ``"zstd"``,
    ``"gzip"`` or ``None``. ``store`` is a local path or an fsspec URL (``file://``,
    ``memory://``, ``s3://`` …) that every worker can reach.

    Returns:
        The store path or URL, for :func:`guideloom.load_export`.
    """
    return export(view, store, kind="zarr", format_options={"compressor": compressor},
                  **options).target


def export_to_storage(view: str | View, storage: Any,
                      **options: Unpack[ExportOptions]) -> Path:
    """Export a view into a GuideLoom storage: one record per experiment, one shard per task.

    ``storage`` is a :class:`~guideloom.StreamStorage`, :class:`~guideloom.DocumentStorage` or
    :class:`~guideloom.StreamWithMetaStorage`; its directory is the output. The
    ``record_transform`` turns each record into what the storage format packs.

    Returns:
        The storage directory; ``load_export`` reads it row by row (one row per experiment) and
        ``StatefulDataLoader.from_storage`` trains on it.

    Example:
        >>> fmt = guideloom.StreamNumpyFormat(np.dtype([("force", "<f4"), ("doc", "<u4")]))
        >>> storage = guideloom.StreamStorage("./force-stream", fmt)         # doctest: +SKIP
        >>> guideloom.export_to_storage("force-curve", storage, record_transform=lambda r: {
        ...     "force": r["force_data"][:, 7],
        ...     "doc": np.full(len(r["force_data"]), r["_sim_id"], "<u4")})  # doctest: +SKIP
    """
    result = export(view, storage.directory, kind="storage",
                    format_options={"storage": storage}, **options)
    return Path(result.target)


for _fn in (export, export_to_numpy, export_to_numpy_per_sim, export_to_zarr, export_to_storage):
    _fn.__doc__ = (_fn.__doc__ or "") + _OPTIONS_DOC
