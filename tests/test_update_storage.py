"""Updating storage exports (issue 32): unchanged records are copied from the previous
generation's shards as their bytes (or a whole shard linked), the others packed anew, and the
result is the fresh full export of the new selection, shard file for shard file."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

import guideloom
from guideloom import (
    DocumentPickleFormat,
    DocumentStorage,
    StreamNumpyFormat,
    StreamStorage,
    StreamWithMetaStorage,
)
from guideloom.errors import IncompleteExportError, InjectedFault
from guideloom.formats import get_format
from guideloom.formats.checksums import verify_export
from guideloom.runtime.faults import FAULT_ENV, crash_at
from guideloom.testing.transforms import total_force_stream

ROOT = Path(__file__).resolve().parents[1]
STREAM_DTYPE = np.dtype([("force", "<f4"), ("doc", "<u4")])
VIEW = "force-curve"
PART = 5  # experiments per shard
BASE = list(range(20))  # the first generation: four full shards
KINDS = ("stream", "document", "meta")


class ForceRuns:
    """A stream-with-meta format: the total force, a run (payload ``"<id>:<k>"``) every 16
    elements, so records hold several runs each."""

    stream_dtype = np.dtype("<f4")

    def size(self, data: Any) -> int:
        return len(data["force"])

    def pack(self, data: Any) -> Any:
        for k in range(len(data["force"])):
            yield k // 16, f"{data['sim']}:{k // 16}".encode()
        return np.asarray(data["force"], dtype="<f4")

    def unpack(self, stream: np.ndarray, shards: Any, index: Any, payloads: Any) -> Any:
        return {"force": stream, "runs": [bytes(payloads[i]) for i in index]}


def force_record(rec: dict[str, Any]) -> dict[str, Any]:
    """The document and stream-with-meta record: the id and the total force."""
    return {"sim": int(rec["_sim_id"]),
            "force": np.asarray(rec["force_data"])[:, 7].astype(np.float32)}


def storage_of(kind: str, target: Path) -> Any:
    if kind == "stream":
        return StreamStorage(target, StreamNumpyFormat(STREAM_DTYPE))
    if kind == "document":
        return DocumentStorage(target, DocumentPickleFormat())
    return StreamWithMetaStorage(target, ForceRuns())


def export(kind: str, data: Path, target: Path, ids: list[int], update: bool,
           partition_size: int | None = PART) -> Any:
    """An export of ``ids`` (in that order) to ``target``: an update, or a full export."""
    transform = total_force_stream if kind == "stream" else force_record
    return guideloom.export.export(
        VIEW, target, kind="storage", format_options={"storage": storage_of(kind, target)},
        record_transform=transform, data_dir=data, sim_ids=ids, sim_ids_order="sim_ids",
        client="sync", partition_size=partition_size, update=update, overwrite=not update)


def records(kind: str, target: Path) -> list[Any]:
    """Each row's record as its storage reads it back: the stream slice's bytes, the encoded
    document, or the slice with its runs' payloads."""
    with storage_of(kind, target).sync_reader() as reader:
        return read_records(kind, reader, offsets_of(kind, target))


def offsets_of(kind: str, target: Path) -> np.ndarray | None:
    return None if kind == "document" else np.load(target / "record_offsets.npy")


def read_records(kind: str, reader: Any, offsets: np.ndarray | None) -> list[Any]:
    """:func:`records` through an open storage reader (``offsets``: the export's
    ``record_offsets.npy`` when the reader was opened)."""
    if offsets is None:
        return [reader.read_encoded(i)[0] for i in range(len(reader))]
    out = []
    for a, b in itertools.pairwise(offsets):
        value = reader.read_span(int(a), int(b - a))
        out.append(tuple(value[f].tobytes() for f in STREAM_DTYPE.names) if kind == "stream"
                   else (value["force"].tobytes(), value["runs"]))
    return out


def data_files(target: Path) -> dict[str, bytes]:
    """The export's files but ``export.json`` and ``croissant.json`` (their ids, times and
    generations differ)."""
    return {p.name: p.read_bytes() for p in sorted(target.iterdir())
            if p.name not in ("export.json", "croissant.json")}


