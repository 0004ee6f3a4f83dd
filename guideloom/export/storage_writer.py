"""Exports into GuideLoom storages: each Dask partition becomes exactly one shard.

Shard number = partition index, so shards are numbered without gaps and no shard is ever written
by two tasks. The record transform produces what the storage format packs (for
:class:`~guideloom.storage.StreamNumpyFormat`, a dict of equal-length 1-D arrays).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from guideloom.croissant import Dataset, View
from guideloom.export.pipeline import RecordValueError
from guideloom.export.spec import FieldSchema, FieldTransform, OnError, Partition, RecordTransform
from guideloom.export.staging import Staging
from guideloom.export.writers import PartitionSink, Writer
from guideloom.reader import _Backend, register_backend
from guideloom.selection import RowFilter

RECORD_OFFSETS = "record_offsets.npy"


def describe_storage(storage: Any) -> dict[str, Any]:
    """How ``load_export`` can reopen the storage: its class and, for built-ins, its format."""
    from guideloom.storage import DocumentPickleFormat, StreamNumpyFormat
    from guideloom.storage._shards import dtype_to_json

    fmt = storage.format
    if isinstance(fmt, StreamNumpyFormat):
        fdoc: dict[str, Any] = {"type": "StreamNumpyFormat",
                                "dtype": dtype_to_json(np.dtype(fmt.stream_dtype))}
    elif isinstance(fmt, DocumentPickleFormat):
        fdoc = {"type": "DocumentPickleFormat"}
    else:
        fdoc = {"type": f"{type(fmt).__module__}:{type(fmt).__qualname__}"}
    return {"class": type(storage).__name__, "format": fdoc}


def reopen_storage(directory: str, description: Mapping[str, Any]) -> Any:
    """Rebuild a storage object for ``directory`` from :func:`describe_storage` output."""
    from guideloom import storage as storages
    from guideloom.storage._shards import dtype_from_json

    fdoc = description["format"]
    if fdoc["type"] == "StreamNumpyFormat":
        fmt: Any = storages.StreamNumpyFormat(dtype_from_json(fdoc["dtype"]))
    elif fdoc["type"] == "DocumentPickleFormat":
        fmt = storages.DocumentPickleFormat()
    else:
        raise ValueError(
            f"{directory}: written with the custom format {fdoc['type']}; open it with "
            f"{description['class']}(directory, your_format) instead of load_export"
        )
    return getattr(storages, description["class"])(directory, fmt)


class StorageWriter(Writer):
    """Writes partition ``i`` as shard ``i`` of a stream or document storage."""

    kind = "storage"
    needs_schema = False
    raw_records = True

    def __init__(self, staging: Staging, options: Mapping[str, Any]):
        super().__init__(staging, options)
        self.storage = options["storage"]

    def sink(self, part: Partition, schema: Mapping[str, FieldSchema] | None) -> PartitionSink:
        staged = type(self.storage)(self.staging.path("data"), self.storage.format)
        return _ShardSink(staged, part.index)

    def write_sim_ids(self, sim_ids: np.ndarray, summaries: list[dict[str, Any]]) -> None:
        """``sim_ids.npy`` plus ``record_offsets.npy`` (row i = elements [off[i], off[i+1]))."""
        np.save(self.staging.path("data", "sim_ids.npy"), sim_ids)
        lengths = [n for s in summaries for n in s.get("record_lengths", [])]
        offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int64)
        np.save(self.staging.path("data", RECORD_OFFSETS), offsets)

    def manifest_extra(self) -> dict[str, Any]:
        """What ``export.json`` records about the storage."""
        return {"storage": describe_storage(self.storage)}

    def fields(self, seen: dict[str, Any]) -> dict[str, Any]:
        """Stream rows are what the format unpacks: a structured dtype's fields."""
        from guideloom.storage import StreamNumpyFormat

        if isinstance(self.storage.format, StreamNumpyFormat):
            dtype = np.dtype(self.storage.format.stream_dtype)
            if dtype.names:
                return {n: {"shape": None, "dtype": dtype[n].str} for n in dtype.names}
        return seen


class _ShardSink(PartitionSink):
    def __init__(self, storage: Any, shard: int):
        self._writer = storage.sync_writer()
        self._writer.create(shard)  # an empty partition still commits its shard: no gaps
        self._shard = shard
        self._lengths: list[int] = []

    def write(self, row: int, sim_id: Any, record: Any) -> None:
        before = self._writer.elements(self._shard)
        try:
            self._writer.append(self._shard, record)
        except (ValueError, TypeError) as exc:
            raise RecordValueError(
                f"experiment {sim_id}: the storage format cannot pack the record: {exc}",
                sim_id=sim_id, file=f"shard {self._shard}",
            ) from exc
        self._lengths.append(self._writer.elements(self._shard) - before)

    def close(self) -> int:
        self._writer.close()
        return 0

    def abort(self) -> None:
        self._writer.abort()

    def extra_summary(self) -> dict[str, Any]:
        return {"record_lengths": self._lengths}


class _StorageBackend(_Backend):
    """Rows of a storage export: documents, or each record's slice of the stream."""

    def __init__(self, root: str, manifest: dict[str, Any]):
        super().__init__(root, manifest)
        self.storage = reopen_storage(root, manifest["storage"])
        self._reader = self.storage.sync_reader()
        self._is_stream = manifest["storage"]["class"] != "DocumentStorage"
        if self._is_stream:
            self._offsets = np.load(os.path.join(root, RECORD_OFFSETS))

    def row(self, i: int, fields) -> dict[str, np.ndarray]:
        if self._is_stream:
            start, stop = int(self._offsets[i]), int(self._offsets[i + 1])
            value = self._reader.read(start, stop - start)
        else:
            value = self._reader.read(i)
        if not isinstance(value, Mapping):
            return {"value": value}
        return {f: np.asarray(value[f]) for f in fields if f in value}

    def batch(self, idx: np.ndarray, fields) -> dict[str, np.ndarray]:
        rows = [self.row(int(i), fields) for i in idx]
        out = {}
        for f in fields:
            shapes = {np.shape(r[f]) for r in rows}
            if len(shapes) > 1:
                raise ValueError(f"field {f!r} has variable lengths in this storage export; "
                                 "read rows with export[i] or train on windows with "
                                 "StatefulDataLoader.from_storage")
            out[f] = np.stack([r[f] for r in rows]) if rows else np.empty((0,))
        return out


register_backend("storage", _StorageBackend)


def export_to_storage(
    view: str | View,
    storage: Any,
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
) -> Path:
    """Export a view into a GuideLoom storage: one record per experiment, one shard per task.

    Args:
        storage: A :class:`~guideloom.StreamStorage`, :class:`~guideloom.DocumentStorage` or
            :class:`~guideloom.StreamWithMetaStorage`; its directory is the output.
        record_transform: Turns each record into what the storage format packs.
        (other arguments as in :func:`guideloom.export_to_numpy`)

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
    from guideloom.export.api import build_spec
    from guideloom.export.run import run_export

    spec = build_spec(view, "storage", storage.directory, data_dir=data_dir, dataset=dataset,
                      source=source, sim_ids=sim_ids, where=where, transforms=transforms,
                      record_transform=record_transform, partition_size=partition_size,
                      on_error=on_error, overwrite=overwrite, options={"storage": storage})
    return Path(run_export(spec, client=client, show_progress=show_progress).target)
