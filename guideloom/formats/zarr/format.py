"""The ``zarr`` format plugin: its options, and the writer and reader hooks that tie the
other modules together."""

from __future__ import annotations

import math
import os
import posixpath
import shutil
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from guideloom.errors import CorruptExportError, permission_denied
from guideloom.formats.base import ExportFormat, FormatReader, Part, PartitionSink, Schema, fail
from guideloom.formats.checksums import digest
from guideloom.formats.durable import fsync_tree
from guideloom.formats.layout import SIM_IDS_ARRAY, check_output_name
from guideloom.formats.options import option
from guideloom.formats.zarr.carry import CARRIED_KEY
from guideloom.formats.zarr.checks import (
    ALL_CHUNKS_KEY,
    ARRAY_ENTRY,
    ZARR_GROUP_FILE,
    array_checked,
    check_chunk_files,
    open_group_checked,
)
from guideloom.formats.zarr.chunking import WRITE_EVERY_CHUNK, dimension_names, rows_per_chunk
from guideloom.formats.zarr.compression import DEFAULT_COMPRESSOR, ZARR_COMPRESSORS, zarr_compressor
from guideloom.formats.zarr.finalize import (
    CHECKED_KEY,
    check_placements,
    place_rows,
    read_job,
    remove_unclaimed,
    stage_markers,
    update_job,
)
from guideloom.formats.zarr.placement import PLACED_KEY
from guideloom.formats.zarr.reader import ZarrReader
from guideloom.formats.zarr.sink import ZarrSink
from guideloom.formats.zarr.store import member_array, zarr_store
from guideloom.formats.zarr.tally import FINALIZE_KEY, ChunkTally


@dataclass(frozen=True)
class ZarrOptions:
    """Options of a ``zarr`` export."""

    compressor: str | None = option(DEFAULT_COMPRESSOR, enum=list(ZARR_COMPRESSORS),
                                    description="the chunks' codec (None or 'none': raw)")