def assert_same_as_fresh(kind: str, data: Path, target: Path, ids: list[int],
                         tmp_path: Path) -> None:
    """``target`` (an update) is what a full export of ``ids`` writes: the same shard files
    byte for byte, the same records in the same order, and it verifies."""
    fresh = tmp_path / "fresh"
    export(kind, data, fresh, ids, update=False)
    assert data_files(target) == data_files(fresh)
    assert records(kind, target) == records(kind, fresh)
    assert np.load(target / "sim_ids.npy").tolist() == ids
    assert verified(kind, target) == len(ids)
    mine, theirs = (json.loads((t / "export.json").read_text()) for t in (target, fresh))
    for key in ("count", "fields", "n_partitions", "sim_ids_sha256", "checksums", "storage"):
        assert mine[key] == theirs[key], key


def verified(kind: str, target: Path) -> int:
    """Rows ``verify`` checked (a custom format's export cannot be opened by ``load_export``:
    its checksums are checked as ``verify`` checks them)."""
    if kind != "meta":
        return guideloom.load_export(target, trust=True).verify().rows
    manifest = json.loads((target / "export.json").read_text())
    fmt = get_format("storage")
    return verify_export(str(target), manifest, fmt, np.load(target / "sim_ids.npy")).rows


@pytest.fixture(scope="module")
def data(small_loose) -> Path:
    """The session's 30 small loose experiments (read-only; copy it to change it)."""
    return small_loose


@pytest.fixture(scope="module")
def bases(data, tmp_path_factory) -> dict[str, Path]:
    """A first generation of :data:`BASE` per storage kind (copy it before updating it)."""
    out = {}
    for kind in KINDS:
        target = tmp_path_factory.mktemp(f"base-{kind}") / "out"
        export(kind, data, target, BASE, update=False)
        out[kind] = target
    return out


def first_generation(kind: str, bases: dict[str, Path], tmp_path: Path) -> Path:
    target = tmp_path / "out"
    shutil.copytree(bases[kind], target)
    return target


def decoded(result: Any) -> int:
    """Bytes the update's partitions decoded and transformed (carried records count none)."""
    return sum(s["bytes_decoded"] for s in result.summaries)


def carried(result: Any) -> int:
    return sum(s.get("carried", 0) for s in result.summaries)


def inodes(target: Path) -> dict[str, int]:
    return {p.name: p.stat().st_ino for p in target.glob("shard-*.gls")}


@pytest.mark.parametrize("kind", KINDS)
def test_added_at_the_end_links_the_unchanged_shards_and_packs_only_the_new(kind, data, bases,
                                                                           tmp_path):
    target = first_generation(kind, bases, tmp_path)
    before = inodes(target)
    old_records = records(kind, target)
    ids = list(range(27))
    result = export(kind, data, target, ids, update=True)
    assert result.update == {"added": 7, "removed": 0, "changed": 0, "carried": 20}
    after = inodes(target)
    assert {n: after[n] for n in before} == before  # shards 0-3 are the previous files
    assert carried(result) == 20
    assert decoded(result) > 0
    assert_same_as_fresh(kind, data, target, ids, tmp_path)
    assert records(kind, target)[:20] == old_records
    history = json.loads((target / "export.json").read_text())["generations"]
    assert [h["added"] for h in history] == [20, 7]
    assert history[-1]["carried"] == 20


def test_a_partly_filled_last_shard_is_copied_and_the_new_records_follow_it(data, tmp_path):
    target = tmp_path / "out"
    export("stream", data, target, BASE[:18], update=False)  # shard 3 holds 3 records
    before = inodes(target)
    ids = list(range(27))
    result = export("stream", data, target, ids, update=True)
    assert carried(result) == 18
    after = inodes(target)
    assert [n for n in sorted(before) if after[n] == before[n]] == [
        "shard-000000.gls", "shard-000001.gls", "shard-000002.gls"]  # shard 3 was rewritten
    assert_same_as_fresh("stream", data, target, ids, tmp_path)


