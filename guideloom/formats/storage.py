"""``storage``: a GuideLoom storage (stream, document or stream-with-meta); partition = shard.

Shard number = partition index, so shards are numbered without gaps and no shard is ever written
by two tasks. The record transform produces what the storage format packs (for
:class:`~guideloom.storage.StreamNumpyFormat`, a dict of equal-length 1-D arrays). Besides the
shards the export holds ``sim_ids.npy`` and, for streams, ``record_offsets.npy`` (row ``i`` is
stream elements ``[off[i], off[i+1])``). An update (``update=True``) writes every shard again,
copying the unchanged records from the previous generation's shards as their bytes, or
linking a previous shard that a new one equals whole (:mod:`guideloom.formats.storage_carry`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from guideloom.errors import RecordValueError, UntrustedExportError
from guideloom.formats.base import (
    ExportFormat,
    FormatReader,
    Part,
    PartitionSink,
    Schema,
    WorkflowContext,
    fail,
)
from guideloom.formats.carry import PreviousRows
from guideloom.formats.checksums import RowDigests
from guideloom.formats.layout import SIM_IDS_FILE
from guideloom.formats.npz import stack_rows
from guideloom.formats.options import option
from guideloom.formats.storage_carry import ShardCarrier

RECORD_OFFSETS = "record_offsets.npy"
CHECKSUM_GROUP = "shard-*.gls"  # one checksum per shard file (a unit holding the shard's rows)


def describe_storage(storage: Any) -> dict[str, Any]:
    """How ``load_export`` can reopen the storage: its class and, for built-ins, its format."""
    from guideloom.storage import DocumentPickleFormat, StreamNumpyFormat
    from guideloom.storage.shards import dtype_to_json

    fmt = storage.format
    if isinstance(fmt, StreamNumpyFormat):
        fdoc: dict[str, Any] = {"type": "StreamNumpyFormat",
                                "dtype": dtype_to_json(np.dtype(fmt.stream_dtype))}
    elif isinstance(fmt, DocumentPickleFormat):
        fdoc = {"type": "DocumentPickleFormat"}
    else:
        fdoc = {"type": f"{type(fmt).__module__}:{type(fmt).__qualname__}"}
    return {"class": type(storage).__name__, "format": fdoc}


PICKLE_FORMATS = frozenset({"DocumentPickleFormat"})
BUILT_IN_FORMATS = frozenset({"StreamNumpyFormat", *PICKLE_FORMATS})  # load_export reopens them


def needs_trust(manifest: Mapping[str, Any]) -> bool:
    """Whether reading the rows of this export unpickles (runs code its author chose)."""
    storage = manifest.get("storage")
    return isinstance(storage, Mapping) and storage.get("format", {}).get("type") in PICKLE_FORMATS


def untrusted_message(root: str) -> str:
    """Why an export's rows are not read without ``trust=True``, and how to opt in."""
    return (f"{root}: this export stores its rows pickled (DocumentPickleFormat); unpickling "
            "runs code chosen by whoever wrote the export. Pass trust=True "
            "(load_export(path, trust=True), StatefulDataLoader.from_export(path, trust=True)) "
            "only for an export you or someone you trust wrote; `guideloom inspect` and "
            "`guideloom verify` check it without unpickling")


class SealedPickleFormat:
    """Stands in for :class:`~guideloom.storage.DocumentPickleFormat` in an untrusted export:
    the shards open and their bytes can be checked, but no document is ever unpickled."""

    def __init__(self, root: str) -> None:
        self.root = root

    def pack(self, data: Any) -> bytes:
        """Never called: sealed storages are only read."""
        raise UntrustedExportError(untrusted_message(self.root))

    def unpack(self, encoded: bytes, shard: int) -> Any:
        """Refuse: unpickling would run the export author's code."""
        raise UntrustedExportError(untrusted_message(self.root))


def reopen_storage(directory: str, description: Mapping[str, Any], trust: bool = False) -> Any:
    """Rebuild a storage object for ``directory`` from :func:`describe_storage` output.

    A pickled format is reopened as a :class:`SealedPickleFormat` unless ``trust`` is true.
    """
    from guideloom import storage as storages
    from guideloom.storage.shards import dtype_from_json

    fdoc = description["format"]
    if fdoc["type"] == "StreamNumpyFormat":
        fmt: Any = storages.StreamNumpyFormat(dtype_from_json(fdoc["dtype"]))
    elif fdoc["type"] == "DocumentPickleFormat":
        fmt = storages.DocumentPickleFormat() if trust else SealedPickleFormat(directory)
    else:
        raise ValueError(
            f"{directory}: written with the custom format {fdoc['type']}; open it with "
            f"{description['class']}(directory, your_format) instead of load_export"
        )
    return getattr(storages, description["class"])(directory, fmt)


