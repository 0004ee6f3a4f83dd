"""The job identity does not depend on where a job runs: the default partitioning follows from
the data alone, a plan made anywhere is the job's own, and a rerun with another
``partition_size`` says that the partitioning changed (not its inputs, code or options).

The real-kill proof (interrupted in one placement, resumed in another) is in
tests/test_forked_placement.py."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

import guideloom
from guideloom.cluster.runtime import (
    MAX_SERIAL_PARTITION,
    MAX_TASK_S,
    MIN_PARTITIONS,
    MIN_TASK_S,
    TARGET_PARTITIONS,
    job_partition_size,
)
from guideloom.errors import InjectedFault
from guideloom.export import build_spec, plan_export
from guideloom.export.api import export
from guideloom.export.plan import estimate_seconds, partition_size_for, select_experiments
from guideloom.runtime.faults import crash_at
from guideloom.testing.formats import files_of


def crop_force(force):
    """The first 1000 rows (the demo's force curves vary in length)."""
    return np.asarray(force)[:1000]


def other_crop(force):
    """Another transform: another job."""
    return np.asarray(force)[:999]


def test_the_default_partition_size_follows_the_rule_for_any_data():
    for n in (1, 2, 5, 36, 200, 2_000, 100_000):
        for per_item in (None, 1e-4, 7e-4, 0.01, 0.08, 3.0):
            size = job_partition_size(n, per_item)
            parts = math.ceil(n / size)
            assert 1 <= size <= MAX_SERIAL_PARTITION, (n, per_item, size)
            if per_item is None:
                assert size == max(1, min(MAX_SERIAL_PARTITION, math.ceil(n / TARGET_PARTITIONS)))
                continue
            if size < MAX_SERIAL_PARTITION and n >= MIN_PARTITIONS:
                # enough work per task, unless that would leave fewer than two partitions
                assert size * per_item >= MIN_TASK_S or parts >= MIN_PARTITIONS, (n, per_item)
            if size * per_item > MAX_TASK_S:  # too much work per task only for one record
                assert size == 1 or size == math.ceil(n / MIN_PARTITIONS), (n, per_item)


def test_partition_size_for_ignores_the_workers_and_the_placement(demo_zip):
    spec = build_spec("force-curve", "npy", "/nonexistent/o", data_dir=demo_zip,
                      transforms={"force_data": crop_force})
    selection = select_experiments(spec)
    n, estimate = len(selection.locations), estimate_seconds(spec, selection)
    sizes = {partition_size_for(spec, n, workers, estimate, forked)
             for workers in (1, 2, 8, 64) for forked in (False, True)}
    assert sizes == {job_partition_size(n, estimate / n)}


def test_a_plan_made_anywhere_is_the_jobs_own(demo_zip, tmp_path):
    """plan_export without an estimate makes the same one the run makes: the same partitions
    and identity as export.json records."""
    guideloom.export_to_numpy("force-curve", tmp_path / "o", data_dir=demo_zip, client="sync",
                              transforms={"force_data": crop_force})
    manifest = json.loads((tmp_path / "o" / "export.json").read_text())
    spec = build_spec("force-curve", "npy", tmp_path / "o", data_dir=demo_zip,
                      transforms={"force_data": crop_force})
    plan = plan_export(spec, workers=8, forked=True)
    assert (plan.partition_size, len(plan.partitions), plan.identity) == (
        manifest["partition_size"], manifest["n_partitions"], manifest["identity"])


def _interrupted(demo_zip, out, **kwargs) -> None:
    with crash_at("partition-marked"), pytest.raises(InjectedFault):
        guideloom.export_to_numpy("force-curve", out, data_dir=demo_zip, client="sync",
                                  **kwargs)


def test_another_partition_size_says_the_partitioning_changed(demo_zip, tmp_path, caplog):
    caplog.set_level("INFO", logger="guideloom")
    out = tmp_path / "o"
    _interrupted(demo_zip, out, partition_size=4, transforms={"force_data": crop_force})
    result = export("force-curve", out, kind="npy", data_dir=demo_zip, client="sync",
                    partition_size=8, transforms={"force_data": crop_force})
    assert result.resumed_partitions == 0  # another partitioning: its rows are written again
    lines = [r.getMessage() for r in caplog.records if "discarded" in r.getMessage()]
    assert len(lines) == 1, lines
    assert lines[0].endswith("they belong to another job (partitioning changed: 9 → 5 "
                             "partitions (partition_size 4 → 8))"), lines
    guideloom.export_to_numpy("force-curve", tmp_path / "want", data_dir=demo_zip,
                              client="sync", partition_size=8,
                              transforms={"force_data": crop_force})
    assert files_of(out) == files_of(tmp_path / "want")


def test_another_transform_still_says_inputs_code_or_options(demo_zip, tmp_path, caplog):
    caplog.set_level("INFO", logger="guideloom")
    out = tmp_path / "o"
    _interrupted(demo_zip, out, partition_size=4, transforms={"force_data": crop_force})
    guideloom.export_to_numpy("force-curve", out, data_dir=demo_zip, client="sync",
                              partition_size=8, transforms={"force_data": other_crop})
    lines = [r.getMessage() for r in caplog.records if "discarded" in r.getMessage()]
    assert len(lines) == 1, lines
    assert lines[0].endswith("(its inputs, code or options changed)"), lines
    assert "partitioning" not in lines[0]


def test_the_default_partitioning_resumes_in_process_without_a_notice(demo_zip, tmp_path,
                                                                     caplog):
    caplog.set_level("INFO", logger="guideloom")
    out = tmp_path / "o"
    _interrupted(demo_zip, out, transforms={"force_data": crop_force})
    result = export("force-curve", out, kind="npy", data_dir=demo_zip, client="sync",
                    transforms={"force_data": crop_force})
    assert result.resumed_partitions >= 1
    assert not [r for r in caplog.records if "discarded" in r.getMessage()]


def reads_environment_crop(values):
    """A transform that reads the world: its rows may differ between two runs."""
    limit = int(os.environ.get("GUIDELOOM_TEST_CROP", "16"))
    return np.asarray(values)[:limit]


def test_a_transform_reading_the_world_starts_over_instead_of_resuming(demo_zip, tmp_path,
                                                                       caplog, monkeypatch):
    """The interrupted run's rows were made under another environment: resuming them would
    mix two versions of the rows in one export (issue 38). Without ``code_version`` the rerun
    resumes nothing and says why; with it (the user's promise) it resumes."""
    caplog.set_level("INFO", logger="guideloom")
    out, want = tmp_path / "o", tmp_path / "want"
    monkeypatch.setenv("GUIDELOOM_TEST_CROP", "8")
    _interrupted(demo_zip, out, partition_size=4,
                 transforms={"force_data": reads_environment_crop})
    monkeypatch.setenv("GUIDELOOM_TEST_CROP", "16")
    result = export("force-curve", out, kind="npy", data_dir=demo_zip, client="sync",
                    partition_size=4, transforms={"force_data": reads_environment_crop})
    assert result.resumed_partitions == 0
    lines = [r.getMessage() for r in caplog.records if "discarded" in r.getMessage()]
    assert len(lines) == 1, lines
    assert "world os.environ" in lines[0], lines
    assert "pass code_version=" in lines[0]
    guideloom.export_to_numpy("force-curve", want, data_dir=demo_zip, client="sync",
                              partition_size=4,
                              transforms={"force_data": reads_environment_crop})
    assert files_of(out) == files_of(want)  # every row of this run's environment

    named = tmp_path / "named"
    _interrupted(demo_zip, named, partition_size=4, code_version="v1",
                 transforms={"force_data": reads_environment_crop})
    result = export("force-curve", named, kind="npy", data_dir=demo_zip, client="sync",
                    partition_size=4, code_version="v1",
                    transforms={"force_data": reads_environment_crop})
    assert result.resumed_partitions >= 1
