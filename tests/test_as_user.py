"""Scripts run the way users run them: ``python file.py`` in a subprocess from a temporary
directory, no ``__main__`` guard, no ``PYTHONPATH``; notebooks through IPython; Ctrl-C and SIGKILL
sent to real process groups."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from guideloom.demo import make_demo_data
from tests.child_processes import start_interruptible

SEED_VIEW = """
import logging
import numpy as np
import guideloom
logging.getLogger("guideloom").addHandler(logging.StreamHandler())  # its messages on stderr
logging.getLogger("guideloom").setLevel(logging.INFO)
from guideloom.streaming import export_to_numpy, load_export

print("top level ran")
ds = guideloom.load(data_dir="./data")
guideloom.add_view(ds, "force-signals", fields={
    "force": "force_data",
    "geometry": "process-parameters/geometry",
    "blankholder_force": "process-parameters/blankholder_force",
    "split": "process-parameters/split",
})
"""

SEED_TRANSFORM = """
import numpy as np
N_SAMPLES = 1000


def resample_and_emit(rec):
    force = np.asarray(rec["force"])
    t_old = np.linspace(0.0, 1.0, force.shape[0])
    t_new = np.linspace(0.0, 1.0, N_SAMPLES)
    resampled = np.stack(
        [np.interp(t_new, t_old, force[:, c]) for c in range(force.shape[1])], axis=1
    )
    return {
        "force": resampled.astype(np.float32),
        "max_total_force": np.float32(force[:, 7].max()),
        "blankholder_force": np.float32(rec["blankholder_force"]),
        "label_geometry": np.int8(0 if rec["geometry"] == "concave" else 1),
    }
"""

SEED_EXPORT = """
paths = export_to_numpy("force-signals", "./exports/tutorial", data_dir="./data", dataset=ds,
                        record_transform=resample_and_emit, client=CLIENT)
export = load_export("./exports/tutorial")
print("rows", len(export), export.fields)
"""


def user_env() -> dict[str, str]:
    """The environment of a user's shell: no PYTHONPATH pointing into the checkout."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_script(folder: Path, name: str, text: str, timeout: float = 180,
               ) -> subprocess.CompletedProcess:
    (folder / name).write_text(textwrap.dedent(text))
    return subprocess.run([sys.executable, name], cwd=folder, env=user_env(),
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def user_dir(tmp_path) -> Path:
    make_demo_data(tmp_path / "data", n=24)
    return tmp_path


def exported(folder: Path) -> dict[str, np.ndarray]:
    root = folder / "exports" / "tutorial"
    return {p.stem: np.load(p) for p in sorted(root.glob("*.npy"))}


@pytest.mark.fast_case("module beside the script-None")
@pytest.mark.parametrize("client", ["None", "'local:2'"])
@pytest.mark.parametrize("where", ["script", "module beside the script"])
def test_seed_section_3_as_plain_script(user_dir, client, where):
    if where == "script":
        text = SEED_VIEW + SEED_TRANSFORM + f"CLIENT = {client}\n" + SEED_EXPORT
    else:  # the transform and a module-level constant it uses live in mytransforms.py
        (user_dir / "mytransforms.py").write_text(SEED_TRANSFORM)
        text = (SEED_VIEW + "from mytransforms import resample_and_emit\n"
                + f"CLIENT = {client}\n" + SEED_EXPORT)
    out = run_script(user_dir, "export.py", text)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count("top level ran") == 1
    assert "Traceback" not in out.stderr
    assert "rows 24 ('blankholder_force', 'force', 'label_geometry', 'max_total_force')" \
        in out.stdout
    mode = "in-process" if client == "None" else "local-cluster"
    assert f"guideloom: running {mode}" in out.stderr
    # the same numbers as the transform computed here, in this process
    import importlib.util

    import guideloom

    (user_dir / "reference_transform.py").write_text(SEED_TRANSFORM)
    spec = importlib.util.spec_from_file_location("reference_transform",
                                                  user_dir / "reference_transform.py")
    reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference)

    ds = guideloom.load(data_dir=user_dir / "data")
    guideloom.add_view(ds, "force-signals", fields={
        "force": "force_data", "geometry": "process-parameters/geometry",
        "blankholder_force": "process-parameters/blankholder_force"})
    arrays = exported(user_dir)
    for k, rec in enumerate(guideloom.streaming.iter_view("force-signals", dataset=ds,
                                                           data_dir=user_dir / "data")):
        expected = reference.resample_and_emit(rec)
        assert arrays["sim_ids"][k] == rec["_sim_id"]
        for alias, value in expected.items():
            np.testing.assert_array_equal(arrays[alias][k], value)


def test_readme_python_examples_as_one_plain_script(tmp_path):
    pytest.importorskip("torch", reason="the README's examples use torch (optional)")
    import re

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    assert len(blocks) >= 3
    make_demo_data(tmp_path / "demo-data", n=36)
    out = run_script(tmp_path, "readme_examples.py",
                     'print("top level ran")\n' + "\n".join(blocks) + "\n")
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.count("top level ran") == 1
    assert "Traceback" not in out.stderr
    assert (tmp_path / "exports" / "force-signals" / "export.json").is_file()
    assert "('blankholder_force', 'force', 'label_geometry', 'max_total_force')" in out.stdout