@dataclass(frozen=True)
class StorageOptions:
    """Options of a ``storage`` export."""

    storage: Any = option(description="the GuideLoom storage the shards are written to")


class StorageFormat(ExportFormat):
    """Partition ``i`` becomes shard ``i`` of the storage given as option ``storage``."""

    kind = "storage"
    description = "a GuideLoom storage (stream, document or stream-with-meta), one shard per task"
    needs_schema = False
    raw_records = True
    file_group = CHECKSUM_GROUP
    Options = StorageOptions
    compressions = None  # [output] compression is not checked for storages (nor used)
    workflow_table = True  # [output.storage]: class and format of the storage
    updatable = True  # carried records are copied from the previous shards (or linked)
    keeps_partitions = True  # shard = partition: an update keeps the shards' size

    @classmethod
    def table_schema(cls) -> dict[str, Any]:
        """``[output.storage]`` describes the storage object (see
        :mod:`guideloom.formats.storage_table`)."""
        from guideloom.formats.storage_table import TABLE_SCHEMA

        return TABLE_SCHEMA

    @classmethod
    def workflow_options(cls, output: Mapping[str, Any], context: WorkflowContext
                         ) -> dict[str, Any]:
        from guideloom.formats.storage_table import build_storage

        return {"storage": build_storage(output[cls.kind], context)}

    def __init__(self, stage: Any, options: Mapping[str, Any]):
        super().__init__(stage, options)
        self.storage = options["storage"]

    def sink(self, part: Part, schema: Mapping[str, Schema] | None) -> PartitionSink:
        staged = type(self.storage)(self.stage.path("data"), self.storage.format)
        return ShardSink(staged, part.index)

    def write_sim_ids(self, sim_ids: np.ndarray, summaries: Sequence[Mapping[str, Any]]) -> None:
        """``sim_ids.npy`` plus ``record_offsets.npy``."""
        np.save(self.stage.path("data", SIM_IDS_FILE), sim_ids)
        lengths = [n for s in summaries for n in s.get("record_lengths", [])]
        offsets = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int64)
        np.save(self.stage.path("data", RECORD_OFFSETS), offsets)

    def manifest_extra(self) -> dict[str, Any]:
        return {"storage": describe_storage(self.storage)}

    def checksummed_files(self) -> list[str]:
        return [RECORD_OFFSETS]

    def user_objects(self) -> list[Any]:
        return [self.storage.format]

    def fields(self, seen: dict[str, Any]) -> dict[str, Any]:
        """Stream rows are what the format unpacks: a structured dtype's fields."""
        from guideloom.storage import StreamNumpyFormat

        if isinstance(self.storage.format, StreamNumpyFormat):
            dtype = np.dtype(self.storage.format.stream_dtype)
            if dtype.names:
                return {n: {"shape": None, "dtype": dtype[n].str} for n in dtype.names}
        return seen

    @classmethod
    def open_reader(cls, root: str, manifest: Mapping[str, Any],
                    trust: bool = False) -> FormatReader:
        return StorageReader(root, manifest, trust)

    @classmethod
    def check_published(cls, root: str, manifest: Mapping[str, Any]) -> None:
        from guideloom.storage.shards import shard_name

        if isinstance(manifest.get("n_partitions"), int):  # one shard per partition
            listed = {shard_name(i) for i in range(manifest["n_partitions"])}
            present = {n for n in os.listdir(root) if n.startswith("shard-")}
            for name in sorted(present - listed):
                fail(root, name, f"a shard export.json does not list (it lists "
                                 f"{len(listed)}); something added it")
            for name in sorted(listed - present):
                fail(root, name, "missing")
        reopen_storage(root, manifest["storage"])  # a custom format: says how to open it
        super().check_published(root, manifest)  # opens the storage: its shards are checked
        if manifest["storage"]["class"] != "DocumentStorage":
            try:
                offsets = np.load(os.path.join(root, RECORD_OFFSETS))
            except FileNotFoundError:
                fail(root, RECORD_OFFSETS, "missing")
            if len(offsets) != int(manifest["count"]) + 1:
                fail(root, RECORD_OFFSETS, f"{len(offsets)} offsets for {manifest['count']} rows")

    @classmethod
    def described_files(cls, manifest: Mapping[str, Any]) -> dict[str, str]:
        return {**dict.fromkeys(manifest["fields"], "shard-*"), "sim_ids": SIM_IDS_FILE}

    @classmethod
    def own_entries(cls, root: str, manifest: Mapping[str, Any]) -> list[str]:
        """Shards, ``record_offsets.npy`` and the shared files."""
        shared = [p for p in super().own_entries(root, manifest) if p != "shard-*"]
        return [*shared, CHECKSUM_GROUP, RECORD_OFFSETS]

    @classmethod
    def group_files(cls, root: str, manifest: Mapping[str, Any], n_units: int) -> Iterable[str]:
        """Group ``shard-*.gls``: one checksum per shard file, shard 0 first."""
        from guideloom.storage.shards import shard_name

        return (shard_name(shard) for shard in range(n_units))


