"""``guideloom run/inspect/status/demo`` as real processes against real Dask clusters.

The workflow files under ``workflows/`` run on a ``dask scheduler`` plus two ``dask worker``
processes started here (127.0.0.1, stopped by PID), and their outputs are compared bit for bit
with the in-process Python API (``client="sync"``).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import psutil
import pytest
from guideloom.workflows import demo_transforms

import guideloom
from guideloom.cli import main
from guideloom.cluster.local_procs import find_free_port, start_local_cluster
from tests import export_helpers as helpers
from tests.child_processes import start_interruptible

ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = ROOT / "workflows"
DIE_ID = 13


@pytest.fixture(scope="session")
def die_flags(tmp_path_factory) -> Path:
    """Where ``die_once_first_rows`` on the cluster's workers records its first attempt."""
    return tmp_path_factory.mktemp("die_flags")


@pytest.fixture(scope="session")
def tcp_cluster(tmp_path_factory, die_flags):
    """``dask scheduler`` + two ``dask worker`` processes importing this worktree (TLS: the
    commands below find the credentials by the ``tls://`` address)."""
    saved = {k: os.environ.get(k) for k in ("GUIDELOOM_TEST_FLAG_DIR", "GUIDELOOM_TEST_DIE_ID")}
    os.environ["GUIDELOOM_TEST_FLAG_DIR"] = str(die_flags)  # the workers inherit these
    os.environ["GUIDELOOM_TEST_DIE_ID"] = str(DIE_ID)
    try:
        procs = start_local_cluster(2, pythonpath=[ROOT],
                                    state_dir=tmp_path_factory.mktemp("cluster"))
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    try:
        assert procs.address.startswith("tls://127.0.0.1:")
        with procs.client(timeout=30) as client:
            files = set(client.run(lambda: __import__("guideloom").__file__).values())
        assert files == {str(ROOT / "guideloom" / "__init__.py")}
        yield procs
    finally:
        procs.stop()


