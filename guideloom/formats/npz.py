"""``npz``: one ``<experiment_id>.npz`` per experiment (shapes may vary), plus ``sim_ids.npy``.

Each file is written under a temporary name and renamed when complete; text values are stored as
numpy string arrays and read back with ``allow_pickle=False``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from guideloom.formats import own_files
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
from guideloom.formats.options import option

TMP_MARK = ".tmp-"
CHECKSUM_GROUP = "*.npz"  # one checksum per experiment file, over the whole file


def npz_file(sim_id: Any) -> str:
    """The file of one experiment: ``<id>.npz``."""
    return f"{sim_id}.npz"


@dataclass(frozen=True)
class NpzOptions:
    """Options of an ``npz`` export."""

    compressed: bool = option(False, description="deflate each file (np.savez_compressed)")


class NpzFormat(ExportFormat):
    """One ``.npz`` per experiment."""

    kind = "npz"
    description = "one .npz file per experiment (shapes may vary, text allowed)"
    Options = NpzOptions
    compressions = ("none", "deflate")  # [output] compression in a workflow file
    workflow_table = False
    needs_schema = False
    fixed_keys = True  # a reader reads every field of every row
    allow_text = True
    copies_records = True  # the file is written when write returns
    updatable = True  # an unchanged experiment's file is linked into the new generation
    file_group = CHECKSUM_GROUP

    @classmethod
    def workflow_options(cls, output: Mapping[str, Any], context: WorkflowContext
                         ) -> dict[str, Any]:
        return {"compressed": output.get("compression", "none") == "deflate"}

    def sink(self, part: Part, schema: Mapping[str, Schema] | None) -> PartitionSink:
        return NpzSink(self.stage.path("data"), bool(self.settings.compressed))

    def finalize(self, keep: np.ndarray | None) -> None:
        """Remove temporary files that interrupted writes left (they are never published)."""
        folder = self.stage.path("data")
        for name in os.listdir(folder):
            if name.startswith(".") and TMP_MARK in name:
                os.unlink(os.path.join(folder, name))

    @classmethod
    def open_reader(cls, root: str, manifest: Mapping[str, Any],
                    trust: bool = False) -> FormatReader:
        return NpzReader(root, manifest)  # nothing in it runs code: trust changes nothing

    @classmethod
    def check_published(cls, root: str, manifest: Mapping[str, Any]) -> None:
        super().check_published(root, manifest)
        present = set(os.listdir(root))
        for sim_id in cls.open_reader(root, manifest).sim_ids():
            if npz_file(sim_id) not in present:
                fail(root, npz_file(sim_id), "missing")

    @classmethod
    def described_files(cls, manifest: Mapping[str, Any]) -> dict[str, str]:
        return {**dict.fromkeys(manifest["fields"], "*.npz"), "sim_ids": SIM_IDS_FILE}

    @classmethod
    def own_entries(cls, root: str, manifest: Mapping[str, Any]) -> list[str]:
        """One ``<id>.npz`` per published id (not any ``*.npz``) and the shared files."""
        shared = [p for p in super().own_entries(root, manifest) if p != "*.npz"]
        return [*shared, *(npz_file(i) for i in cls.open_reader(root, manifest).sim_ids())]

    @classmethod
    def group_files(cls, root: str, manifest: Mapping[str, Any], n_units: int) -> Iterable[str]:
        """Group ``*.npz``: one checksum per experiment file, in row order."""
        return (npz_file(sim_id) for sim_id in cls.open_reader(root, manifest).sim_ids())


class NpzSink(PartitionSink):
    """Writes one ``.npz`` per record (temporary name, fsync, rename)."""

    def __init__(self, folder: str, compressed: bool):
        self._folder, self._compressed, self._bytes = folder, compressed, 0
        self._sums = RowDigests()

    def write(self, row: int, sim_id: Any, arrays: Mapping[str, np.ndarray]) -> None:
        final = os.path.join(self._folder, npz_file(sim_id))
        tmp = os.path.join(self._folder, f".{npz_file(sim_id)}{TMP_MARK}{os.getpid()}")
        save = np.savez_compressed if self._compressed else np.savez
        try:
            with open(tmp, "wb") as fh:
                members: dict[str, Any] = dict(arrays)  # member name -> array
                save(fh, **members)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, final)
        except OSError as exc:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise OSError(exc.errno, f"experiment {sim_id}: cannot write {final} "
                                     f"({exc.strerror or exc})") from exc
        self._bytes += os.path.getsize(final)
        self._sums.add_file(CHECKSUM_GROUP, row, final)  # just written: read from the cache

    def carry(self, row: int, old_row: int, count: int, previous: PreviousRows) -> None:
        """Link each unchanged experiment's file of the previous generation into this one
        (a hard link: no byte is copied; a copy where the file system has none). Only the
        export's own regular files are carried, never through a link
        (:func:`~guideloom.formats.own_files.link_file`)."""
        for k in range(count):
            sim_id = previous.sim_ids[old_row + k]
            src = os.path.join(previous.root, npz_file(sim_id))  # for messages
            final = os.path.join(self._folder, npz_file(sim_id))
            tmp = os.path.join(self._folder, f".{npz_file(sim_id)}{TMP_MARK}{os.getpid()}")
            try:
                if os.path.lexists(tmp):
                    os.unlink(tmp)
                own_files.link_file(previous.root, npz_file(sim_id), tmp)  # never a link
                os.replace(tmp, final)
            except OSError as exc:
                raise OSError(exc.errno, f"experiment {sim_id}: cannot carry {src} into "
                                         f"{final} ({exc.strerror or exc})") from exc
            self._bytes += os.path.getsize(final)
            known = previous.digest(CHECKSUM_GROUP, old_row + k)
            if known is None:
                self._sums.add_file(CHECKSUM_GROUP, row + k, final)
            else:
                self._sums.add_known(CHECKSUM_GROUP, row + k, known)

    def close(self) -> int:
        return self._bytes

    def extra_summary(self) -> dict[str, Any]:
        """The checksum of every file written (see :mod:`guideloom.formats.checksums`)."""
        return self._sums.summary()


class NpzReader(FormatReader):
    """Rows loaded from each experiment's file."""

    reads_lazily = True

    def __init__(self, root: str, manifest: Mapping[str, Any]):
        super().__init__(root, manifest)
        self._ids: np.ndarray | None = None

    def _load(self, i: int, fields: Sequence[str]) -> dict[str, np.ndarray]:
        if self._ids is None:
            self._ids = self.sim_ids()
        path = os.path.join(self.root, npz_file(self._ids[i]))
        with np.load(path, allow_pickle=False) as npz:
            return {f: npz[f] for f in fields}

    def row(self, i: int, fields: Sequence[str]) -> dict[str, np.ndarray]:
        return self._load(i, fields)

    def batch(self, idx: np.ndarray, fields: Sequence[str]) -> dict[str, np.ndarray]:
        return stack_rows([self._load(int(i), fields) for i in idx], fields,
                          "in this npz export; read rows one by one with export[i]")


def stack_rows(rows: Sequence[Mapping[str, np.ndarray]], fields: Sequence[str],
               hint: str) -> dict[str, np.ndarray]:
    """Stack rows per field; a field of varying shape is a ValueError ending with ``hint``."""
    out = {}
    for f in fields:
        shapes = {np.shape(r[f]) for r in rows}
        if len(shapes) > 1:
            raise ValueError(f"field {f!r} has variable shapes {sorted(shapes)} {hint}")
        out[f] = np.stack([r[f] for r in rows]) if rows else np.empty((0,))
    return out