class ShardSink(PartitionSink):
    """Appends each record to the partition's shard; an update's unchanged records are copied
    from the previous generation's shards (:mod:`guideloom.formats.storage_carry`)."""

    def __init__(self, storage: Any, shard: int):
        self._storage = storage
        self._writer = storage.sync_writer()
        self._writer.create(shard)  # an empty partition still commits its shard: no gaps
        self._shard = shard
        self._lengths: list[int] = []
        self._sums = RowDigests()
        self._carrier: ShardCarrier | None = None

    def write(self, row: int, sim_id: Any, record: Any) -> None:
        if self._carrier is not None:
            self._carrier.settle()  # a previous shard carried whole is followed by more rows
        before = self._writer.elements(self._shard)
        try:
            self._writer.append(self._shard, record)
        except (ValueError, TypeError) as exc:
            raise RecordValueError(
                f"experiment {sim_id}: the storage format cannot pack the record: {exc}",
                sim_id=sim_id, file=f"shard {self._shard}",
            ) from exc
        self._lengths.append(self._writer.elements(self._shard) - before)

    def carry(self, row: int, old_row: int, count: int, previous: PreviousRows) -> None:
        """Copy the previous generation's records ``old_row ..`` into this shard as the bytes
        they are there (no transform, no ``pack``); a shard that is exactly one previous shard
        is linked instead (at :meth:`close`)."""
        if self._carrier is None:
            self._carrier = ShardCarrier(self._writer, self._shard, previous)
        self._lengths.extend(self._carrier.carry(old_row, count, fresh=not self._lengths))

    def close(self) -> int:
        from guideloom.storage.shards import shard_name

        path = os.path.join(self._storage.directory, shard_name(self._shard))
        carrier, self._carrier = self._carrier, None
        try:
            if carrier is not None and carrier.whole is not None:
                self._writer.abort()  # nothing of its own: the previous shard is this one
                old = carrier.link(Path(self._storage.directory))
                known = carrier.previous.unit_digest(CHECKSUM_GROUP, old)
                if known is not None:
                    self._sums.add_known(CHECKSUM_GROUP, self._shard, known,
                                         rows=len(self._lengths))
                    return 0
            else:
                self._writer.close()
        finally:
            if carrier is not None:
                carrier.close()
        self._sums.add_file(CHECKSUM_GROUP, self._shard, path, rows=len(self._lengths))
        return 0

    def abort(self) -> None:
        self._writer.abort()
        if self._carrier is not None:
            self._carrier.close()
            self._carrier = None

    def extra_summary(self) -> dict[str, Any]:
        return {"record_lengths": self._lengths, **self._sums.summary()}


class StorageReader(FormatReader):
    """Rows of a storage export: documents, or each record's slice of the stream."""

    def __init__(self, root: str, manifest: Mapping[str, Any], trust: bool = False):
        super().__init__(root, manifest)
        self._is_stream = manifest["storage"]["class"] != "DocumentStorage"
        self.storage: Any = None
        self._reader: Any = None
        if manifest["storage"]["format"]["type"] not in BUILT_IN_FORMATS:
            return  # only its ids are read here (an update's plan); rows need the format
        self.storage = reopen_storage(root, manifest["storage"], trust)
        self._reader = self.storage.sync_reader()  # the shards are opened (and checked) now
        if self._is_stream:
            self._offsets = np.load(os.path.join(root, RECORD_OFFSETS))

    def row(self, i: int, fields: Sequence[str]) -> dict[str, np.ndarray]:
        if self._reader is None:  # a custom format: says how to open the storage instead
            reopen_storage(self.root, self.manifest["storage"])
        if self._is_stream:
            start, stop = int(self._offsets[i]), int(self._offsets[i + 1])
            value = self._reader.read_span(start, stop - start)
        else:
            value = self._reader.read(i)
        if not isinstance(value, Mapping):
            return {"value": value}
        return {f: np.asarray(value[f]) for f in fields if f in value}

    def batch(self, idx: np.ndarray, fields: Sequence[str]) -> dict[str, np.ndarray]:
        return stack_rows([self.row(int(i), fields) for i in idx], fields,
                          "in this storage export; read rows with export[i] or train on "
                          "windows with StatefulDataLoader.from_storage")
