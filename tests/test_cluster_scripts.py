"""Tests of the cluster/ folder: real scheduler and worker processes, no mocks."""

from __future__ import annotations

import importlib.util
import json
import os
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
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def _run_local(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(CLUSTER / "local.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
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

    from guideloom.cluster.security import load

    state_dir = tmp_path / "state"
    started = _run_local("start", "--workers", "2", "--state-dir", str(state_dir))
    state_file = state_dir / "local-cluster.json"
    try:
        assert started.returncode == 0, started.stderr
        state = json.loads(state_file.read_text())
        address = state["address"]
        assert address.startswith("tls://127.0.0.1:")
        assert f"scheduler: {address}" in started.stdout
        assert state["dashboard_url"].startswith("http://127.0.0.1:")
        assert state["dashboard_url"] in started.stdout
        records = [state["scheduler"], *state["workers"]]
        pids = [r["pid"] for r in records]
        assert len(pids) == 3
        assert all(_alive(p) for p in pids)
        children = [c for p in pids for c in psutil.Process(p).children(recursive=True)]

        with Client(address, timeout=30, security=load(state_dir)) as client:
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
        assert again.returncode == 1
        assert "already running" in again.stderr
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
        with Client(procs.address, timeout=30, security=procs.security) as client:
            assert client.submit(lambda: 41 + 1).result(timeout=30) == 42
        pids = procs.pids
    assert load_state(tmp_path) is None
    assert not any(_alive(p) for p in pids)


@pytest.mark.parametrize("system", ["slurm", "pbs"])
def test_jobqueue_job_script_from_config(system: str) -> None:
    slurm = _load("slurm")
    options = slurm.load_jobqueue_config(system)
    assert options["cores"] == 1
    assert options["processes"] == 1
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
    assert capture.path == out
    assert out.stat().st_size > 10_000
    assert capture.tasks >= 200  # the first two thirds of 300 tasks, captured mid-run
    assert capture.coloured_fraction >= 0.01
    with Image.open(out) as img:
        assert img.size == (1400, 900)
        rgb = img.convert("RGB")
        colours = rgb.getcolors(maxcolors=1 << 20)
        assert colours is not None
        assert len(colours) > 20
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


# --- TLS: cluster/local.py run from a temporary directory (issue 22) ------------------------
PYTHON_JOB = """
import numpy as np
import guideloom


def first_rows(rec):
    return {{"force": np.asarray(rec["force_data"])[:50], "sim": np.int64(rec["_sim_id"])}}


{connect}
guideloom.export_to_numpy("force-curve", "by-client", data_dir={data!r},
                          record_transform=first_rows, client=client)
guideloom.export_to_numpy("force-curve", "by-address", data_dir={data!r},
                          record_transform=first_rows, client={address!r})
print("exported")
"""

PLAIN_CLIENT = """
import sys
from distributed import Client

with Client(sys.argv[1], timeout=30) as client:
    print(client.submit(sum, [1, 2, 3]).result(timeout=30))
"""


def _first_rows(rec):
    return {"force": np.asarray(rec["force_data"])[:50], "sim": np.int64(rec["_sim_id"])}


def _printed(stdout: str) -> dict[str, str]:
    """The ``name: value`` lines that ``cluster/local.py start`` printed."""
    lines = [line.split(":", 1) for line in stdout.splitlines() if ":" in line]
    return {name.strip(): value.strip() for name, value in lines}


def _same_npy(got: Path, want: Path) -> None:
    names = sorted(p.name for p in want.glob("*.npy"))
    assert names
    assert names == sorted(p.name for p in got.glob("*.npy"))
    for name in names:
        assert (got / name).read_bytes() == (want / name).read_bytes(), (got, name)


def _guideloom(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "guideloom", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=180)


@pytest.mark.cluster
@pytest.mark.slow
def test_local_script_is_tls_and_every_printed_way_of_connecting_exports(demo_zip, tmp_path):
    from distributed import Client

    import guideloom
    from guideloom.cluster import security
    from guideloom.errors import SchedulerCredentialsError

    work = tmp_path / "work"
    work.mkdir()
    started = _run_local("start", "--workers", "2", "--state-dir", "state", cwd=work)
    state = work / "state"
    try:
        assert started.returncode == 0, started.stderr
        shown = _printed(started.stdout)
        address = shown["scheduler"]
        assert address.startswith("tls://127.0.0.1:"), started.stdout
        assert shown["tls"].startswith(f"{state / 'tls'} ")
        assert (state.stat().st_mode & 0o777) == 0o700
        assert ((state / "tls").stat().st_mode & 0o777) == 0o700
        assert {p.name: p.stat().st_mode & 0o777 for p in (state / "tls").iterdir()} == {
            "ca.pem": 0o600, "cert.pem": 0o600, "key.pem": 0o600}

        # plain TCP, or TLS without this cluster's credentials, gets nowhere
        with pytest.raises(OSError):
            Client(address.replace("tls://", "tcp://"), timeout=3)
        refused = _guideloom("run", "force_signals", "--scheduler",
                             address.replace("tls://", "tcp://"), "--data-dir", str(demo_zip),
                             "--output", "nope", cwd=work)
        assert refused.returncode == 2
        assert "no Dask scheduler answered" in refused.stderr
        assert not (work / "nope").exists()

        reference = _guideloom("run", "force_signals", "--scheduler", "sync", "--data-dir",
                               str(demo_zip), "--output", "ref", cwd=work)
        assert reference.returncode == 0, reference.stderr
        # the printed submit lines, as printed: by address, and by scheduler file
        for line, out in ((shown["submit"], "by-address-cli"), (shown["or"], "by-file-cli")):
            argv = line.split()
            assert argv[:3] == ["guideloom", "run", "WORKFLOW"], line
            done = _guideloom("run", "force_signals", *argv[3:], "--data-dir", str(demo_zip),
                              "--output", out, cwd=work)
            assert done.returncode == 0, done.stderr
            assert f"running scheduler: scheduler {address}" in done.stderr, done.stderr
            _same_npy(work / out, work / "ref")

        # the printed Python line, and client="tls://..." in another Python process
        (work / "job.py").write_text(PYTHON_JOB.format(
            connect=shown["python"], data=str(demo_zip), address=address))
        done = subprocess.run([sys.executable, "job.py"], cwd=work, capture_output=True,
                              text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        assert "exported" in done.stdout
        guideloom.export_to_numpy("force-curve", work / "want", data_dir=demo_zip,
                                  record_transform=_first_rows, client="sync")
        _same_npy(work / "by-client", work / "want")
        _same_npy(work / "by-address", work / "want")

        # the printed environment variables make a plain distributed.Client work
        words = shown["env"].split()
        assert words[0] == "export"
        env = {**os.environ, **dict(word.split("=", 1) for word in words[1:])}
        (work / "plain.py").write_text(PLAIN_CLIENT)
        plain = subprocess.run([sys.executable, "plain.py", address], cwd=work, env=env,
                               capture_output=True, text=True, timeout=120)
        assert plain.returncode == 0, plain.stderr
        assert plain.stdout.strip() == "6"
        bare = subprocess.run([sys.executable, "plain.py", address], cwd=work,
                              capture_output=True, text=True, timeout=120)
        assert bare.returncode != 0  # without them a plain Client cannot connect

        status = _run_local("status", "--state-dir", "state", cwd=work)
        assert status.returncode == 0
        assert "tls:       on" in status.stdout
    finally:
        stopped = _run_local("stop", "--state-dir", "state", cwd=work)
    assert stopped.returncode == 0, stopped.stderr
    assert not (state / "tls").exists()  # the credentials go with the cluster
    with pytest.raises(SchedulerCredentialsError):
        security.find_security(address)


@pytest.mark.cluster
@pytest.mark.slow
def test_local_script_scheduler_serves_the_guideloom_page_and_its_json(demo_zip, tmp_path):
    """guideloom's own launcher preloads the page: the printed page URL and its JSON answer
    over HTTP, and a run on that scheduler prints the page's URL, not how to get one."""
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    work = tmp_path / "work"
    work.mkdir()
    started = _run_local("start", "--workers", "1", "--state-dir", "state", cwd=work)
    try:
        assert started.returncode == 0, started.stderr
        shown = _printed(started.stdout)
        page = shown["page"].split()[0]
        assert page == shown["dashboard"].replace("/status", "/guideloom"), started.stdout
        with opener.open(page, timeout=30) as answer:
            assert answer.status == 200
            assert 'href="guideloom"' in answer.read().decode()
        with opener.open(page + "/json", timeout=30) as answer:
            assert json.loads(answer.read()) == {"exports": []}
        done = _guideloom("run", "force_signals", "--scheduler", shown["scheduler"],
                          "--data-dir", str(demo_zip), "--output", "out", cwd=work)
        assert done.returncode == 0, done.stderr
        assert f"guideloom page: {page} (experiments" in done.stderr, done.stderr
        assert "not served by this scheduler" not in done.stderr
        with opener.open(page + "/json", timeout=30) as answer:
            (export,) = json.loads(answer.read())["exports"]
        manifest = json.loads((work / "out" / "export.json").read_text())
        assert export["status"] == "published"
        assert export["experiments"]["done"] == export["experiments"]["total"] == (
            manifest["count"] + len(manifest["skipped"]))
        assert export["tasks"]["finished"] == manifest["n_partitions"]
        status = _run_local("status", "--state-dir", "state", cwd=work)
        assert f"page:      {page}" in status.stdout, status.stdout
    finally:
        stopped = _run_local("stop", "--state-dir", "state", cwd=work)
    assert stopped.returncode == 0, stopped.stderr


@pytest.mark.cluster
@pytest.mark.slow
def test_local_script_no_tls_is_plain_tcp_and_says_it_is_less_safe(tmp_path):
    from distributed import Client

    started = _run_local("start", "--workers", "1", "--no-dashboard", "--no-tls",
                         "--state-dir", "state", cwd=tmp_path)
    try:
        assert started.returncode == 0, started.stderr
        address = _printed(started.stdout)["scheduler"]
        assert address.startswith("tcp://127.0.0.1:")
        assert "plain TCP (--no-tls): anyone on this machine" in started.stdout
        assert not (tmp_path / "state" / "tls").exists()
        with Client(address, timeout=30) as client:
            assert client.submit(sum, [1, 2]).result(timeout=30) == 3
    finally:
        stopped = _run_local("stop", "--state-dir", "state", cwd=tmp_path)
    assert stopped.returncode == 0, stopped.stderr


def test_a_tls_address_without_credentials_anywhere_is_one_line_naming_where_to_get_them(
        demo_zip, tmp_path):
    from guideloom.cluster.local_procs import find_free_port

    address = f"tls://127.0.0.1:{find_free_port()}"
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("DASK_") and k != "GUIDELOOM_CLUSTER_STATE_DIR"}
    env["HOME"] = str(tmp_path)  # an empty address book and no default state folders
    done = _guideloom("run", "force_signals", "--scheduler", address, "--data-dir",
                      str(demo_zip), "--output", "out", cwd=tmp_path, env=env)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"guideloom: error: the Dask scheduler at {address} needs its "
                           "cluster's TLS credentials"), line
    assert "--scheduler-file STATE_DIR/scheduler.json" in line
    assert "DASK_DISTRIBUTED__COMM__TLS__" in line
    assert not (tmp_path / "out").exists()