def test_without_a_partition_size_an_update_keeps_the_shards_and_appends_new_ones(data,
                                                                                tmp_path):
    target = tmp_path / "out"
    first = export("stream", data, target, BASE, update=False, partition_size=None)
    size = first.manifest["partition_size"]
    before = inodes(target)
    ids = list(range(30))
    result = export("stream", data, target, ids, update=True, partition_size=None)
    assert result.manifest["partition_size"] == size  # not what the update's estimate says
    after = inodes(target)
    assert {n: after[n] for n in before} == before  # every previous shard kept, linked
    assert carried(result) == 20
    assert len(after) == -(-30 // size)
    fresh = tmp_path / "fresh"
    export("stream", data, fresh, ids, update=False, partition_size=size)
    assert data_files(target) == data_files(fresh)


def test_a_format_that_cannot_update_names_those_that_can(data, tmp_path):
    from guideloom.errors import UpdateRefusedError
    from guideloom.formats import format_kinds, register_format, unregister_format
    from tests.jsonl_format import JsonlFormat

    ours = JsonlFormat.kind not in format_kinds()
    if ours:
        register_format(JsonlFormat)
    try:
        def run(update: bool) -> Any:
            return guideloom.export.export(VIEW, tmp_path / "out", kind=JsonlFormat.kind,
                                           data_dir=data, sim_ids=[0], client="sync",
                                           update=update, overwrite=not update)

        run(update=False)
        with pytest.raises(UpdateRefusedError, match="update works for npy, npz, zarr and "
                                                     "storage exports"):
            run(update=True)
    finally:
        if ours:
            unregister_format(JsonlFormat.kind)


@pytest.mark.parametrize("kind", KINDS)
def test_removed_experiments_shift_the_rows_copied_across_shards(kind, data, bases, tmp_path):
    target = first_generation(kind, bases, tmp_path)
    old_records, old_offsets = records(kind, target), offsets_of(kind, target)
    old = storage_of(kind, target).sync_reader()  # opened on the first generation
    ids = [i for i in BASE if i not in (3, 12)]
    result = export(kind, data, target, ids, update=True)
    assert result.update == {"added": 0, "removed": 2, "changed": 0, "carried": 18}
    assert carried(result) == 18
    assert decoded(result) == 0
    assert_same_as_fresh(kind, data, target, ids, tmp_path)
    with old:  # still reads the previous generation, whose rows were all shifted since
        assert read_records(kind, old, old_offsets) == old_records
    assert records(kind, target) == [r for r, i in zip(old_records, BASE, strict=True)
                                     if i not in (3, 12)]


def change_member(data: Path, sim_id: int) -> None:
    """Double experiment ``sim_id``'s force data in place (its file's mtime moves on)."""
    path = data / "h5" / f"{sim_id:04d}.h5"
    stat = path.stat()
    with h5py.File(path, "r+") as fh:
        fh["force/data"][...] = fh["force/data"][...] * 2
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))


@pytest.mark.parametrize("kind", KINDS)
def test_a_changed_member_is_packed_anew_and_its_neighbours_copied(kind, data, tmp_path):
    copied = tmp_path / "data"
    shutil.copytree(data, copied)
    target = tmp_path / "out"
    export(kind, copied, target, BASE, update=False)
    old_records = records(kind, target)
    change_member(copied, 7)
    result = export(kind, copied, target, BASE, update=True)
    assert result.update == {"added": 0, "removed": 0, "changed": 1, "carried": 19}
    assert carried(result) == 19
    assert [s["index"] for s in result.summaries
                                      if s["bytes_decoded"]] == [1]
    assert_same_as_fresh(kind, copied, target, BASE, tmp_path)
    new_records = records(kind, target)
    assert [k for k in range(20) if new_records[k] != old_records[k]] == [7]


@pytest.mark.parametrize("kind", KINDS)
def test_a_reordered_selection_is_the_fresh_export_of_that_order(kind, data, bases, tmp_path):
    target = first_generation(kind, bases, tmp_path)
    ids = [*range(10, 20), *range(0, 10)][::-1]
    result = export(kind, data, target, ids, update=True)
    assert result.update == {"added": 0, "removed": 0, "changed": 0, "carried": 20}
    assert carried(result) == 20
    assert decoded(result) == 0
    assert_same_as_fresh(kind, data, target, ids, tmp_path)


