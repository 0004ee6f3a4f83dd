"""Tests of the cluster/ folder: real scheduler and worker processes, no mocks."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import psutil
import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
CLUSTER = REPO / "cluster"


def _load(name: str) -> ModuleType:
    """Import ``cluster/<name>.py`` (the folder is scripts, not a package)."""
    module_name = f"guideloom_cluster_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, CLUSTER / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def _run_local(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CLUSTER / "local.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=False,
    )


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.cluster
@pytest.mark.slow
def test_local_cluster_script_start_compute_stop(tmp_path: Path) -> None:
    from distributed import Client

    state_dir = tmp_path / "state"
    started = _run_local("start", "--workers", "2", "--state-dir", str(state_dir))
    state_file = state_dir / "local-cluster.json"
    try:
        assert started.returncode == 0, started.stderr
        state = json.loads(state_file.read_text())
        address = state["address"]
        assert address.startswith("tcp://127.0.0.1:")
        assert f"scheduler: {address}" in started.stdout
        assert state["dashboard_url"].startswith("http://127.0.0.1:")
        assert state["dashboard_url"] in started.stdout
        records = [state["scheduler"], *state["workers"]]
        pids = [r["pid"] for r in records]
        assert len(pids) == 3 and all(_alive(p) for p in pids)
        children = [c for p in pids for c in psutil.Process(p).children(recursive=True)]

        with Client(address, timeout=30) as client:
            workers = client.scheduler_info(n_workers=-1)["workers"]
            assert len(workers) == 2
            assert all(w["nthreads"] == 1 for w in workers.values())
            assert all(w["host"] == "127.0.0.1" for w in workers.values())
            assert client.submit(sum, [1, 2, 3]).result(timeout=30) == 6
            assert sum(client.gather(client.map(lambda x: x * x, range(10)))) == 285

        status = _run_local("status", "--json", "--state-dir", str(state_dir))
        assert status.returncode == 0, status.stderr
        assert json.loads(status.stdout)["n_workers"] == 2

        # a second start on the same state dir is refused while the first one runs
        again = _run_local("start", "--workers", "1", "--state-dir", str(state_dir))
        assert again.returncode == 1 and "already running" in again.stderr
    finally:
        stopped = _run_local("stop", "--state-dir", str(state_dir))
    assert stopped.returncode == 0, stopped.stderr
    assert "terminated (SIGTERM)" in stopped.stdout
    assert not state_file.exists()
    assert not any(_alive(p) for p in pids)
    assert not any(c.is_running() for c in children)  # nanny's worker processes too
    assert "nothing to stop" in _run_local("stop", "--state-dir", str(state_dir)).stdout


@pytest.mark.cluster
def test_start_local_cluster_context_manager(tmp_path: Path) -> None:
    from distributed import Client

    from guideloom.cluster.local_procs import load_state, start_local_cluster

    with start_local_cluster(1, state_dir=tmp_path, dashboard_port=None) as procs:
        assert procs.dashboard_url is None
        assert load_state(tmp_path) is not None
        with Client(procs.address, timeout=30) as client:
            assert client.submit(lambda: 41 + 1).result(timeout=30) == 42
        pids = procs.pids
    assert load_state(tmp_path) is None
    assert not any(_alive(p) for p in pids)


@pytest.mark.parametrize("system", ["slurm", "pbs"])
def test_jobqueue_job_script_from_config(system: str) -> None:
    slurm = _load("slurm")
    options = slurm.load_jobqueue_config(system)
    assert options["cores"] == 1 and options["processes"] == 1
    # builds the cluster (scheduler in this process, on loopback) but submits no job
    with slurm.make_cluster(
        system, scheduler_options={"host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"}
    ) as cluster:
        script = cluster.job_script()
        address = cluster.scheduler_address
    assert "distributed.cli.dask_worker" in script
    assert f"dask_worker {address}" in script
    assert "--nthreads 1" in script
    assert "--memory-limit 4.00GiB" in script
    if system == "slurm":
        assert "#SBATCH --cpus-per-task=1" in script
        assert "#SBATCH --mem=4G" in script
        assert "#SBATCH -J guideloom-worker" in script
        assert "#SBATCH -t 02:00:00" in script
    else:
        assert "#PBS -l select=1:ncpus=1:mem=4GB" in script
        assert "#PBS -N guideloom-worker" in script
        assert "#PBS -l walltime=02:00:00" in script


def test_kubernetes_manifest_structure() -> None:
    docs = list(yaml.safe_load_all((CLUSTER / "kubernetes" / "daskcluster.yaml").read_text()))
    cluster = next(d for d in docs if d["kind"] == "DaskCluster")
    assert cluster["apiVersion"] == "kubernetes.dask.org/v1"
    claims = {d["metadata"]["name"] for d in docs if d["kind"] == "PersistentVolumeClaim"}

    worker = cluster["spec"]["worker"]
    assert worker["replicas"] >= 1
    (container,) = worker["spec"]["containers"]
    args = [str(a) for a in container["args"]]
    assert args[:2] == ["dask", "worker"]
    assert args[args.index("--nthreads") + 1] == "1"

    scheduler = cluster["spec"]["scheduler"]
    ports = {p["name"]: p["port"] for p in scheduler["service"]["ports"]}
    assert ports == {"tcp-comm": 8786, "http-dashboard": 8787}
    assert scheduler["spec"]["containers"][0]["args"][:2] == ["dask", "scheduler"]

    for pod in (worker["spec"], scheduler["spec"]):
        volumes = {v["name"]: v for v in pod["volumes"]}
        for c in pod["containers"]:
            mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
            assert {"/data", "/output"} <= set(mounts)
            for m in mounts.values():
                claim = volumes[m["name"]]["persistentVolumeClaim"]["claimName"]
                assert claim in claims
            assert not mounts["/output"].get("readOnly", False)


@pytest.mark.browser
@pytest.mark.cluster
def test_dashboard_screenshot_shows_drawn_task_stream(tmp_path: Path) -> None:
    shot = _load("dashboard_screenshot")
    if shot.find_chromium() is None:
        pytest.skip("no chromium binary (apt-get install chromium, or set GUIDELOOM_CHROMIUM)")
    from PIL import Image

    out = tmp_path / "dashboard.png"
    capture = shot.demo_capture(
        out, views=("force-signals", "camera-frames"), tasks_per_view=150, timeout=45
    )
    assert capture.path == out and out.stat().st_size > 10_000
    assert capture.tasks >= 200  # the first two thirds of 300 tasks, captured mid-run
    assert capture.coloured_fraction >= 0.01
    with Image.open(out) as img:
        assert img.size == (1400, 900)
        rgb = img.convert("RGB")
        colours = rgb.getcolors(maxcolors=1 << 20)
        assert colours is not None and len(colours) > 20
        # the task-stream area (upper right) holds saturated task colours, not just grey
        region = np.asarray(rgb.crop((400, 80, 1380, 520)), dtype=np.int16)
        saturated = (region.max(axis=2) - region.min(axis=2)) > 40
        assert saturated.mean() > 0.05


def test_jobqueue_launcher_dry_run_prints_job_script() -> None:
    proc = subprocess.run(
        [sys.executable, str(CLUSTER / "slurm.py"), "--system", "pbs", "--dry-run"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("#!/usr/bin/env bash")
    assert "#PBS -l select=1:ncpus=1:mem=4GB" in proc.stdout
    assert "--nthreads 1" in proc.stdout
