"""zarr exports with skipped experiments: the gaps close chunk by chunk (renamed when a chunk
moves whole), a rerun after a kill in that phase redoes only the chunks left and starts no
cluster, and the published group opens in xarray with named dimensions indexed by sim id."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import guideloom
from guideloom.errors import SkippedDataWarning
from guideloom.runtime.faults import FAULT_ENV
from tests import export_helpers as helpers
from tests.child_processes import start_interruptible

ROOT = Path(__file__).resolve().parents[1]
IDS = list(range(1, 24))  # 7, 14 and 21 fail: skipped
GOOD = [i for i in IDS if i % 7]

RUN = """
import logging
import sys
import guideloom
from tests import export_helpers

logging.basicConfig(level=logging.INFO, format="%(message)s")  # the library logs (issue 24)

data, target, transform, client = sys.argv[1:5]
guideloom.export_to_zarr("force-curve", target, data_dir=data,
                         sim_ids=[int(i) for i in sys.argv[5].split(",")], client=client,
                         partition_size=4, on_error="skip",
                         record_transform=getattr(export_helpers, transform))
"""


def run(data: Path, target: Path, transform: str, client: str = "sync",
        fault: str | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(FAULT_ENV, None)
    if fault:
        env[FAULT_ENV] = fault
    return subprocess.run([sys.executable, "-c", RUN, str(data), str(target), transform, client,
                           ",".join(map(str, IDS))], env=env, capture_output=True, text=True,
                          timeout=300, cwd=target.parent)


def expected(data: Path, transform) -> dict[int, dict[str, np.ndarray]]:
    rows = {}
    for rec in guideloom.streaming.iter_view("force-curve", data_dir=data, sim_ids=GOOD):
        rows[rec["_sim_id"]] = transform(rec)
    return rows


@pytest.mark.fast_case("fail_on_multiples_of_7")
@pytest.mark.parametrize("transform", ["fail_on_multiples_of_7",
                                       "big_rows_failing_on_multiples_of_7"])
def test_skipped_rows_leave_no_gap_and_every_row_is_its_experiments(demo_zip, tmp_path,
                                                                    transform):
    fn = getattr(helpers, transform)
    with pytest.warns(SkippedDataWarning, match="3 experiment"):
        out = guideloom.export_to_zarr("force-curve", tmp_path / "o.zarr", data_dir=demo_zip,
                                       sim_ids=IDS, client="sync", partition_size=4,
                                       on_error="skip", record_transform=fn)
    export = guideloom.load_export(out)
    assert export.sim_ids.tolist() == GOOD
    want = expected(demo_zip, fn)
    for i, sim in enumerate(GOOD):
        for field, value in export[i].items():
            if field in want[sim]:
                np.testing.assert_array_equal(value, want[sim][field])
    assert export.verify().line()


def chunk_inodes(array_dir: Path) -> dict[str, int]:
    return {str(p.relative_to(array_dir)): p.stat().st_ino
            for p in array_dir.rglob("*") if p.is_file() and p.name != "zarr.json"}


def test_small_rows_are_written_where_they_belong_so_no_chunk_is_compacted(demo_zip,
                                                                           tmp_path):
    """Rows of several per chunk, partitions in order: each partition learns from the markers
    before it where its rows go, so finalize rewrites no chunk (a kill there never comes)."""
    reference = tmp_path / "ref" / "o.zarr"
    reference.parent.mkdir()
    assert run(demo_zip, reference, "fail_on_multiples_of_7").returncode == 0
    target = tmp_path / "run" / "o.zarr"
    target.parent.mkdir()
    done = run(demo_zip, target, "fail_on_multiples_of_7", fault="compacted-chunk")
    assert done.returncode == 0, done.stderr  # no chunk was moved or rewritten at finalize
    ours, theirs = guideloom.load_export(target), guideloom.load_export(reference)
    assert ours.sim_ids.tolist() == GOOD
    np.testing.assert_array_equal(ours[:len(ours)]["force"], theirs[:len(theirs)]["force"])
    assert ours.verify().line()


def test_partitions_finished_out_of_order_are_placed_or_assembled_at_finalize(demo_zip,
                                                                             tmp_path):
    """Partitions run last to first (none can know where its rows go but the first), then
    first to last: finalize assembles what was not placed, and the rows equal an export of
    the good experiments."""
    import zarr

    from guideloom.export.api import build_spec
    from guideloom.export.partition import probe_schema, run_partition
    from guideloom.export.plan import plan_export, select_experiments
    from guideloom.export.staging import Staging
    from guideloom.formats.zarr import PLACED_KEY, ZarrFormat

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SkippedDataWarning)
        want = guideloom.export_to_zarr("force-curve", tmp_path / "good.zarr",
                                        data_dir=demo_zip, sim_ids=GOOD, client="sync",
                                        record_transform=helpers.fail_on_multiples_of_7)
    for order in (reversed, list):
        target = tmp_path / f"{order.__name__}.zarr"
        spec = build_spec("force-curve", "zarr", target, data_dir=demo_zip, sim_ids=IDS,
                          record_transform=helpers.fail_on_multiples_of_7, partition_size=4,
                          on_error="skip")
        staging = Staging.for_target(target)
        plan = plan_export(spec, 1, select_experiments(spec))
        staging.start({"identity": plan.identity, "partition_size": plan.partition_size})
        writer = ZarrFormat(staging, {})
        schema = probe_schema(spec, plan.selection.locations[:4], plan.selection.rows[:4])
        writer.allocate(len(plan.selection.locations), schema, plan.partition_size)
        summaries = [run_partition(spec, writer, schema, part)
                     for part in order(plan.partitions)]
        placed = [s["index"] for s in summaries if PLACED_KEY in s]
        assert placed == ([0] if order is reversed else list(range(len(plan.partitions))))
        keep = np.isin(plan.selection.ids, GOOD)
        writer.finalize(keep)
        got = zarr.open_group(staging.path("data"), mode="r")["force"][...]
        np.testing.assert_array_equal(got, guideloom.load_export(want)[:len(GOOD)]["force"])


@pytest.mark.parametrize(("transform", "alias"), [("big_rows_failing_on_multiples_of_7", "scan")])
def test_a_kill_while_closing_gaps_resumes_at_the_next_chunk_without_a_cluster(
        demo_zip, tmp_path, transform, alias):
    reference = tmp_path / "ref" / "o.zarr"
    reference.parent.mkdir()
    assert run(demo_zip, reference, transform).returncode == 0
    target = tmp_path / "run" / "o.zarr"
    target.parent.mkdir()
    killed = run(demo_zip, target, transform, fault="compacted-chunk")
    assert killed.returncode == -9, killed.stderr
    staged = target.parent / ".o.zarr.guideloom-staging" / "data" / alias
    done_before = chunk_inodes(staged)
    assert len(done_before) >= 1  # the kill came after the first chunk
    rerun = run(demo_zip, target, transform, client="local:2")
    assert rerun.returncode == 0, rerun.stderr
    assert "running in-process: only the finalize of an interrupted run is left" in rerun.stderr
    assert "dashboard" not in rerun.stderr.lower()
    after = chunk_inodes(target / alias)
    assert {k: after[k] for k in done_before} == done_before  # not written again
    ours, theirs = guideloom.load_export(target), guideloom.load_export(reference)
    assert ours.sim_ids.tolist() == theirs.sim_ids.tolist() == GOOD
    for field in ours.fields:
        np.testing.assert_array_equal(ours[:len(ours)][field], theirs[:len(theirs)][field])
    assert ours.verify().line()


def test_xarray_opens_a_zarr_export_with_named_dimensions_indexed_by_sim_id(demo_zip,
                                                                            tmp_path):
    xarray = pytest.importorskip("xarray")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SkippedDataWarning)
        out = guideloom.export_to_zarr("force-curve", tmp_path / "o.zarr", data_dir=demo_zip,
                                       sim_ids=IDS, client="sync", partition_size=4,
                                       on_error="skip",
                                       record_transform=helpers.fail_on_multiples_of_7)
    ds = xarray.open_zarr(out)  # consolidated metadata: no warning, one read
    assert ds["force"].dims == ("sim_ids", "force_dim1", "force_dim2")
    assert ds["sim"].dims == ("sim_ids",)
    assert ds.indexes["sim_ids"].tolist() == GOOD
    export = guideloom.load_export(out)
    np.testing.assert_array_equal(ds["force"].sel(sim_ids=15).values,
                                  export.by_sim_id(15)["force"])


@pytest.mark.parametrize("idx", [[3, 4, 5, 6], [9], [0, 2, 11], [5, 1, 5, 0], [], [11, 10]])
def test_zarr_batches_and_slices_return_the_rows_asked_for(demo_zip, tmp_path, idx):
    out = guideloom.export_to_zarr("force-curve", tmp_path / "o.zarr", data_dir=demo_zip,
                                   sim_ids=list(range(12)), client="sync", partition_size=4,
                                   record_transform=helpers.first_rows)
    export = guideloom.load_export(out)
    got = export.batch(idx)["force"]
    assert got.shape == (len(idx), 100, 8)
    for k, i in enumerate(idx):
        np.testing.assert_array_equal(got[k], export[i]["force"])
    np.testing.assert_array_equal(export[2:7]["force"], export.batch([2, 3, 4, 5, 6])["force"])


def _hold_open(fifo: Path, opened: list[int]) -> None:
    opened.append(os.open(fifo, os.O_WRONLY))  # returns once the run holds the pause


def test_ctrl_c_while_closing_gaps_then_a_rerun_does_only_the_chunks_left(demo_zip, tmp_path):
    """A real process group (``python run.py``) paused after the first chunk moved at
    finalize gets SIGINT; the rerun, asked for a cluster, starts none and completes only the
    chunks left, and the export equals a clean one."""
    import signal
    import threading

    from guideloom.runtime.faults import PAUSE_ENV, PAUSE_FIFO_ENV

    script = tmp_path / "run.py"
    script.write_text(RUN)
    reference = tmp_path / "ref" / "o.zarr"
    reference.parent.mkdir()
    assert run(demo_zip, reference, "big_rows_failing_on_multiples_of_7").returncode == 0
    target = tmp_path / "run" / "o.zarr"
    target.parent.mkdir()
    fifo = tmp_path / "pause"
    os.mkfifo(fifo)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GUIDELOOM_")}
    env.update({"PYTHONPATH": str(ROOT), PAUSE_ENV: "compacted-chunk",
                PAUSE_FIFO_ENV: str(fifo)})
    args = [str(demo_zip), str(target), "big_rows_failing_on_multiples_of_7", "sync",
            ",".join(map(str, IDS))]
    proc = start_interruptible([sys.executable, str(script), *args], cwd=target.parent, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    opened: list[int] = []
    opener = threading.Thread(target=_hold_open, args=(fifo, opened), daemon=True)
    opener.start()
    try:
        opener.join(120)
        assert opened, "the run never reached the gap closing"
        staged = target.parent / ".o.zarr.guideloom-staging" / "data" / "scan"
        done_before = chunk_inodes(staged)
        assert len(done_before) == 1  # paused right after the first chunk
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in its terminal sends
        _, err = proc.communicate(timeout=120)
    finally:
        if opened:
            os.close(opened[0])
        else:
            proc.kill()
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))  # frees the opener thread
    assert proc.returncode in (-signal.SIGINT, 130), err
    assert "KeyboardInterrupt" in err
    assert not target.exists()
    assert chunk_inodes(staged) == done_before  # the queued chunks were not started

    env.pop(PAUSE_ENV)
    rerun = subprocess.run([sys.executable, str(script), *args[:3], "local:2", args[4]],
                           cwd=target.parent, env=env, capture_output=True, text=True,
                           timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert "running in-process: only the finalize of an interrupted run is left" in rerun.stderr
    assert "dashboard" not in rerun.stderr.lower()
    manifest = guideloom.load_export(target).manifest
    assert manifest["placement"]["mode"] == "in-process"
    tally = manifest["zarr_finalize"]
    assert tally["done_before"] == 1  # the chunk moved before Ctrl-C was not done again
    assert tally["moved"] == tally["chunks"] - 1 == len(GOOD) - 1
    ours, theirs = guideloom.load_export(target), guideloom.load_export(reference)
    assert ours.sim_ids.tolist() == theirs.sim_ids.tolist() == GOOD
    np.testing.assert_array_equal(ours[:len(ours)]["scan"], theirs[:len(theirs)]["scan"])
    assert ours.verify().line()


@pytest.mark.slow  # ~5 s; fast: the same placement in-process (partitions out of order, small rows)
def test_on_a_cluster_partitions_wait_for_their_predecessors_and_place_every_chunk(
        demo_zip, tmp_path):
    """Real workers (``local:2``): a partition that finishes before the one before it has
    said where its rows end waits for its note (a ``distributed.Event``), so every chunk is
    written where it belongs by the tasks and finalize assembles none."""
    reference = tmp_path / "ref" / "o.zarr"
    reference.parent.mkdir()
    assert run(demo_zip, reference, "fail_on_multiples_of_7").returncode == 0
    target = tmp_path / "run" / "o.zarr"
    target.parent.mkdir()
    done = run(demo_zip, target, "fail_on_multiples_of_7", client="local:2")
    assert done.returncode == 0, done.stderr
    assert "running local-cluster" in done.stderr
    ours, theirs = guideloom.load_export(target), guideloom.load_export(reference)
    tally = ours.manifest["zarr_finalize"]
    assert tally["placed"] == tally["chunks"] > 0, tally
    assert tally["assembled"] == 0, tally
    assert ours.sim_ids.tolist() == GOOD
    np.testing.assert_array_equal(ours[:len(ours)]["force"], theirs[:len(theirs)]["force"])
    assert ours.verify().line()


def test_a_retried_partition_that_reads_a_different_count_fails_finalize_not_the_rows(
        demo_zip, tmp_path):
    """Partition 1 skips experiment 7 and says where its rows end; partition 2 places its rows
    after them. Partition 1 then runs again (its first run counted as lost) and this time reads
    7, one row more than partition 2 counted on: finalize refuses to publish overlapping rows
    and says what to do, instead of leaving a wrong row in the export."""
    from guideloom.errors import CorruptExportError
    from guideloom.export.api import build_spec
    from guideloom.export.partition import probe_schema, run_partition
    from guideloom.export.plan import plan_export, select_experiments
    from guideloom.export.staging import Staging
    from guideloom.formats.zarr import PLACED_KEY, ZarrFormat

    target = tmp_path / "o.zarr"

    def spec_with(transform):
        return build_spec("force-curve", "zarr", target, data_dir=demo_zip, sim_ids=IDS,
                          record_transform=transform, partition_size=4, on_error="skip")

    skipping, reading = spec_with(helpers.fail_on_multiples_of_7), spec_with(helpers.first_rows)
    staging = Staging.for_target(target)
    plan = plan_export(skipping, 1, select_experiments(skipping))
    staging.start({"identity": plan.identity, "partition_size": plan.partition_size})
    writer = ZarrFormat(staging, {})
    schema = probe_schema(skipping, plan.selection.locations[:4], plan.selection.rows[:4])
    writer.allocate(len(plan.selection.locations), schema, plan.partition_size)
    first = [run_partition(skipping, writer, schema, part) for part in plan.partitions[:3]]
    assert PLACED_KEY in first[2]  # placed after partition 1's rows (three: 7 skipped)
    os.remove(staging.path("parts", f"{1:06d}.json"))  # partition 1's run is lost
    again = run_partition(reading, writer, schema, plan.partitions[1])
    assert len(again["written"]) == 4  # this time 7 was read
    for part in plan.partitions[3:]:
        run_partition(skipping, writer, schema, part)
    keep = np.isin(plan.selection.ids, [*GOOD, 7])
    with pytest.raises(CorruptExportError, match="partition 2") as info:
        writer.finalize(keep)
    assert "export again" in str(info.value)
