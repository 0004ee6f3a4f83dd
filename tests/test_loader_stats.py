"""StatefulDataLoader's stall counters: a loop fed by slow reads shows that it waited for data,
one whose training step dominates shows that data was ready; the epoch summary says which."""

from __future__ import annotations

import numpy as np
import pytest

import guideloom
from tests import export_helpers as helpers

torch = pytest.importorskip("torch")

from guideloom.loader import StatefulDataLoader  # noqa: E402

IDS = [1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13]  # none fails in the helpers' transforms


@pytest.fixture(scope="module")
def slow_export(demo_zip, tmp_path_factory):
    """1 MiB rows, gzip-compressed: every read decompresses megabytes."""
    out = tmp_path_factory.mktemp("slow") / "scans.zarr"
    guideloom.export_to_zarr("force-curve", out, data_dir=demo_zip, sim_ids=IDS, client="sync",
                             compressor="gzip",
                             record_transform=helpers.big_rows_failing_on_multiples_of_7)
    return out


@pytest.fixture(scope="module")
def fast_export(demo_zip, tmp_path_factory):
    """Small rows in .npy files: a batch is a memory copy."""
    out = tmp_path_factory.mktemp("fast") / "force"
    guideloom.export_to_numpy("force-curve", out, data_dir=demo_zip, sim_ids=IDS,
                              client="sync", record_transform=helpers.first_rows)
    return out


def training_step() -> None:
    """Real work standing in for a model step (a few milliseconds of linear algebra)."""
    m = np.random.default_rng(0).random((160, 160))
    for _ in range(4):
        np.linalg.svd(m)


def test_slow_reads_show_as_time_waiting_for_data(slow_export, capsys):
    with StatefulDataLoader.from_export(slow_export, device="cpu", local_batch_size=3,
                                        stats_summary=True) as loader:
        for _ in loader:
            pass
        stats = loader.stats()
    assert stats["batches"] == 4
    assert stats["wait_s"] > 5 * stats["between_s"]
    assert stats["wait_fraction"] > 0.8
    (name, worker), = stats["workers"].items()  # num_workers=0: the consumer's thread reads
    assert worker["batches"] == 4
    assert worker["read_s"] <= stats["wait_s"]
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("guideloom loader: epoch 0: 4 batches; waited ")
    assert "the loop waited for data" in line
    assert name in line


@pytest.mark.fast_case("2")
@pytest.mark.parametrize("num_workers", [0, 2])
def test_fast_reads_behind_a_longer_step_show_as_time_between_batches(fast_export, capsys,
                                                                      num_workers):
    with StatefulDataLoader.from_export(fast_export, device="cpu", local_batch_size=2,
                                        num_workers=num_workers,
                                        stats_summary=True) as loader:
        for _ in loader:
            training_step()
        stats = loader.stats(reset=True)
        assert loader.stats()["batches"] == 0  # reset
    assert stats["batches"] == 6
    assert stats["between_s"] > 2 * stats["wait_s"]
    assert stats["wait_fraction"] < 0.34
    assert sum(w["batches"] for w in stats["workers"].values()) == 6
    if num_workers:
        assert all(name.startswith("guideloom-loader") for name in stats["workers"])
    err = capsys.readouterr().err
    assert "data was ready ahead of the loop" in err


def test_no_summary_unless_asked_and_counters_add_up_over_epochs(fast_export, capsys):
    with StatefulDataLoader.from_export(fast_export, device="cpu", local_batch_size=4) as loader:
        for _ in range(2):
            for _ in loader:
                pass
        assert loader.stats()["batches"] == 6
    assert "guideloom loader" not in capsys.readouterr().err
