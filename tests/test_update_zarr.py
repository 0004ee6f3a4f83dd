"""Updating a zarr export (issue 32): the chunks of unchanged rows are carried as files (hard
links here, the same inode as the previous generation's chunk) and never re-encoded; only the
chunks holding new, changed or moved rows are written. Every update equals a fresh full export
of the new selection row for row, verifies, and survives a crash at any step of the executor
(the previous generation stays readable; the rerun completes the update exactly)."""

from __future__ import annotations

import json
import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import fsspec
import h5py
import numpy as np
import pytest
import zarr

import guideloom
from guideloom.errors import IncompleteExportError, InjectedFault
from guideloom.export.spec import FieldSchema
from guideloom.export.staging import Staging
from guideloom.formats.carry import previous_rows
from guideloom.formats.generations import RETIRED_SUFFIX
from guideloom.formats.zarr import ZarrFormat
from guideloom.runtime.faults import crash_at
from tests.test_update import can_exchange

VIEW = "pointcloud-op10"
FIELDS = ("pointcloud_op10_luminescence", "pointcloud_op10_z")
PARTITION = 4  # the first export's: chunks of 4 rows (small rows: one chunk per partition)
BIG_ROW = 131072  # float32 values: 512 KiB, a chunk per row (rows renamed into place)
CRASH_POINTS = tuple(p for p in ZarrFormat.every_fault_point()
                     if p not in ZarrFormat.skip_fault_points)


def has_pointcloud(row) -> bool:
    return bool(row["has_pointcloud"])


def big_rows(record) -> dict[str, np.ndarray]:
    """Rows of 512 KiB: zarr stores each in a chunk of its own."""
    return {"z": np.resize(np.asarray(record["pointcloud_op10_z"], dtype="<f4"), BIG_ROW)}


def skip_multiples_of_7(record) -> dict[str, np.ndarray]:
    """The point cloud, but experiments 7, 14, 21 and 28 fail (skipped with on_error="skip")."""
    if record["_sim_id"] and record["_sim_id"] % 7 == 0:
        raise RuntimeError(f"cannot handle {record['_sim_id']}")
    return {f: record[f] for f in FIELDS}


def export(data: Path, target: Path, **options) -> guideloom.Export:
    guideloom.export_to_zarr(VIEW, target, data_dir=data, where=has_pointcloud,
                             client="sync", **options)
    return guideloom.load_export(target)


@pytest.fixture(scope="module")
def data(small_loose) -> Path:
    """The session's 30 small loose experiments (read-only; copy it to change it)."""
    return small_loose


@pytest.fixture(scope="module")
def full(data, tmp_path_factory) -> guideloom.Export:
    """A fresh full export of every experiment with a point cloud (default partitioning)."""
    return export(data, tmp_path_factory.mktemp("full") / "full.zarr")


@pytest.fixture(scope="module")
def ids(full) -> list[int]:
    return full.sim_ids.tolist()


def assert_same_rows(got: guideloom.Export, want: guideloom.Export) -> None:
    assert got.sim_ids.tolist() == want.sim_ids.tolist()
    for i in range(len(want)):
        row, expected = got[i], want[i]
        assert sorted(row) == sorted(expected)
        for name, value in expected.items():
            np.testing.assert_array_equal(row[name], value, err_msg=f"row {i} {name}")


def assert_reads(export_: guideloom.Export, rows: list[dict[str, np.ndarray]]) -> None:
    """``export_`` reads ``rows``, row for row."""
    assert len(export_) == len(rows)
    for i, row in enumerate(rows):
        for name, value in row.items():
            np.testing.assert_array_equal(export_[i][name], value, err_msg=f"row {i} {name}")


def chunk_inodes(root: Path) -> dict[str, int]:
    """``{"field/c/j/0": inode}`` of every chunk file of the field arrays."""
    found = {}
    for field in [p.name for p in root.iterdir() if p.is_dir() and p.name != "sim_ids"]:
        for path in (root / field / "c").rglob("*"):
            if path.is_file():
                found[str(path.relative_to(root))] = path.stat().st_ino
    return found


def carried_as_files(root: Path) -> int:
    """Chunk files the last update carried (linked or copied), over all fields."""
    manifest = json.loads((root / "export.json").read_text())
    counts = manifest.get("zarr_carried") or {}
    return sum(n for per_field in counts.values() for n in per_field.values())