def cli(*args: str, env: dict | None = None, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "guideloom", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def force_signals_dataset(data_dir):
    ds = guideloom.load(data_dir)
    return guideloom.add_view(ds, "force-signals", fields={
        "force": "force_data", "geometry": "process-parameters/geometry",
        "blankholder_force": "process-parameters/blankholder_force",
        "split": "process-parameters/split"})


def reference_export(name: str, data_dir: Path, out: Path) -> None:
    """What each shipped workflow file describes, written by the Python API in-process."""
    if name == "force_signals":
        guideloom.export_to_numpy("force-signals", out, dataset=force_signals_dataset(data_dir),
                                  data_dir=data_dir, client="sync",
                                  record_transform=demo_transforms.resample_and_emit)
    elif name == "raw_force_tables":
        ds = guideloom.add_view(guideloom.load(data_dir), "force-raw", fields={
            "force": "force_data", "head": ("force_data", [0, 1, 2]),
            "geometry": "process-parameters/geometry",
            "blankholder_force": "process-parameters/blankholder_force"})
        guideloom.export_to_numpy_per_sim(
            "force-raw", out, dataset=ds, data_dir=data_dir, client="sync", compressed=True,
            where=lambda r: r["split"] == "train" and r["blankholder_force"] in (100, 300),
            transforms={"geometry": demo_transforms.geometry_label}, on_error="skip")
    elif name == "force_stream":
        storage = guideloom.StreamStorage(out, guideloom.StreamNumpyFormat(
            np.dtype([("force", "<f4"), ("doc", "<u4")])))
        guideloom.export_to_storage("force-curve", storage, data_dir=data_dir, client="sync",
                                    record_transform=demo_transforms.total_force_stream,
                                    partition_size=6)
    else:
        guideloom.export_to_zarr("pointcloud-op10", out, data_dir=data_dir, client="sync",
                                 where=lambda r: r["has_pointcloud"], compressor="lz4",
                                 transforms={"pointcloud_op10_z": demo_transforms.zero_to_nan},
                                 on_error="skip")


def assert_same_export(got_dir: Path, want_dir: Path) -> None:
    got, want = guideloom.load_export(got_dir), guideloom.load_export(want_dir)
    assert got.kind == want.kind
    assert got.fields == want.fields
    assert got.sim_ids.tobytes() == want.sim_ids.tobytes()
    assert len(got) == len(want) > 0
    for i in range(len(want)):
        a, b = got[i], want[i]
        for f in want.fields:
            assert a[f].dtype == b[f].dtype, (i, f)
            assert a[f].shape == b[f].shape, (i, f)
            assert a[f].tobytes() == b[f].tobytes(), (i, f)
    if want.kind in ("npy", "storage"):  # the files themselves are identical, byte for byte
        for path in sorted([*want_dir.glob("*.npy"), *want_dir.glob("shard-*")]):
            assert (got_dir / path.name).read_bytes() == path.read_bytes(), path.name


@pytest.mark.fast_case("raw_force_tables")
@pytest.mark.parametrize("name", ["force_signals", "raw_force_tables", "pointcloud_op10",
                                  "force_stream"])
def test_each_workflow_on_real_cluster_equals_in_process_api(name, tcp_cluster, demo_zip,
                                                             tmp_path, capsys):
    out = tmp_path / "out"
    done = cli("run", str(WORKFLOWS / f"{name}.toml"), "--scheduler", tcp_cluster.address,
               "--data-dir", str(demo_zip), "--output", str(out))
    assert done.returncode == 0, done.stderr
    reference_export(name, demo_zip, tmp_path / "ref")
    assert_same_export(out, tmp_path / "ref")
    count = len(guideloom.load_export(out))
    assert f"wrote {count} records of view" in done.stdout
    assert "skipped: 0" in done.stdout
    assert f"output: {out}" in done.stdout
    assert re.search(r"wall time: [\d.]+ s, throughput: [\d.]+ experiments/s", done.stdout)
    assert f"Dask dashboard: {tcp_cluster.dashboard_url}" in done.stderr

    assert main(["inspect", str(out)]) == 0
    shown = capsys.readouterr().out
    export = guideloom.load_export(out)
    assert f"records: {count}" in shown
    assert f"view: {export.manifest['view']}" in shown
    for field in export.fields:
        assert re.search(rf"^  {field} ", shown, flags=re.M), field
    assert "status: complete" in shown
    if name in ("raw_force_tables", "pointcloud_op10"):
        assert f"where={export.manifest['filters']['where']}" in shown


@pytest.mark.slow  # ~2 s; fast: test_export.py's killed worker retried bit-identically
def test_killed_worker_run_still_completes_bit_identical(tcp_cluster, die_flags, demo_zip,
                                                         tmp_path):
    job = tmp_path / "job.toml"
    job.write_text(f"""
python_path = ["{ROOT}"]
[dataset]
data_dir = "{demo_zip}"
[view]
name = "force-curve"
[transforms]
record = "tests.export_helpers:die_once_first_rows"
[output]
kind = "npy"
path = "out"
partition_size = 3
""")
    proc = subprocess.Popen([sys.executable, "-m", "guideloom", "run", str(job), "--scheduler",
                             tcp_cluster.address], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (die_flags / "pid").exists():  # the task reached experiment DIE_ID
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "experiment 13 was never reached"
            time.sleep(0.05)
        victim = int((die_flags / "pid").read_text())
        with tcp_cluster.client(timeout=30) as client:
            assert victim in client.run(os.getpid).values()
            os.kill(victim, signal.SIGKILL)  # a worker process of the cluster this test started
            stdout, stderr = proc.communicate(timeout=180)
            assert proc.returncode == 0, stderr
            assert victim not in client.run(os.getpid).values()
            client.wait_for_workers(2, timeout=60)  # the nanny restarted it for later tests
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "wrote 36 records" in stdout
    guideloom.export_to_numpy("force-curve", tmp_path / "ref", data_dir=demo_zip,
                              record_transform=helpers.first_rows, client="sync")
    assert_same_export(tmp_path / "out", tmp_path / "ref")


@pytest.mark.slow
def test_dashboard_status_and_resume_of_a_killed_run(tcp_cluster, demo_zip, tmp_path):
    """One gated run: poll the dashboard while it runs, kill it, ask status, resume it."""
    out, staging = tmp_path / "out", tmp_path / ".out.guideloom-staging"
    job = tmp_path / "job.toml"
    job.write_text(f"""
python_path = ["{ROOT}"]
[dataset]
data_dir = "{demo_zip}"
[view]
name = "force-curve"
[transforms]
record = "tests.export_helpers:blocking_first_rows"
code_version = "tests-blocking-1"
[output]
kind = "npy"
path = "out"
partition_size = 2
""")
    port = find_free_port()
    env = {**os.environ, "GUIDELOOM_TEST_BLOCK_FROM": "20"}  # tasks block from id 20 on
    log = tmp_path / "stderr.txt"
    with open(log, "w") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "guideloom", "run", str(job), "--scheduler", "local:2",
             "--dashboard", f"127.0.0.1:{port}"], cwd=ROOT, env=env, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=err)
    try:
        deadline = time.monotonic() + 120
        url = None
        while url is None:
            found = re.search(r"Dask dashboard: (http://\S+)", log.read_text())
            url = found.group(1) if found else None
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "no dashboard URL printed"
            time.sleep(0.05)
        assert url == f"http://127.0.0.1:{port}/status"
        with urllib.request.urlopen(url, timeout=30) as page:
            assert page.status == 200
            assert b"Dask" in page.read()
        while len(list((staging / "parts").glob("*.json"))) < 4:
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, "no partition finished in time"
            time.sleep(0.05)
        assert proc.poll() is None  # the job was running while the dashboard answered
        workers = psutil.Process(proc.pid).children(recursive=True)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver; its workers follow it (watchdog)
        proc.wait()
    _, alive = psutil.wait_procs(workers, timeout=5)
    assert not alive, "a worker outlived the killed driver"
    assert not out.exists()
    k = len(list((staging / "parts").glob("*.json")))
    assert 4 <= k <= 10  # ids 20.. never finish while gated

    for path in (out, staging):
        status = cli("status", str(path))
        assert status.returncode == 0, status.stderr
        assert f"incomplete: {k}/18 partitions done ({2 * k}/36 experiments)" in status.stdout
    shown = cli("inspect", str(out))
    assert shown.returncode == 0
    assert f"{k}/18 partitions done" in shown.stdout

    rerun = cli("run", str(job), "--scheduler", tcp_cluster.address)
    assert rerun.returncode == 0, rerun.stderr
    assert f"resumed: {k} partitions ({2 * k} experiments)" in rerun.stdout
    assert f"({36 - 2 * k} processed in this run)" in rerun.stdout
    assert "complete: 18/18 partitions done (36/36" in cli("status", str(out)).stdout
    guideloom.export_to_numpy("force-curve", tmp_path / "ref", data_dir=demo_zip,
                              record_transform=helpers.blocking_first_rows,
                              code_version=helpers.BLOCKING_CODE_VERSION, client="sync")
    assert_same_export(out, tmp_path / "ref")


