"""A third-party export format, written only against guideloom's public format contract.

``jsonl``: each partition's rows as JSON lines in ``part-NNNNN.jsonl`` (one object per row,
``{field: nested list}``), plus ``sim_ids.npy``. The tests run it through the conformance kit
and, installed as an entry-point plugin, through ``guideloom run`` from a workflow file that
names it with its options; nothing in the guideloom package names it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from guideloom.formats import ExportFormat, FormatReader, PartitionSink
from guideloom.formats.base import Part, Schema, fail
from guideloom.formats.checksums import RowDigests
from guideloom.formats.layout import SIM_IDS_FILE
from guideloom.formats.options import option
from guideloom.runtime.faults import fault_point

GROUP = "part-*.jsonl"  # one checksum per partition file
MOVED = "jsonl-part-moved"  # this format's own fault point: a part file moved into data/
LABEL_KEY = "jsonl_label"


def part_name(index: int) -> str:
    """The file of partition ``index``."""
    return f"part-{index:05d}.jsonl"


@dataclass(frozen=True)
class JsonlOptions:
    """Options of a ``jsonl`` export."""

    compact: bool = option(True, description="no spaces after the JSON separators")
    label: str = option("", description="a label recorded in export.json")


class JsonlFormat(ExportFormat):
    """JSON lines, one file per partition."""

    kind = "jsonl"
    description = "one JSON line per row, one file per partition"
    Options = JsonlOptions
    fault_points = (MOVED,)
    copies_records = True  # a row is turned into lists when written
    file_group = GROUP

    def sink(self, part: Part, schema: Mapping[str, Schema] | None) -> PartitionSink:
        return JsonlSink(self.stage.path("rows", part_name(part.index)), part.index,
                         self.settings.compact)

    def finalize(self, keep: np.ndarray | None) -> None:
        """Move the part files into ``data/`` (skipped rows were never written)."""
        for name in sorted(os.listdir(self.stage.path("rows"))):
            if not name.endswith(".jsonl"):
                continue
            os.replace(self.stage.path("rows", name), self.stage.path("data", name))
            fault_point(MOVED)

    def manifest_extra(self) -> dict[str, Any]:
        return {LABEL_KEY: self.settings.label}

    @classmethod
    def open_reader(cls, root: str, manifest: Mapping[str, Any],
                    trust: bool = False) -> FormatReader:
        return JsonlReader(root, manifest)

    @classmethod
    def check_published(cls, root: str, manifest: Mapping[str, Any]) -> None:
        lines = 0
        for name in cls.group_files(root, manifest, int(manifest["n_partitions"])):
            try:
                with open(os.path.join(root, name), "rb") as fh:
                    lines += sum(1 for _ in fh)
            except FileNotFoundError:
                fail(root, name, "missing")
        if lines != int(manifest["count"]):
            fail(root, GROUP, f"{lines} lines but export.json records {manifest['count']} rows")
        super().check_published(root, manifest)

    @classmethod
    def described_files(cls, manifest: Mapping[str, Any]) -> dict[str, str]:
        return {**dict.fromkeys(manifest["fields"], GROUP), "sim_ids": SIM_IDS_FILE}

    @classmethod
    def group_files(cls, root: str, manifest: Mapping[str, Any], n_units: int) -> Iterable[str]:
        return (part_name(i) for i in range(n_units))


class JsonlSink(PartitionSink):
    """Collects the partition's lines; ``close`` writes the file (temporary name, fsync,
    rename), so a re-run replaces it whole."""

    def __init__(self, path: str, index: int, compact: bool):
        self._path, self._index = path, index
        self._separators = (",", ":") if compact else (", ", ": ")
        self._lines: list[str] = []
        self._sums = RowDigests()

    def write(self, row: int, sim_id: Any, arrays: Mapping[str, np.ndarray]) -> None:
        doc = {alias: np.asarray(arr).tolist() for alias, arr in arrays.items()}
        self._lines.append(json.dumps(doc, separators=self._separators) + "\n")

    def close(self) -> int:
        blob = "".join(self._lines).encode()
        tmp = f"{self._path}.tmp-{os.getpid()}"
        with open(tmp, "wb") as fh:
            fh.write(blob)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self._path)
        self._sums.add_file(GROUP, self._index, self._path, rows=len(self._lines))
        return len(blob)

    def abort(self) -> None:
        self._lines = []

    def extra_summary(self) -> dict[str, Any]:
        return self._sums.summary()


class JsonlReader(FormatReader):
    """Every line parsed at open (a small test format)."""

    def __init__(self, root: str, manifest: Mapping[str, Any]):
        super().__init__(root, manifest)
        self._rows: list[dict[str, Any]] = []
        for name in JsonlFormat.group_files(root, manifest, int(manifest["n_partitions"])):
            try:
                with open(os.path.join(root, name), encoding="utf-8") as fh:
                    self._rows += [json.loads(line) for line in fh]
            except FileNotFoundError:
                fail(root, name, "missing")
            except ValueError as exc:  # a damaged byte: not UTF-8, or not JSON
                fail(root, name, f"not valid JSON lines ({type(exc).__name__}: {exc})")
        self._fields = manifest["fields"]

    def row(self, i: int, fields: Sequence[str]) -> dict[str, np.ndarray]:
        row = self._rows[i]
        return {f: np.asarray(row[f], dtype=self._fields[f]["dtype"]).reshape(
            self._fields[f]["shape"]) for f in fields}

    def batch(self, idx: np.ndarray, fields: Sequence[str]) -> dict[str, np.ndarray]:
        rows = [self.row(int(i), fields) for i in idx]
        return {f: np.stack([r[f] for r in rows]) for f in fields}