def kept_inodes(before: dict[str, int], after: dict[str, int]) -> set[str]:
    """The chunk files of the update that are the previous generation's (same inode; the
    previous files exist until the update is published, so no new file can have one)."""
    old = set(before.values())
    return {key for key, inode in after.items() if inode in old}


def last_generation(root: Path) -> dict:
    return json.loads((root / "export.json").read_text())["generations"][-1]


def test_rows_added_at_the_end_carry_the_whole_chunks_before_them(data, full, ids, tmp_path):
    target = tmp_path / "out.zarr"
    export(data, target, sim_ids=ids[:17], partition_size=PARTITION)
    before = chunk_inodes(target)
    old = guideloom.load_export(target)
    old_rows = [old[i] for i in range(len(old))]
    updated = export(data, target, update=True)
    assert_same_rows(updated, full)
    assert updated.verify().rows == len(ids)
    assert updated.manifest["partition_size"] == PARTITION  # the previous generation's
    # rows 0..15 are the 4 whole chunks of the previous generation: the same files
    kept = {f"{f}/c/{j}/0" for f in FIELDS for j in range(4)}
    assert kept_inodes(before, chunk_inodes(target)) == kept
    assert carried_as_files(target) == len(kept)
    entry = last_generation(target)
    assert (entry["added"], entry["carried"], entry["removed"], entry["changed"]) == (9, 17, 0, 0)
    with old:  # opened on the previous generation: it keeps reading that one
        assert_reads(old, old_rows)


@pytest.mark.parametrize(("removed", "kept_chunks"), [
    (slice(9, 10), {0: 0, 1: 1}),  # one row: the rows after it move, their chunks rewritten
    (slice(8, 12), {0: 0, 1: 1, 3: 2, 4: 3, 5: 4, 6: 5}),  # a whole chunk: every other one kept
], ids=["one-row", "whole-chunk"])
def test_removed_rows_leave_the_chunks_that_do_not_move(data, ids, tmp_path, removed,
                                                        kept_chunks):
    target = tmp_path / "out.zarr"
    export(data, target, partition_size=PARTITION)
    before = chunk_inodes(target)
    left = ids[:removed.start] + ids[removed.stop:]
    updated = export(data, target, sim_ids=left, update=True)
    assert_same_rows(updated, export(data, tmp_path / "fresh.zarr", sim_ids=left))
    assert updated.verify().rows == len(left)
    after = chunk_inodes(target)
    moved = {f"{f}/c/{new}/0": before[f"{f}/c/{old}/0"] for f in FIELDS
             for old, new in kept_chunks.items()}
    assert {key: after[key] for key in moved} == moved
    assert kept_inodes(before, after) == set(moved)
    assert carried_as_files(target) == len(moved)
    assert last_generation(target)["removed"] == removed.stop - removed.start


def test_a_changed_member_rewrites_only_its_chunk(data, ids, tmp_path):
    copy = tmp_path / "data"
    shutil.copytree(data, copy)
    target = tmp_path / "out.zarr"
    export(copy, target, partition_size=PARTITION)
    before = chunk_inodes(target)
    was = guideloom.load_export(target)[5]["pointcloud_op10_z"]
    changed = ids[5]  # row 5: chunk 1
    with h5py.File(copy / "h5" / f"{changed:04d}.h5", "r+") as f:
        z = f["pointcloud/op10/z"]
        z[...] = np.asarray(z[...]) * 2 + 1
    updated = export(copy, target, update=True)
    fresh = export(copy, tmp_path / "fresh.zarr")
    assert_same_rows(updated, fresh)
    assert updated.verify().rows == len(ids)
    assert not np.array_equal(updated[5]["pointcloud_op10_z"], was)  # read again
    kept = {f"{f}/c/{j}/0" for f in FIELDS for j in (0, 2, 3, 4, 5, 6)}
    assert kept_inodes(before, chunk_inodes(target)) == kept
    assert carried_as_files(target) == len(kept)
    assert (last_generation(target)["changed"], last_generation(target)["carried"]) == (1, 25)