@pytest.mark.cluster
@pytest.mark.slow
def test_cluster_reused_by_the_second_export_and_dashboard_printed_once(user_dir):
    text = SEED_VIEW + SEED_TRANSFORM + textwrap.dedent("""
        import time
        import guideloom.cluster.embedded as embedded
        for k in range(3):
            t0 = time.perf_counter()
            export_to_numpy("force-signals", f"./exports/e{k}", dataset=ds,
                            record_transform=resample_and_emit, client="local:2",
                            show_progress=True)
            print(f"export {k} took {time.perf_counter() - t0:.3f} s")
        print("scratch", embedded.running_cluster().scratch)
        """)
    out = run_script(user_dir, "three.py", text)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stderr.count("Dask dashboard: http://127.0.0.1:") == 1
    assert out.stderr.count("local cluster of 2 workers (started)") == 1
    assert out.stderr.count("local cluster of 2 workers (reused)") == 2
    assert "24/24" in out.stderr
    times = [float(line.split()[3]) for line in out.stdout.splitlines()
             if line.startswith("export ")]
    assert len(times) == 3
    scratch = Path(out.stdout.split("scratch ")[1].split()[0])
    assert scratch.name.startswith("cluster-")
    assert scratch.parent.name.startswith("guideloom-")
    assert not scratch.exists()  # closed at interpreter exit, scratch removed
    # Not a timed assertion: a warm export costs a dispatch, a cold one a cluster start.
    assert max(times[1:]) < times[0]


@pytest.mark.cluster
def test_ipython_cell_functions_run_on_the_cluster(user_dir):
    pytest.importorskip("IPython")
    cells = [SEED_VIEW, SEED_TRANSFORM, "CLIENT = 'local:2'\n" + SEED_EXPORT]
    driver = textwrap.dedent(f"""
        from IPython.core.interactiveshell import InteractiveShell
        shell = InteractiveShell.instance()
        for cell in {cells!r}:
            result = shell.run_cell(cell)
            if not result.success:
                raise SystemExit(f"cell failed: {{result.error_in_exec!r}}")
        """)
    out = run_script(user_dir, "notebook.py", driver)
    assert out.returncode == 0, (out.stdout + out.stderr)[-3000:]
    assert out.stdout.count("top level ran") == 1
    assert "guideloom: running local-cluster" in out.stderr
    assert "rows 24" in out.stdout


# --- interrupts --------------------------------------------------------------------------
SLOW_TRANSFORMS = """
import os
import time
from pathlib import Path


def slow_first_rows(rec):
    Path(os.environ["STARTED_MARKER"]).touch()
    time.sleep(60)  # the work being interrupted
    return {"head": rec["force_data"][:4]}
"""

SLOW_WORKFLOW = """
name = "slow"
python_path = ["."]
[dataset]
data_dir = "data"
[view]
name = "force-curve"
[transforms]
record = "slow_transforms:slow_first_rows"
[output]
kind = "npy"
path = "exports/slow"
partition_size = 2
"""


def start_slow_job(folder: Path, scheduler: str) -> tuple[subprocess.Popen, Path]:
    (folder / "slow_transforms.py").write_text(SLOW_TRANSFORMS)
    (folder / "slow.toml").write_text(SLOW_WORKFLOW)
    marker = folder / "started"
    env = {**user_env(), "STARTED_MARKER": str(marker)}
    proc = start_interruptible([sys.executable, "-m", "guideloom", "run", "slow.toml",
                                "--scheduler", scheduler], cwd=folder, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not marker.exists():  # wait for an event: a task has started
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the job never started a task"
        time.sleep(0.05)
    return proc, marker


def descendants(pid: int) -> list[psutil.Process]:
    return psutil.Process(pid).children(recursive=True)


def wait_gone(procs: list[psutil.Process], timeout: float) -> list[psutil.Process]:
    _, alive = psutil.wait_procs(procs, timeout=timeout)
    return alive


@pytest.mark.fast_case("sync")
@pytest.mark.parametrize("scheduler", ["sync", "local:2"])
def test_ctrl_c_stops_within_2_s_with_one_line_and_exit_130(user_dir, scheduler):
    proc, _ = start_slow_job(user_dir, scheduler)
    children = descendants(proc.pid)
    if scheduler != "sync":
        assert len(children) >= 2  # the worker processes
    t0 = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    _, err = proc.communicate(timeout=30)
    elapsed = time.monotonic() - t0
    assert proc.returncode == 130, err
    assert elapsed <= 2.0, f"took {elapsed:.2f} s to stop"
    assert "Traceback" not in err
    assert "distributed." not in err, err
    assert "Exception" not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[-1] == "guideloom: interrupted"
    assert not wait_gone(children, 5.0), "a worker outlived the driver"


@pytest.mark.cluster
@pytest.mark.slow
def test_sigkill_of_the_driver_takes_the_workers_down_within_5_s(user_dir):
    proc, _ = start_slow_job(user_dir, "local:2")
    children = descendants(proc.pid)
    assert len(children) >= 2
    os.killpg(proc.pid, signal.SIGKILL)  # the driver's group only: workers have their own
    proc.communicate(timeout=30)
    assert not wait_gone(children, 5.0), "a worker outlived the killed driver"