class ZarrFormat(ExportFormat):
    """A zarr v3 group: one array per alias plus ``sim_ids``."""

    kind = "zarr"
    description = "a zarr v3 group, one array per field chunked along rows (local or fsspec URL)"
    local_only = False
    updatable = True  # whole chunks carried as files, the other rows rewritten (ZarrSink.carry)
    keeps_partitions = True  # chunks follow the partitions: whole chunks carry as files
    Options = ZarrOptions
    compressions = ZARR_COMPRESSORS  # [output] compression in a workflow file
    workflow_table = False
    skip_fault_points = ("compacted-chunk",)  # closing the gaps of skipped rows

    @classmethod
    def workflow_options(cls, output: Mapping[str, Any], context: Any) -> dict[str, Any]:
        compression = output.get("compression", cls.default_compression())
        return {"compressor": None if compression == "none" else compression}
    #: Called as ``(chunks done, chunks in all)`` while :meth:`finalize` completes the arrays
    #: (the run's monitor sets it: the finalize phase's progress on the page and terminal).
    finalize_progress: Callable[[int, int], None] | None = None
    tally: ChunkTally | None = None
    carried: dict[str, dict[str, int]] | None = None  # an update: chunk files carried

    def _rows_url(self) -> str:
        return self.stage.url_of("rows")

    def allocate(self, n_rows: int, schema: Mapping[str, Schema], partition_size: int) -> None:
        import zarr

        try:
            group = zarr.open_group(zarr_store(self._rows_url()), mode="a")
            for alias in schema:
                if alias in group:
                    group[alias]  # resumed job: its metadata must read
        except ValueError:  # metadata a power loss cut short: no marker can need these rows
            if not self.stage.is_local:
                raise
            shutil.rmtree(self.stage.path("rows"))
            os.makedirs(self.stage.path("rows"))
            group = zarr.open_group(zarr_store(self._rows_url()), mode="a")
        compressor = zarr_compressor(self.options.get("compressor", DEFAULT_COMPRESSOR))
        data = zarr.open_group(zarr_store(self.stage.url_of("data")), mode="a",
                               use_consolidated=False)
        for alias, fs in schema.items():
            check_output_name(alias, "zarr export")
            if alias in group:
                continue  # resumed job
            row_bytes = int(np.prod(fs.shape, dtype=np.int64)) * np.dtype(fs.dtype).itemsize
            rpc = rows_per_chunk(partition_size, row_bytes)
            for where in (group, *((data,) if rpc > 1 else ())):  # data: rows placed there
                if alias in where:
                    continue
                where.create_array(
                    alias, shape=(n_rows, *fs.shape), chunks=(rpc, *fs.shape),
                    dtype=np.dtype(fs.dtype), compressors=compressor, fill_value=0,
                    config=WRITE_EVERY_CHUNK,
                    dimension_names=dimension_names(alias, 1 + len(fs.shape)),
                )
        if self.stage.is_local:  # the metadata outlives a power loss before the first marker
            fsync_tree(self.stage.path("rows"))
            fsync_tree(self.stage.path("data"))

    def sink(self, part: Part, schema: Mapping[str, Schema] | None) -> PartitionSink:
        assert schema is not None
        return ZarrSink(self.stage, part, schema)

    def finalize(self, keep: np.ndarray | None) -> None:
        """Complete each alias's array in ``data/``: rows the partitions placed stay, the
        others are moved or assembled chunk by chunk (see :func:`place_rows`), resuming where
        an interrupted run stopped. Without skips or placed rows the planned array is renamed.
        """
        import zarr

        rows = zarr.open_group(zarr_store(self._rows_url()), mode="a", use_consolidated=False)
        data = zarr.open_group(zarr_store(self.stage.url_of("data")), mode="a",
                               use_consolidated=False)
        markers = stage_markers(self.stage)
        aliases = sorted(rows.array_keys())
        planned = {a: member_array(rows, a, self._rows_url()) for a in aliases}
        n_kept = (int(keep.sum()) if keep is not None
                  else planned[aliases[0]].shape[0] if aliases else 0)
        tally = self.tally = ChunkTally(
            sum(math.ceil(n_kept / planned[a].chunks[0]) for a in aliases),
            self.finalize_progress)
        check_placements(self.stage, markers)
        self.carried = carried_chunks(markers)
        placed = {a: {i: m[PLACED_KEY] for i, m in markers.items()
                      if a in m.get(PLACED_KEY, {}).get("chunks", {})} for a in aliases}
        job = read_job(self.stage)
        if not job.get(CHECKED_KEY):  # once: chunk files no marker claims are from killed tasks
            for alias in aliases:
                if alias in data:
                    remove_unclaimed(self.stage, alias, data, placed[alias])
            update_job(self.stage, **{CHECKED_KEY: True})
        for alias in aliases:
            if not placed[alias] and (keep is None or keep.all()):
                if alias in data:  # unused (nothing placed), or an older run's leftover
                    del data[alias]
                n_chunks = math.ceil(n_kept / planned[alias].chunks[0])
                self.stage.move(self.stage.path("rows", alias), self.stage.path("data", alias))
                tally.add("moved", n_chunks)
                continue
            kept = np.arange(planned[alias].shape[0]) if keep is None else np.flatnonzero(keep)
            place_rows(self.stage, alias, planned[alias], data, kept, markers, placed[alias],
                       tally)
            del rows[alias]  # complete in data/: the planned rows are no longer needed

    def write_sim_ids(self, sim_ids: np.ndarray, summaries: Sequence[Mapping[str, Any]]) -> None:
        """Write ``sim_ids`` (the coordinate of every array's first dimension) and the
        group's consolidated metadata, so ``xarray.open_zarr`` sees named dimensions."""
        import zarr

        store = zarr_store(self.stage.url_of("data"))
        group = zarr.open_group(store, mode="a", use_consolidated=False)
        if SIM_IDS_ARRAY in group:
            del group[SIM_IDS_ARRAY]
        group.create_array(SIM_IDS_ARRAY, data=sim_ids, chunks=(max(1, len(sim_ids)),),
                           config=WRITE_EVERY_CHUNK, dimension_names=(SIM_IDS_ARRAY,))
        with warnings.catch_warnings():  # zarr: "not part of the v3 specification" (yet)
            warnings.simplefilter("ignore", UserWarning)
            zarr.consolidate_metadata(store)

    def manifest_extra(self) -> dict[str, Any]:
        extra: dict[str, Any] = {ALL_CHUNKS_KEY: True}
        if self.tally is not None:  # how finalize found and completed the chunks
            extra[FINALIZE_KEY] = dict(self.tally.counts)
        if self.carried:  # an update: the chunks carried as files from the previous one
            extra[CARRIED_KEY] = self.carried
        return extra

    @classmethod
    def open_reader(cls, root: str, manifest: Mapping[str, Any],
                    trust: bool = False) -> FormatReader:
        return ZarrReader(root, manifest)  # nothing in it runs code: trust changes nothing

    @classmethod
    def check_published(cls, root: str, manifest: Mapping[str, Any]) -> None:
        group = open_group_checked(root)
        count = int(manifest["count"])
        for alias, schema in manifest["fields"].items():
            arr = array_checked(root, group, alias)
            if tuple(arr.shape) != (count, *schema["shape"]):
                fail(root, alias, f"shape {tuple(arr.shape)} but export.json records "
                                  f"{(count, *schema['shape'])}")
            if arr.dtype != np.dtype(schema["dtype"]):
                fail(root, alias, f"dtype {arr.dtype.str} but export.json records "
                                  f"{schema['dtype']}")
        array_checked(root, group, SIM_IDS_ARRAY)
        if manifest.get(ALL_CHUNKS_KEY):  # written with every chunk stored: list them
            for name in (*manifest["fields"], SIM_IDS_ARRAY):
                check_chunk_files(root, name, group[name])
        super().check_published(root, manifest)

    @classmethod
    def described_files(cls, manifest: Mapping[str, Any]) -> dict[str, str]:
        return {**{a: a for a in manifest["fields"]}, "sim_ids": SIM_IDS_ARRAY}

    @classmethod
    def foreign_entries(cls, fs: Any, root: str, manifest: Mapping[str, Any]) -> list[str]:
        """Anything but ``zarr.json``, the shared files and, inside each array's folder,
        ``zarr.json`` and numbered chunk files under ``c/``."""
        arrays = set(cls.described_files(manifest).values())
        foreign = []
        for name in super().foreign_entries(fs, root, manifest):
            if name == ZARR_GROUP_FILE:
                continue
            if name.rstrip("/") not in arrays or not name.endswith("/"):
                foreign.append(name)
                continue
            folder = posixpath.join(root, name)
            for path in fs.find(folder, withdirs=False):
                rel = posixpath.relpath(str(path), folder.rstrip("/"))
                if not ARRAY_ENTRY.match(rel):
                    foreign.append(f"{name}{rel}")
        return sorted(foreign)

    @classmethod
    def unit_digests(cls, root: str, manifest: Mapping[str, Any], group: str,
                     n_units: int) -> Iterator[tuple[str, str, int]]:
        """Group ``{alias}``: one checksum per decoded row, read one chunk at a time."""
        import zarr

        if group not in manifest["fields"]:
            yield from super().unit_digests(root, manifest, group, n_units)
            return
        arr = member_array(zarr.open_group(zarr_store(root, strict=True), mode="r",
                                           use_consolidated=False), group, root)
        step = max(1, arr.chunks[0])
        for start in range(0, arr.shape[0], step):
            try:
                block = np.asarray(arr[start:start + step])
            except CorruptExportError:
                raise
            except PermissionError as exc:  # unreadable is not damaged
                raise permission_denied(exc) from exc
            except Exception as exc:
                fail(root, group, f"rows {start}-{min(start + step, arr.shape[0]) - 1}: the "
                                  f"chunk cannot be decoded ({type(exc).__name__}: {exc})")
            for i in range(len(block)):
                yield group, digest(block[i]), block[i].nbytes


def carried_chunks(markers: Mapping[int, Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """The chunk files the partitions of an update carried from the previous generation:
    ``{"linked": {alias: n}, "copied": {alias: n}}`` summed over ``markers``."""
    total: dict[str, dict[str, int]] = {}
    for marker in markers.values():
        for how, per_alias in (marker.get(CARRIED_KEY) or {}).items():
            into = total.setdefault(how, {})
            for alias, n in per_alias.items():
                into[alias] = into.get(alias, 0) + int(n)
    return total