def test_an_updated_stream_export_trains_with_the_loader(data, bases, tmp_path):
    pytest.importorskip("torch")
    from guideloom.loader import StatefulDataLoader

    target = first_generation("stream", bases, tmp_path)
    ids = [*BASE[:8], 25, *BASE[8:]]  # inserted in the middle: shards 2-4 copied across
    export("stream", data, target, ids, update=True)
    fresh = tmp_path / "fresh"
    export("stream", data, fresh, ids, update=False)

    def windows(root: Path) -> list[dict[str, np.ndarray]]:
        storage = StreamStorage(root, StreamNumpyFormat(STREAM_DTYPE))
        loader = StatefulDataLoader.from_storage(storage, sequence_length=16, batch_size=4)
        return [{k: np.asarray(v) for k, v in batch.items()} for batch in loader]

    got, want = windows(target), windows(fresh)
    assert len(got) == len(want) > 100
    for a, b in zip(got, want, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    assert got[0]["doc"][0].tolist() == [0] * 16


# --- crashes: the update stopped at every step of the executor, then run again ----------------
POINTS = tuple(p for p in get_format("storage").every_fault_point())


@pytest.mark.parametrize("point", POINTS)
def test_an_update_stopped_at_any_step_is_completed_exactly_by_the_next(point, data, bases,
                                                                        tmp_path):
    target = first_generation("stream", bases, tmp_path)
    old = guideloom.load_export(target)
    old_records = records("stream", target)
    ids = [i for i in range(24) if i != 6]  # removed, added: copies, links and new records
    with pytest.raises(InjectedFault) as stopped, crash_at(point):
        export("stream", data, target, ids, update=True)
    assert stopped.value.point == point, f"the fault point {point!r} was not reached"
    # the previous generation: still read by the reader opened before, and complete or absent
    assert old.sim_ids.tolist() == BASE
    assert old[5]["doc"].tolist()[0] == 5
    try:
        now = guideloom.load_export(target)
    except IncompleteExportError:
        assert point == "target-moved-aside"
        assert not target.exists()
    else:
        assert now.sim_ids.tolist() in (BASE, ids)
        assert now.verify().rows == len(now)
        if now.sim_ids.tolist() == BASE:
            assert records("stream", target) == old_records
    export("stream", data, target, ids, update=True)
    assert not list(tmp_path.glob(".out.guideloom-*staging"))  # the staging area is gone
    assert_same_as_fresh("stream", data, target, ids, tmp_path)
    assert old.sim_ids.tolist() == BASE
    assert old[19]["doc"].tolist()[0] == 19
    old.close()
    generations = json.loads((target / "export.json").read_text())["generations"]
    assert [g["generation"] for g in generations] == [1, 2]


RUN_UPDATE = """
import sys
from pathlib import Path
from tests.test_update_storage import export
kind, data, target, ids = sys.argv[1:]
export(kind, Path(data), Path(target), [int(i) for i in ids.split(",")], update=True)
"""


@pytest.mark.parametrize("point", ["partition-marked", "target-moved-aside", "data-moved"])
def test_an_update_killed_for_real_is_completed_by_the_next_run(point, data, bases, tmp_path):
    """A real SIGKILL in a fresh interpreter, then a rerun there: the fresh full export."""
    target = first_generation("stream", bases, tmp_path)
    ids = [i for i in range(24) if i != 6]
    env = {**os.environ, "PYTHONPATH": str(ROOT), FAULT_ENV: point}
    args = [sys.executable, "-c", RUN_UPDATE, "stream", str(data), str(target),
            ",".join(map(str, ids))]
    killed = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120,
                            cwd=tmp_path)
    assert killed.returncode == -9, killed.stderr
    try:
        assert guideloom.load_export(target).sim_ids.tolist() in (BASE, ids)
    except IncompleteExportError:
        assert point == "target-moved-aside"
        assert not target.exists()
    del env[FAULT_ENV]
    done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert_same_as_fresh("stream", data, target, ids, tmp_path)