@pytest.mark.parametrize("order", ["blocks-swapped", "reversed"])
def test_reordered_rows_carry_the_chunks_that_stay_whole(data, ids, tmp_path, order):
    target = tmp_path / "out.zarr"
    export(data, target, partition_size=PARTITION)
    before = chunk_inodes(target)
    new = ids[4:8] + ids[:4] + ids[8:] if order == "blocks-swapped" else ids[::-1]
    updated = export(data, target, sim_ids=new, sim_ids_order="sim_ids", update=True)
    assert updated.sim_ids.tolist() == new
    assert_same_rows(updated, export(data, tmp_path / "fresh.zarr", sim_ids=new,
                                     sim_ids_order="sim_ids"))
    assert updated.verify().rows == len(ids)
    kept = kept_inodes(before, chunk_inodes(target))
    if order == "reversed":  # no chunk keeps its rows in order: every row re-encoded
        assert kept == set()
        assert carried_as_files(target) == 0
    else:
        assert kept == {f"{f}/c/{j}/0" for f in FIELDS for j in range(7)}
        for f in FIELDS:
            assert chunk_inodes(target)[f"{f}/c/0/0"] == before[f"{f}/c/1/0"]


def test_another_partition_size_carries_every_row_by_rewriting_it(data, full, ids, tmp_path):
    target = tmp_path / "out.zarr"
    export(data, target, sim_ids=ids[:17], partition_size=PARTITION)
    before = chunk_inodes(target)
    updated = export(data, target, update=True, partition_size=6)  # chunks of 6 rows
    assert_same_rows(updated, full)
    assert updated.verify().rows == len(ids)
    assert kept_inodes(before, chunk_inodes(target)) == set()
    assert carried_as_files(target) == 0


@pytest.mark.filterwarnings("ignore::guideloom.errors.SkippedDataWarning")
def test_an_update_of_an_export_with_skipped_experiments_closes_the_same_gaps(data, ids,
                                                                             tmp_path):
    """Skipped experiments are read again (and skipped again): the rows after them are placed
    off the partitions' chunk boundaries, carried by rewriting, and compacted as in a full
    export."""
    options = {"record_transform": skip_multiples_of_7, "on_error": "skip"}
    target = tmp_path / "out.zarr"
    export(data, target, sim_ids=ids[:17], partition_size=PARTITION, **options)
    updated = export(data, target, update=True, **options)
    fresh = export(data, tmp_path / "fresh.zarr", **options)
    assert_same_rows(updated, fresh)
    assert 14 not in updated.sim_ids.tolist()
    assert len(updated) == len(ids) - 3
    assert updated.verify().rows == len(ids) - 3
    assert last_generation(target)["skipped"] == 3


def test_rows_of_a_chunk_each_are_carried_as_their_files(data, ids, tmp_path):
    target = tmp_path / "out.zarr"
    export(data, target, sim_ids=ids[:17], record_transform=big_rows)
    before = chunk_inodes(target)
    assert len(before) == 17  # one chunk per row
    updated = export(data, target, update=True, record_transform=big_rows)
    fresh = export(data, tmp_path / "fresh.zarr", record_transform=big_rows)
    assert_same_rows(updated, fresh)
    assert updated.verify().rows == len(ids)
    assert kept_inodes(before, chunk_inodes(target)) == {f"z/c/{j}/0" for j in range(17)}
    assert carried_as_files(target) == 17


def test_an_update_to_a_store_url_copies_the_chunk_bytes(data, full, ids):
    target = "memory://update-zarr/out.zarr"
    try:
        guideloom.export_to_zarr(VIEW, target, data_dir=data, where=has_pointcloud,
                                 client="sync", sim_ids=ids[:17], partition_size=PARTITION)
        guideloom.export_to_zarr(VIEW, target, data_dir=data, where=has_pointcloud,
                                 client="sync", update=True)
        updated = guideloom.load_export(target)
        assert_same_rows(updated, full)
        assert updated.verify().rows == len(ids)
        assert updated.manifest["zarr_carried"] == {"copied": dict.fromkeys(FIELDS, 4),
                                                    "linked": {}}
    finally:
        fsspec.filesystem("memory").rm("/update-zarr", recursive=True)


