"""Errors a new user hits that must name the real cause and the fix, in one line, and fast:
the ``guideloom`` command in a subprocess from a temporary directory, and the Python API."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from guideloom.demo import make_demo_data
from tests.test_cli_newcomer import guideloom

NOBODY = "tcp://127.0.0.1:1"  # a privileged port: no scheduler listens there


@pytest.fixture
def project(tmp_path) -> Path:
    """A project directory with 4 small demo experiments in ./demo-data."""
    make_demo_data(tmp_path / "demo-data", n=4, scan_shape=(8, 10))
    return tmp_path


def assert_unreachable_hint(line: str) -> None:
    assert NOBODY in line
    assert "dask scheduler" in line
    assert "--scheduler local" in line


@pytest.mark.fast_case("dry-run")
@pytest.mark.parametrize("extra", [(), ("--dry-run",)], ids=["run", "dry-run"])
def test_an_unreachable_scheduler_fails_fast_and_says_how_to_start_one(project, extra):
    t0 = time.monotonic()
    out = guideloom("run", "force_signals", "--scheduler", NOBODY, *extra, cwd=project,
                    timeout=60)
    wall = time.monotonic() - t0
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("guideloom: error: no Dask scheduler answered at")
    assert_unreachable_hint(lines[0])
    assert wall < 10, f"the command took {wall:.1f} s to give up (Dask's default wait is 30 s)"
    assert not (project / "demo-data" / "exports").exists()


@pytest.mark.cluster
@pytest.mark.slow
def test_a_scheduler_without_workers_says_how_to_start_them(project, tmp_path):
    scheduler_file = tmp_path / "scheduler.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
         "--port", "0", "--dashboard-address", "127.0.0.1:0",
         "--scheduler-file", str(scheduler_file)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        address = None
        while address is None:  # the scheduler writes its file once it listens
            assert proc.poll() is None, "dask scheduler exited"
            assert time.monotonic() < deadline, "dask scheduler did not start"
            try:
                address = json.loads(scheduler_file.read_text())["address"]
            except (FileNotFoundError, ValueError, KeyError):
                time.sleep(0.05)
        out = guideloom("run", "force_signals", "--scheduler", address, cwd=project,
                        timeout=60, DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="2s")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert out.returncode == 2, out.stderr
    errors = [line for line in out.stderr.splitlines() if "error:" in line]
    assert errors == [f"guideloom: error: the Dask scheduler at {address} has no workers "
                      f"(waited 2 s): start them with `dask worker {address}`, or use the "
                      "local cluster instead (--scheduler local, client='local')"], out.stderr


@pytest.mark.slow
def test_an_unreachable_scheduler_from_python_is_an_oserror_within_5_s(demo_zip, tmp_path):
    from guideloom import export_to_numpy
    from guideloom.errors import SchedulerUnreachableError

    t0 = time.monotonic()
    with pytest.raises(OSError) as caught:
        export_to_numpy("force-curve", tmp_path / "out", data_dir=demo_zip, client=NOBODY)
    wall = time.monotonic() - t0
    assert isinstance(caught.value, SchedulerUnreachableError)
    assert_unreachable_hint(str(caught.value))
    assert "client='local'" in str(caught.value)
    assert wall < 5, f"gave up after {wall:.1f} s"
    assert not (tmp_path / "out").exists()


SLURM_SETTINGS = """\
jobqueue:
  slurm:
    cores: 1
    processes: 1
    memory: 1GiB
    walltime: "00:05:00"
