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
from guideloom.faults import FAULT_ENV
from tests import export_helpers as helpers

ROOT = Path(__file__).resolve().parents[1]
IDS = list(range(1, 24))  # 7, 14 and 21 fail: skipped
GOOD = [i for i in IDS if i % 7]

RUN = """
import sys
import guideloom
from tests import export_helpers

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


@pytest.mark.fast_case("big_rows_failing_on_multiples_of_7-scan")
@pytest.mark.parametrize("transform, alias", [("fail_on_multiples_of_7", "force"),
                                              ("big_rows_failing_on_multiples_of_7", "scan")])
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