@pytest.mark.parametrize("point", CRASH_POINTS)
def test_an_update_stopped_at_any_step_is_completed_exactly_by_the_next_run(
        data, full, ids, tmp_path, point):
    target = tmp_path / "out.zarr"
    export(data, target, sim_ids=ids[:17], partition_size=PARTITION)
    before = chunk_inodes(target)
    old = guideloom.load_export(target)  # a reader of the previous generation, kept open
    old_rows = [old[i] for i in range(len(old))]
    with pytest.raises(InjectedFault) as stopped, crash_at(point):
        export(data, target, update=True)
    assert stopped.value.point == point, f"the fault point {point!r} was not reached"
    if point == "target-moved-aside" and not can_exchange(tmp_path / "probe"):
        with pytest.raises(IncompleteExportError):  # between two renames: nothing there
            guideloom.load_export(target)
    elif point in ("target-moved-aside", "data-moved"):  # exchanged: the new one is there
        with guideloom.load_export(target) as again:
            assert again.sim_ids.tolist() == ids
            assert again.verify().rows == len(ids)
    else:  # the previous generation, untouched
        with guideloom.load_export(target) as again:
            assert again.sim_ids.tolist() == ids[:17]
            assert again.verify().rows == 17
    assert_reads(old, old_rows)
    updated = export(data, target, update=True)
    assert_same_rows(updated, full)
    assert updated.verify().rows == len(ids)
    assert_reads(old, old_rows)  # still the previous generation's rows
    old.close()
    left = [p.name for p in tmp_path.iterdir() if p.name.startswith(".out.zarr")]
    assert all(name.endswith(RETIRED_SUFFIX) for name in left), left  # no staging area
    kept = {f"{f}/c/{j}/0" for f in FIELDS for j in range(4)}
    assert kept_inodes(before, chunk_inodes(target)) == kept
    assert carried_as_files(target) == len(kept)
    entry = last_generation(target)
    assert (entry["generation"], entry["added"], entry["carried"]) == (2, 9, 17)


def test_linked_chunks_leave_the_previous_generation_unchanged(data, ids, tmp_path):
    """The update's files share inodes with the previous generation's while it runs: a kill
    after the partitions leaves the previous export bit for bit as it was."""
    target = tmp_path / "out.zarr"
    export(data, target, sim_ids=ids[:17], partition_size=PARTITION)
    sums = {str(p.relative_to(target)): p.read_bytes() for p in target.rglob("*") if p.is_file()}
    with pytest.raises(InjectedFault), crash_at("rows-finalized"):
        export(data, target, update=True)
    assert {str(p.relative_to(target)): p.read_bytes()
            for p in target.rglob("*") if p.is_file()} == sums
    assert os.stat(target / FIELDS[0] / "c" / "0" / "0").st_nlink == 2  # shared, not copied


@dataclass(frozen=True)
class Rows:
    """A partition's rows (what a sink is opened on)."""

    index: int
    start: int
    stop: int


def test_chunks_carried_before_the_partitions_before_them_finished_go_to_planned_rows(
        data, ids, tmp_path):
    """A partition that cannot know yet where its rows go (the one before it is still
    running, as on a cluster) carries its whole chunks into the planned rows; finalize renames
    them into place, still the previous generation's files."""
    previous_root = tmp_path / "previous.zarr"
    export(data, previous_root, partition_size=PARTITION)
    manifest = json.loads((previous_root / "export.json").read_text())
    previous = previous_rows(str(previous_root), manifest["export_id"])
    staging = Staging.for_target(tmp_path / "out.zarr")
    staging.start({"identity": "carried-by-hand"})
    writer = ZarrFormat(staging, {"compressor": "lz4"})
    schema = {f: FieldSchema(tuple(s["shape"]), s["dtype"]) for f, s in manifest["fields"].items()}
    n = len(ids)
    writer.allocate(n, schema, PARTITION)
    order = [1, 0, *range(2, math.ceil(n / PARTITION))]  # partition 1 opened before 0 is done
    for index in order:
        part = Rows(index, index * PARTITION, min(n, (index + 1) * PARTITION))
        sink = writer.sink(part, schema)
        sink.carry(part.start, part.start, part.stop - part.start, previous)
        sink.close()
        staging.write_marker(index, {**sink.extra_summary(), "index": index,
                                     "start": part.start, "skipped": [],
                                     "written": ids[part.start:part.stop]})
    assert "zarr_placed" not in staging.marker(1)  # its rows went to their planned places
    assert "zarr_placed" in staging.marker(2)
    writer.finalize(None)
    before = chunk_inodes(previous_root)
    done = zarr.open_group(staging.path("data"), mode="r")
    for field in FIELDS:
        np.testing.assert_array_equal(done[field][...],
                                      zarr.open_group(str(previous_root), mode="r")[field][...])
        for j in range(math.ceil(n / PARTITION)):
            key = f"{field}/c/{j}/0"
            assert os.stat(Path(staging.path("data")) / key).st_ino == before[key], key
    assert writer.carried == {"linked": dict.fromkeys(FIELDS, 7), "copied": {}}
    staging.discard()