@pytest.mark.parametrize("name", ["force_signals", "raw_force_tables", "pointcloud_op10",
                                  "force_stream"])
def test_dry_run_prints_the_plan_and_writes_nothing(name, demo_zip, tmp_path, capsys):
    before = sorted(tmp_path.iterdir())
    code = main(["run", str(WORKFLOWS / f"{name}.toml"), "--data-dir", str(demo_zip),
                 "--output", str(tmp_path / "out"), "--dry-run"])
    assert code == 0
    text = capsys.readouterr().out
    assert sorted(tmp_path.iterdir()) == before  # no target, no staging area
    n = {"force_signals": 36, "raw_force_tables": 18, "pointcloud_op10": 32,
         "force_stream": 36}[name]
    assert f"experiments: {n} with local data" in text
    assert re.search(r"partitions: \d+ of up to [46] experiments", text)
    assert re.search(r"total: (about )?[\d.]+ \w+ uncompressed \(\d+ bytes\)", text)
    if name == "force_signals":
        assert re.search(r"force +\(36, 1000, 8\) +float32 +1\.1 MiB", text)
        assert re.search(r"label_geometry +\(36,\) +int8 +36 B", text)
        assert "total: 1.1 MiB uncompressed (1152612 bytes)" in text
    if name == "pointcloud_op10":
        assert re.search(r"pointcloud_op10_z +\(32, 16000\) +float32", text)


