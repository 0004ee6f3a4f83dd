"""A worker process killed while a job runs: Dask retries its tasks elsewhere and the export
completes, equal to an undisturbed one (a large job's payload is recomputable, not scattered;
a small one travels inside every task)."""

from __future__ import annotations

import functools
import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import guideloom
from guideloom.export.run import INLINE_JOB_BYTES
from tests import export_helpers as helpers

pytestmark = pytest.mark.cluster  # every test here runs on a real Dask cluster

GATE_ENV = "GUIDELOOM_TEST_GATE_DIR"


def gated_first_rows(rec):
    """``first_rows``; on a worker, once the test has opened the gate (each worker process
    says it started). The driver's schema probe passes straight through."""
    from distributed import get_worker

    try:
        get_worker()
    except ValueError:
        return helpers.first_rows(rec)
    gate = Path(os.environ[GATE_ENV])
    (gate / f"started-{os.getpid()}").touch()
    while not (gate / "go").exists():
        threading.Event().wait(0.02)
    return helpers.first_rows(rec)


def gated_with_ballast(rec, ballast: bytes):
    """:func:`gated_first_rows`, holding ``ballast``: a job too large to travel in every task
    (as a transform that holds a lookup table is), so it is sent once as the job's payload."""
    assert len(ballast) > INLINE_JOB_BYTES
    return gated_first_rows(rec)


def _dependency_holders(dask_scheduler) -> list[int]:
    """PIDs (from the scheduler's worker info) of the workers holding the inputs of the
    tasks that are running: the job's payload."""
    return sorted({ws.pid for ts in dask_scheduler.tasks.values()
                   if ts.state == "processing" for dep in ts.dependencies
                   for ws in dep.who_has})


def _worker_pids(dask_scheduler) -> list[int]:
    return [ws.pid for ws in dask_scheduler.workers.values()]


def _wait_for(condition, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        threading.Event().wait(0.02)


@pytest.mark.slow
def test_killing_the_worker_that_holds_the_job_payload_retries_elsewhere(demo_zip, tmp_path,
                                                                        monkeypatch):
    from distributed import Client, LocalCluster

    gate = tmp_path / "gate"
    gate.mkdir()
    monkeypatch.setenv(GATE_ENV, str(gate))  # the worker processes inherit it
    ids = list(range(12))
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address="127.0.0.1:0", silence_logs=50) as cluster, \
            Client(cluster) as client:
        outcome: dict[str, object] = {}

        def run() -> None:
            try:
                outcome["result"] = guideloom.export_to_numpy(
                    "force-curve", tmp_path / "out", data_dir=demo_zip, client=client,
                    record_transform=functools.partial(
                        gated_with_ballast, ballast=os.urandom(2 * INLINE_JOB_BYTES)),
                    partition_size=len(ids), sim_ids=ids)
            except BaseException as exc:
                outcome["error"] = exc

        job = threading.Thread(target=run)
        job.start()
        try:
            _wait_for(lambda: any(gate.glob("started-*")), "the first task to start")
            _wait_for(lambda: client.run_on_scheduler(_dependency_holders),
                      "a running task with its payload")
            # one task, running where the payload is: the other worker never fetched it, so
            # a scattered payload would be gone with this worker
            victims = client.run_on_scheduler(_dependency_holders)
            assert len(victims) == 1
            assert victims[0] in client.run(os.getpid).values()
            os.kill(victims[0], signal.SIGKILL)  # a worker process of the cluster this test made
            _wait_for(lambda: victims[0] not in client.run_on_scheduler(_worker_pids),
                      "the killed worker to leave")
        finally:
            (gate / "go").touch()
            job.join(timeout=180)
        assert not job.is_alive()
        assert "error" not in outcome, outcome.get("error")
    (gate / "go").touch()
    guideloom.export_to_numpy("force-curve", tmp_path / "ref", data_dir=demo_zip,
                              record_transform=helpers.first_rows, client="sync", sim_ids=ids)
    got, want = guideloom.load_export(tmp_path / "out"), guideloom.load_export(tmp_path / "ref")
    assert got.sim_ids.tolist() == want.sim_ids.tolist() == ids
    for field in want.fields:
        np.testing.assert_array_equal(got.batch(range(len(ids)))[field],
                                      want.batch(range(len(ids)))[field])