"""
# a slurm.conf whose controller does not listen (port 1): sbatch cannot reach it
UNREACHABLE_CONTROLLER = """\
ClusterName=nowhere
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=1
MessageTimeout=2
NodeName=localhost CPUs=1
PartitionName=debug Nodes=localhost Default=YES
"""
needs_sbatch = pytest.mark.skipif(
    shutil.which("sbatch") is None,
    reason="sbatch not installed (apt-get install -y slurm-client)")


def slurm_run(project: Path, slurm_conf: Path) -> tuple[subprocess.CompletedProcess, float]:
    pytest.importorskip("dask_jobqueue")
    settings = project / "jobqueue.yaml"
    settings.write_text(SLURM_SETTINGS)
    t0 = time.monotonic()
    out = guideloom("run", "force_signals", "--cluster", "slurm", "--output", "out",
                    cwd=project, timeout=120, SLURM_CONF=str(slurm_conf),
                    GUIDELOOM_JOBQUEUE_CONFIG=str(settings))
    return out, time.monotonic() - t0


def error_line(out: subprocess.CompletedProcess) -> str:
    errors = [line for line in out.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, out.stderr
    return errors[0]


@pytest.mark.slurm
@needs_sbatch
def test_slurm_conf_naming_no_file_is_said_at_once(project):
    missing = project / "no-such-slurm.conf"
    out, wall = slurm_run(project, missing)
    assert out.returncode == 1, out.stderr
    line = error_line(out)
    assert f"SLURM_CONF={missing} names no file" in line
    assert "partition/queue" not in line
    assert wall < 20, f"{wall:.1f} s (sbatch itself retries a missing SLURM_CONF for 60 s)"


@pytest.mark.slurm
@pytest.mark.fast_case("empty-slurm-conf")
@needs_sbatch
@pytest.mark.parametrize("conf_text", ["", UNREACHABLE_CONTROLLER],
                         ids=["empty-slurm-conf", "controller-down"])
def test_sbatch_without_a_reachable_slurm_blames_the_configuration(project, conf_text):
    conf = project / "slurm.conf"
    conf.write_text(conf_text)
    out, _ = slurm_run(project, conf)
    assert out.returncode == 1, out.stderr
    line = error_line(out)
    assert line.startswith("guideloom: error: job failed: sbatch failed: sbatch:")
    assert "SLURM is not configured or its controller is not reachable" in line
    assert f"SLURM_CONF={conf}" in line
    assert "slurm.conf" in line
    assert "partition/queue" not in line


def test_a_shipped_workflow_without_its_data_says_how_to_make_it_or_point_elsewhere(tmp_path):
    out = guideloom("run", "force_signals", "--dry-run", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    [line] = out.stderr.strip().splitlines()
    assert f"data directory not found: {tmp_path / 'demo-data'}" in line
    assert "`guideloom make-demo-data demo-data`" in line
    assert "--data-dir" in line
    suggested = re.search(r"`guideloom (make-demo-data [^`]+)`", line)
    assert suggested is not None
    made = guideloom(*shlex.split(suggested.group(1)), "--n", "4", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    again = guideloom("run", "force_signals", "--dry-run", cwd=tmp_path)
    assert again.returncode == 0, again.stderr


def typo(row):
    return row["spilt"] == "train"


@pytest.mark.parametrize("call", ["iter_view", "export_to_numpy"])
def test_a_typo_in_a_where_lambda_names_the_column_and_lists_the_columns(demo_zip, tmp_path,
                                                                        call):
    import guideloom
    from guideloom.errors import UnknownColumnError

    with pytest.raises(KeyError) as caught:  # old code catching KeyError still catches it
        if call == "iter_view":
            list(guideloom.iter_view("force-curve", data_dir=demo_zip, where=typo))
        else:
            guideloom.export_to_numpy("force-curve", tmp_path / "out", data_dir=demo_zip,
                                      where=typo)
    assert isinstance(caught.value, UnknownColumnError)
    message = str(caught.value)
    assert message.startswith("where= looked up 'spilt', which is not a column of "
                              "process_parameters.csv; columns: ")
    assert "split" in message.split("columns: ", 1)[1]
    assert "has_oil" in message
    assert "\n" not in message
    assert not (tmp_path / "out").exists()


def test_a_key_error_of_the_users_own_inside_where_is_not_blamed_on_the_row(demo_zip):
    import guideloom
    from guideloom.errors import UnknownColumnError

    weights = {"spilt": 1.0}  # the user's own dict: its missing key is the user's business
    with pytest.raises(KeyError) as caught:
        list(guideloom.iter_view("force-curve", data_dir=demo_zip,
                                 where=lambda row: weights[row["split"]] > 0))
    assert not isinstance(caught.value, UnknownColumnError)
    assert caught.value.args[0] in ("train", "val", "test")  # the missing key of weights
    # row.get and `in` keep working on a column the table lacks
    kept = list(guideloom.iter_view("force-curve", data_dir=demo_zip,
                                    where=lambda row: "spilt" not in row
                                    and row.get("spilt") is None and row["split"] == "train"))
    assert kept
    assert all(r["_sim_id"] is not None for r in kept)


def records(data_dir: Path) -> dict:
    import guideloom

    return {r["_sim_id"]: r for r in guideloom.iter_view("force-curve", data_dir=data_dir)}


@pytest.mark.fast_case("zips-kept")
@pytest.mark.parametrize("remove_zip", [(), ("--remove-zip",)], ids=["zips-kept", "remove-zip"])
def test_regenerating_extracted_demo_data_serves_the_new_experiments(tmp_path, remove_zip):
    small = ("--n", "6", "--scan-shape", "8", "10")
    assert guideloom("make-demo-data", "demo-data", *small, cwd=tmp_path).returncode == 0
    extracted = guideloom("extract", "demo-data", "--scheduler", "sync", *remove_zip,
                          cwd=tmp_path)
    assert extracted.returncode == 0, extracted.stderr
    h5 = tmp_path / "demo-data" / "h5"
    assert len(list(h5.glob("*.h5"))) == 6
    assert (tmp_path / "demo-data" / "concave.zip").exists() == (not remove_zip)
    (h5 / "notes.txt").write_text("mine")  # the user's own files there are never removed
    edited = h5 / "0002.h5"
    edited.write_bytes(edited.read_bytes() + b"\0")  # no longer extract's copy: the user's
    again = guideloom("make-demo-data", "demo-data", *small, "--seed", "1", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert sorted(p.name for p in h5.iterdir()) == ["0002.h5", "notes.txt"]

    fresh = make_demo_data(tmp_path / "fresh", n=6, scan_shape=(8, 10), seed=1).data_dir
    got, want = records(tmp_path / "demo-data"), records(fresh)
    assert sorted(got) == sorted(want) == list(range(6))
    seed0 = records(make_demo_data(tmp_path / "seed0", n=6, scan_shape=(8, 10)).data_dir)
    for sim_id in (0, 1, 3, 4, 5):
        assert got[sim_id].keys() == want[sim_id].keys()
        for key, value in want[sim_id].items():
            np.testing.assert_array_equal(got[sim_id][key], value)
        assert not np.array_equal(got[sim_id]["force_data"], seed0[sim_id]["force_data"])


def test_make_demo_data_tells_a_cli_user_about_force_and_a_python_user_about_force_true(
        tmp_path):
    from guideloom.errors import NotDemoDataError

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("mine")
    out = guideloom("make-demo-data", "mine", "--n", "2", cwd=tmp_path)
    assert out.returncode == 2
    assert out.stderr == ("guideloom: error: mine is not empty and was not made by "
                          "make-demo-data; choose an empty directory, or pass --force to write "
                          "the demo files into it\n")
    with pytest.raises(FileExistsError) as caught:
        make_demo_data(tmp_path / "mine", n=2)
    assert isinstance(caught.value, NotDemoDataError)
    assert "pass force=True to write" in str(caught.value)
    assert "--force" not in str(caught.value)
    assert (tmp_path / "mine" / "notes.txt").read_text() == "mine"


def option_help(help_text: str) -> dict[str, str]:
    """``{argument: its help text}`` from argparse's ``--help`` output (wrapped lines joined;
    a word broken at a hyphen reads ``in- process``, so tests run it at a fixed width)."""
    found: dict[str, str] = {}
    name = None
    for line in help_text.splitlines():
        m = re.match(r"^  (\S+(?: \S+)*?)(?:  +(\S.*))?$", line)
        if m and not line.startswith("   "):
            name = m.group(1).split()[0].rstrip(",")
            found[name] = m.group(2) or ""
        elif name is not None and line.startswith("   ") and line.strip():
            found[name] = (found[name] + " " + line.strip()).strip()
        elif not line.strip():
            name = None
    return found


def test_make_demo_data_help_describes_every_argument(tmp_path):
    out = guideloom("make-demo-data", "--help", cwd=tmp_path, COLUMNS="100")
    assert out.returncode == 0, out.stderr
    helps = option_help(out.stdout)
    for argument in ("data_dir", "--n", "--scan-shape", "--layout", "--seed", "--force"):
        assert helps.get(argument), f"{argument} has no help text in:\n{out.stdout}"
    assert "regenerated" in helps["data_dir"]
    assert "zip" in helps["--layout"]
    assert "loose" in helps["--layout"]
    assert "default 0" in helps["--seed"]


def test_extract_help_speaks_of_extraction_not_a_workflow(tmp_path):
    out = guideloom("extract", "--help", cwd=tmp_path, COLUMNS="100")
    assert out.returncode == 0, out.stderr
    helps = option_help(out.stdout)
    assert "[run]" not in out.stdout
    assert "workflow" not in out.stdout
    assert "h5/" in helps["data_dir"]
    assert helps["--scheduler"].endswith("(default: in-process for small jobs and a local "
                                         "cluster when it pays)")
    run_help = option_help(guideloom("run", "--help", cwd=tmp_path, COLUMNS="100").stdout)
    assert "the workflow's [run] scheduler" in run_help["--scheduler"]