def test_invalid_workflow_is_one_line_exit_2_before_any_work(demo_zip, tmp_path):
    text = (WORKFLOWS / "force_signals.toml").read_text().replace('kind = "npy"',
                                                                  'kind = "parquet"')
    job = tmp_path / "bad.toml"
    job.write_text(text)
    done = cli("run", str(job), "--data-dir", str(demo_zip), "--output", str(tmp_path / "o"))
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"guideloom: error: {job}: key 'output.kind': expected one of 'npy', 'npz', 'zarr', "
        "'storage', got 'parquet'")
    assert not (tmp_path / "o").exists()
    assert "dashboard" not in done.stdout + done.stderr


def test_usage_and_job_errors(demo_zip, tmp_path, capsys):
    assert main(["status", str(tmp_path / "nothing")]) == 2
    assert main(["run", str(tmp_path / "none.toml")]) == 2
    assert main(["run", str(WORKFLOWS / "force_signals.toml"), "--scheduler", "nowhere"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == f"guideloom: error: no export and no staged job at {tmp_path / 'nothing'}"
    assert err[1] == (f"guideloom: error: workflow file not found: {tmp_path / 'none.toml'} "
                      "(shipped workflows: force_signals, force_stream, pointcloud_op10, "
                      "preprocessed_thickness, raw_force_tables; see guideloom workflows)")
    assert err[2] == ("guideloom run: error: argument --scheduler: expected local, local:N, "
                      "fork, fork:N, sync, tls://HOST:PORT, tcp://HOST:PORT, slurm:N or pbs:N, "
                      "got 'nowhere' "
                      "(see guideloom run --help)")
    job = tmp_path / "fails.toml"
    job.write_text(f"""
python_path = ["{ROOT}"]
[dataset]
data_dir = "{demo_zip}"
[view]
name = "force-curve"
[transforms]
record = "tests.export_helpers:fail_on_multiples_of_7"
[output]
kind = "npy"
path = "out"
[run]
scheduler = "sync"
""")
    assert main(["run", str(job)]) == 1  # the job failed: exit 1, one line naming the experiment
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("guideloom: error: job failed: experiment 7 (")
    assert "fail_on_multiples_of_7 raised RuntimeError: cannot handle 7" in err
    assert not (tmp_path / "out").exists()
    assert main(["run", str(job), "--output", str(tmp_path / "o2"), "--dry-run"]) == 0


@pytest.mark.cluster
def test_demo_end_to_end(tmp_path):
    done = cli("demo", "--data-dir", str(tmp_path / "demo"), "--scheduler", "local:2",
               "--dashboard", "127.0.0.1:0")
    assert done.returncode == 0, done.stderr
    out = tmp_path / "demo" / "exports" / "force-signals"
    export = guideloom.load_export(out)
    assert len(export) == 36
    assert export[0]["force"].shape == (1000, 8)
    lines = done.stdout.splitlines()
    assert lines[0] == f"demo data: 36 experiments (zip layout) in {tmp_path / 'demo'}"
    assert f"wrote 36 records of view 'force-signals' to {out}" in done.stdout
    assert re.search(r"^export   : +[\d.]+ ms/record wall", done.stdout, flags=re.M)
    assert re.search(r"^read back: +[\d.]+ ms/record with load_export", done.stdout, flags=re.M)
    total = float(np.sum(export.batch(np.arange(36))["max_total_force"], dtype=np.float64))
    assert f"sum of max_total_force = {total:.1f} kN" in done.stdout
    assert "Dask dashboard: http://127.0.0.1:" in done.stderr


@pytest.mark.slow  # ~3 s; fast: test_demo_end_to_end (demo on the embedded cluster, its dashboard)
@pytest.mark.cluster
def test_demo_runs_on_the_embedded_cluster_and_keeps_its_dashboard_open(tmp_path):
    """The README's main command: the embedded cluster by default, and --keep-dashboard keeps
    the dashboard answering after the export until Ctrl-C, which then exits 0."""
    proc = start_interruptible(
        [sys.executable, "-m", "guideloom", "demo", "--n", "12", "--dashboard", "127.0.0.1:0",
         "--keep-dashboard"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    try:
        out = []
        for line in proc.stdout:  # blocks until the demo prints; ends if the process dies
            out.append(line)
            if line.startswith("dashboard: "):
                break
        assert out, "".join(out) + proc.stderr.read()
        assert out[-1].startswith("dashboard: "), "".join(out) + proc.stderr.read()
        link = out[-1].split()[1]
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/status", link), out[-1]
        assert "stays open until Ctrl-C" in out[-1]
        assert any("local-cluster" in line for line in out)
        assert (tmp_path / "demo-data" / "exports" / "force-signals" / "export.json").is_file()
        with urllib.request.urlopen(link, timeout=30) as page:  # the export has finished
            assert page.status == 200
        os.killpg(proc.pid, signal.SIGINT)
        rest, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, err
    assert rest.strip().splitlines()[-1] == "dashboard closed"
    assert "local cluster of" in err
    assert f"Dask dashboard: {link}" in err


def test_demo_help_says_it_runs_on_the_embedded_cluster():
    done = cli("demo", "--help")
    assert done.returncode == 0, done.stderr
    text = " ".join(done.stdout.split())
    assert "export it on the embedded local cluster" not in text  # that is the command list's
    assert "(default: local, the embedded cluster with its dashboard)" in text
    assert "--keep-dashboard [SECONDS]" in text
    assert "until Ctrl-C" in text


@pytest.mark.slow  # ~4 s; fast: tests/test_extract.py (on a cluster, --remove-zip)
@pytest.mark.cluster
def test_extract_then_run_gives_the_same_export(tmp_path):
    import zipfile

    data = tmp_path / "data"
    guideloom.make_demo_data(data, n=8, layout="zip")
    members = {}
    for archive in data.glob("*.zip"):
        with zipfile.ZipFile(archive) as zf:
            members.update({name: zf.read(name) for name in zf.namelist()})
    job = str(WORKFLOWS / "force_signals.toml")
    assert main(["run", job, "--data-dir", str(data), "--output", str(tmp_path / "zipped"),
                 "--scheduler", "sync"]) == 0
    done = cli("extract", str(data), "--scheduler", "local:2", "--remove-zip")
    assert done.returncode == 0, done.stderr
    assert "extracted 8 experiments" in done.stdout
    assert "removed archives: concave.zip, convex.zip" in done.stdout
    assert not list(data.glob("*.zip"))
    assert {p.name: p.read_bytes() for p in (data / "h5").iterdir()} == members
    assert main(["run", job, "--data-dir", str(data), "--output", str(tmp_path / "loose"),
                 "--scheduler", "sync"]) == 0
    assert_same_export(tmp_path / "loose", tmp_path / "zipped")
    missing = cli("extract", str(tmp_path / "nowhere"))
    assert missing.returncode == 2
    assert len(missing.stderr.strip().splitlines()) == 1


def test_skip_policy_summary_names_skipped_experiments(demo_zip, tmp_path, capsys):
    job = tmp_path / "skip.toml"
    job.write_text(f"""
python_path = ["{ROOT}"]
[dataset]
data_dir = "{demo_zip}"
[view]
name = "force-curve"
[transforms]
record = "tests.export_helpers:fail_on_multiples_of_7"
[output]
kind = "npy"
path = "out"
[run]
on_error = "skip"
scheduler = "sync"
""")
    assert main(["run", str(job)]) == 0
    captured = capsys.readouterr()
    assert "wrote 31 records of view 'force-curve'" in captured.out
    assert re.search(r"^skipped: 5 experiments \(experiment 7 \(.*cannot handle 7; "
                     r"experiment 14 ", captured.out, flags=re.M)
    warning = [x for x in captured.err.splitlines() if x.startswith("guideloom: warning:")]
    assert len(warning) == 1
    assert "skipped 5 experiment(s): 7, 14, 21, 28, 35" in warning[0]
    assert 7 not in guideloom.load_export(tmp_path / "out").sim_ids.tolist()


LOCAL_TRANSFORM = '''
import numpy as np
SCALE = 3.0


def _head(force):
    return np.asarray(force)[:5] * SCALE


def scaled_head(rec):
    return {"head": _head(rec["force_data"]).astype(np.float32)}
'''

WORKFLOW_WITH_MODULE = '''
python_path = ["."]
[dataset]
data_dir = "{data}"
[view]
name = "force-curve"
[transforms]
record = "{module}:scaled_head"
[output]
kind = "npy"
path = "out"
'''


def test_python_path_module_reaches_remote_workers_by_value(tcp_cluster, demo_zip, tmp_path):
    (tmp_path / "beside.py").write_text(LOCAL_TRANSFORM)  # the workers' paths lack tmp_path
    job = tmp_path / "job.toml"
    job.write_text(WORKFLOW_WITH_MODULE.format(data=demo_zip, module="beside"))
    done = cli("run", str(job), "--scheduler", tcp_cluster.address)
    assert done.returncode == 0, done.stderr
    head = np.load(tmp_path / "out" / "head.npy")
    ds = guideloom.load(demo_zip)
    first = next(guideloom.streaming.iter_view("force-curve", dataset=ds, data_dir=demo_zip))
    np.testing.assert_array_equal(head[0], (first["force_data"][:5] * 3.0).astype(np.float32))


def test_package_missing_on_the_workers_is_one_line_naming_it(tcp_cluster, demo_zip, tmp_path):
    # A package installed for the driver only: in a site-packages folder on the driver's path,
    # so it travels by reference (as installed packages do) and the workers cannot import it.
    site = tmp_path / "site-packages"
    (site / "gl_driver_only").mkdir(parents=True)
    (site / "gl_driver_only" / "__init__.py").write_text(LOCAL_TRANSFORM)
    info = site / "gl_driver_only-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gl-driver-only\nVersion: 1.0\n")
    (info / "top_level.txt").write_text("gl_driver_only\n")
    job = tmp_path / "job.toml"
    job.write_text(WORKFLOW_WITH_MODULE.format(data=demo_zip, module="gl_driver_only")
                   .replace('python_path = ["."]', f'python_path = ["{site}"]'))
    done = cli("run", str(job), "--scheduler", tcp_cluster.address)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert "Traceback" not in done.stderr
    assert lines[-1].startswith("guideloom: error: job failed: the Dask worker on ")
    assert "cannot import module 'gl_driver_only'" in lines[-1]
    assert "install it on the workers" in lines[-1]
    assert not (tmp_path / "out").exists()
