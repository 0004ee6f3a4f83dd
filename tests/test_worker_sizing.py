"""Workers sized for the work: decode threads times concurrent tasks never exceed the CPUs.

Each script is run as a user runs it (``python export.py`` from a temporary directory); its
record transform reports the decode threads of the process it runs in.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from guideloom.demo import make_demo_data
from guideloom.fastread.pool import usable_cpus
from tests.test_as_user import user_env

SCRIPT = """
import guideloom
from guideloom import fastread

def threads_here(rec):
    return {"threads": fastread.decode_threads(), "force": rec["force"][:4]}

if __name__ == "__main__":
    ds = guideloom.load(data_dir="data")
    guideloom.add_view(ds, "f", fields={"force": "force_data"})
    guideloom.export_to_numpy("f", "out", dataset=ds, record_transform=threads_here,
                              client=CLIENT, partition_size=2)
"""


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("sizing")
    make_demo_data(root / "data", n=8)
    return root / "data"


def _threads_seen(tmp_path: Path, data_dir: Path, client: str, **env: str) -> set[int]:
    (tmp_path / "data").symlink_to(data_dir)
    (tmp_path / "export.py").write_text(textwrap.dedent(SCRIPT.replace("CLIENT", repr(client))))
    out = subprocess.run([sys.executable, "export.py"], cwd=tmp_path, env={**user_env(), **env},
                         capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    return {int(x) for x in np.load(tmp_path / "out" / "threads.npy")}


@pytest.mark.cluster
@pytest.mark.slow
def test_two_workers_share_the_cpus(tmp_path, data_dir):
    assert _threads_seen(tmp_path, data_dir, "local:2") == {max(1, usable_cpus() // 2)}


def test_in_process_uses_every_cpu(tmp_path, data_dir):
    assert _threads_seen(tmp_path, data_dir, "sync") == {usable_cpus()}


@pytest.mark.cluster
@pytest.mark.slow
def test_the_environment_variable_wins(tmp_path, data_dir):
    seen = _threads_seen(tmp_path, data_dir, "local:2", GUIDELOOM_DECODE_THREADS="3")
    assert seen == {3}


@pytest.mark.cluster
@pytest.mark.slow
def test_the_share_follows_the_affinity_mask(tmp_path, data_dir):
    """A worker pinned to one CPU (as under SLURM) decodes with one thread."""
    if not hasattr(os, "sched_setaffinity"):
        pytest.skip("no CPU affinity on this platform")
    first = min(os.sched_getaffinity(0))
    env = user_env()
    (tmp_path / "data").symlink_to(data_dir)
    (tmp_path / "export.py").write_text(textwrap.dedent(SCRIPT.replace("CLIENT", "'local:1'")))
    out = subprocess.run(["taskset", "-c", str(first), sys.executable, "export.py"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr[-3000:]
    assert {int(x) for x in np.load(tmp_path / "out" / "threads.npy")} == {1}


def test_workers_of_a_running_cluster_share_their_host(demo_zip, tmp_path, dask_client):
    """Workers someone else started (here a LocalCluster of two single-threaded processes, no
    environment variable): each task decodes with the CPUs divided by the tasks on its host."""
    import guideloom
    from tests.export_helpers import decode_threads_row

    ds = guideloom.load(data_dir=demo_zip)
    guideloom.add_view(ds, "f", fields={"force_data": "force_data"})
    dask_client.wait_for_workers(2)
    guideloom.export_to_numpy("f", tmp_path / "out", dataset=ds, client=dask_client,
                              record_transform=decode_threads_row, partition_size=3)
    seen = {int(x) for x in np.load(tmp_path / "out" / "threads.npy")}
    assert seen == {max(1, usable_cpus() // 2)}


def test_tiny_records_are_not_split_finer_than_pays():
    from guideloom.cluster.runtime import MAX_PARTITION, MIN_TASK_S, default_partition_size

    # without an estimate: about four tasks per worker
    assert default_partition_size(24, 2) == 3
    # 24 records of 1 ms: one task per worker (0.1 s of work is not worth more tasks)
    assert default_partition_size(24, 2, 1e-3) == 12
    # large records keep four tasks per worker
    assert default_partition_size(24, 2, 0.13) == 3
    # many small records: tasks of MIN_TASK_S, within the partition cap
    assert default_partition_size(2_000, 2, 1e-3) == min(MAX_PARTITION, round(MIN_TASK_S / 1e-3))


def test_task_sizes_even_out_the_last_round():
    """21 real-size op10 records on 2 workers in tasks of 3 left one worker idle for the whole
    last task (12 records against 9); tasks of 2 give 11 against 10."""
    import math

    from guideloom.cluster.runtime import default_partition_size

    assert math.ceil(21 / (4 * 2)) == 3  # the size before balancing
    assert default_partition_size(21, 2, 0.08) == 2
    assert default_partition_size(21, 2) == 2
    assert default_partition_size(24, 2, 0.08) == 3  # 8 tasks of 3: already even

    def busiest(n: int, size: int, workers: int) -> int:
        """Records on the busiest worker when equal tasks are handed out in order to whichever
        worker is free first (simulated task by task)."""
        load = [0] * workers
        for start in range(0, n, size):
            k = min(range(workers), key=lambda w: (load[w], w))
            load[k] += min(size, n - start)
        return max(load)

    for workers in (2, 3, 4, 8):
        for n in range(2, 400, 7):
            for per_item in (None, 0.003, 0.05, 0.4):
                chosen = default_partition_size(n, workers, per_item)
                plain = min(64, max(math.ceil(n / (4 * workers)), 1 if per_item is None else
                                    min(math.ceil(0.1 / per_item), math.ceil(n / workers))))
                assert math.ceil(plain / 2) <= chosen <= plain, (n, workers, per_item)
                assert busiest(n, chosen, workers) <= busiest(n, plain, workers), \
                    (n, workers, per_item, chosen, plain)


@pytest.mark.cluster
def test_a_tiny_export_on_two_workers_runs_one_task_each(demo_zip, tmp_path):
    """export.json records the partitioning the estimate chose, and a dry run of the same job
    would choose the same (the job identity includes it)."""
    import json

    import guideloom
    from guideloom.export.api import build_spec
    from guideloom.export.plan import estimate_seconds, partition_size_for, select_experiments

    ds = guideloom.load(data_dir=demo_zip)
    where = lambda row: bool(row["has_pointcloud"])  # noqa: E731
    guideloom.export_to_numpy("pointcloud-op10", tmp_path / "out", dataset=ds, where=where,
                              client="local:2")
    manifest = json.loads((tmp_path / "out" / "export.json").read_text())
    n = manifest["count"]
    assert manifest["partition_size"] == -(-n // 2)
    spec = build_spec("pointcloud-op10", "npy", tmp_path / "other", dataset=ds, where=where)
    selection = select_experiments(spec)
    assert partition_size_for(spec, n, 2, estimate_seconds(spec, selection)) == -(-n // 2)


def test_in_process_partitions_stay_small_for_resume():
    from guideloom.cluster.runtime import default_partition_size

    assert default_partition_size(24, 1, 1e-3) == default_partition_size(24, 1) == 6
