"""Overwrite only what guideloom wrote, and one run per target (two real processes)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import guideloom
from guideloom.demo import make_demo_data
from guideloom.errors import TargetBusyError, UnsafeTargetError
from tests import export_helpers as helpers


@pytest.fixture
def data(tmp_path) -> Path:
    make_demo_data(tmp_path / "data", n=6)
    return tmp_path / "data"


def export(data: Path, target: Path, **options):
    return guideloom.export.export("force-curve", target, kind="npy", data_dir=data,
                                   record_transform=helpers.first_rows, client="sync", **options)


@pytest.mark.parametrize("where", ["the data directory", "a parent of the data directory"])
def test_the_data_directory_and_its_parents_are_never_targets(data, where):
    target = data if where == "the data directory" else data.parent
    before = sorted(p.name for p in data.iterdir())
    with pytest.raises(UnsafeTargetError, match=where):
        export(data, target, overwrite=True)
    assert sorted(p.name for p in data.iterdir()) == before
    assert (data / "concave.zip").is_file()
    assert (data / "metadata.json").is_file()


def test_cli_data_dir_as_output_with_overwrite_is_refused(data):
    done = subprocess.run([sys.executable, "-m", "guideloom", "run", "force_signals",
                           "--data-dir", str(data), "--output", str(data), "--overwrite"],
                          cwd=data.parent, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip() == (f"guideloom: error: refusing to write an export to {data}: "
                                   "it is the data directory; choose another output path")
    assert (data / "concave.zip").is_file()
    assert (data / "process_parameters.csv").is_file()


def test_a_directory_guideloom_did_not_write_is_never_replaced(data, tmp_path):
    other = tmp_path / "notes"
    other.mkdir()
    (other / "thesis.tex").write_text("precious")
    with pytest.raises(UnsafeTargetError, match="is not a guideloom export"):
        export(data, other, overwrite=True)
    assert (other / "thesis.tex").read_text() == "precious"
    assert not list(tmp_path.glob(".notes.guideloom-*"))  # refused before any work


def test_an_empty_directory_or_an_export_may_be_replaced(data, tmp_path):
    (tmp_path / "out").mkdir()
    export(data, tmp_path / "out")
    with pytest.raises(FileExistsError, match="overwrite=True"):
        export(data, tmp_path / "out")
    export(data, tmp_path / "out", overwrite=True, sim_ids=[1, 2])
    assert guideloom.load_export(tmp_path / "out").sim_ids.tolist() == [1, 2]
    assert not list(tmp_path.glob(".out.guideloom-lock"))  # released and removed


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_another_tools_export_json_is_never_replaced(data, tmp_path):
    other = tmp_path / "album"
    other.mkdir()
    (other / "export.json").write_text('{"tool": "photo-exporter", "count": 2}')
    (other / "IMG_0001.jpg").write_bytes(b"\xff\xd8 a photo")
    (other / "notes.txt").write_text("precious")
    before = _tree(other)
    for overwrite in (True, False):
        with pytest.raises(UnsafeTargetError, match="not a guideloom export manifest"):
            export(data, other, overwrite=overwrite)
    assert _tree(other) == before
    assert not list(tmp_path.glob(".album.guideloom-*"))  # refused before any work


@pytest.mark.parametrize("kind", ["npy", "npz", "zarr"])
@pytest.mark.parametrize("intruder", ["photo.jpg", "notes/thesis.tex", "7.npz", ".hidden"])
def test_an_export_holding_files_it_did_not_write_is_never_replaced(data, tmp_path, kind,
                                                                     intruder):
    target = tmp_path / "out"
    guideloom.export.export("force-curve", target, kind=kind, data_dir=data, sim_ids=[0, 1],
                            record_transform=helpers.first_rows, client="sync")
    (target / intruder).parent.mkdir(exist_ok=True)
    (target / intruder).write_bytes(b"not guideloom's")
    before = _tree(target)
    with pytest.raises(UnsafeTargetError, match=f"refusing to replace {target}: .*"
                       f"{intruder.split('/')[0]}"):
        guideloom.export.export("force-curve", target, kind=kind, data_dir=data, overwrite=True,
                                record_transform=helpers.first_rows, client="sync")
    assert _tree(target) == before
    top = target / intruder.split("/")[0]
    shutil.rmtree(top) if top.is_dir() else top.unlink()  # its own files only: replaced
    (target / "export.json.tmp-4242").write_text("{")  # ours, left by an interrupted write
    guideloom.export.export("force-curve", target, kind=kind, data_dir=data, overwrite=True,
                            sim_ids=[2], record_transform=helpers.first_rows, client="sync")
    assert guideloom.load_export(target).sim_ids.tolist() == [2]


def test_a_file_inside_a_zarr_array_is_foreign_too(data, tmp_path):
    target = tmp_path / "out.zarr"
    guideloom.export.export("force-curve", target, kind="zarr", data_dir=data, sim_ids=[0, 1],
                            record_transform=helpers.first_rows, client="sync")
    (target / "force" / "c" / "notes.txt").write_text("mine")
    with pytest.raises(UnsafeTargetError, match=r"force/c/notes.txt"):
        guideloom.export.export("force-curve", target, kind="zarr", data_dir=data,
                                overwrite=True, record_transform=helpers.first_rows,
                                client="sync")
    assert (target / "force" / "c" / "notes.txt").read_text() == "mine"


BLOCKED_RUN = """
import sys
from tests import export_helpers
import guideloom
guideloom.export_to_numpy("force-curve", sys.argv[1], data_dir=sys.argv[2],
                          record_transform=export_helpers.blocking_first_rows,
                          code_version=export_helpers.BLOCKING_CODE_VERSION, client="sync")
"""


def test_a_second_run_on_a_busy_target_fails_at_once_naming_the_holder(data, tmp_path):
    target = tmp_path / "out"
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root), "GUIDELOOM_TEST_BLOCK_FROM": "3"}
    first = subprocess.Popen([sys.executable, "-c", textwrap.dedent(BLOCKED_RUN), str(target),
                              str(data)], env=env, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        parts = tmp_path / ".out.guideloom-staging" / "parts"
        deadline = time.monotonic() + 60
        while not parts.is_dir() or not list(parts.glob("*.json")):  # the first run works
            assert first.poll() is None
            assert time.monotonic() < deadline
            time.sleep(0.05)
        t0 = time.monotonic()
        with pytest.raises(TargetBusyError, match=f"pid {first.pid} on "):
            export(data, target)
        assert time.monotonic() - t0 < 5  # at once, not after waiting
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    # the dead run's lock is taken over; the same job (same transform) resumes its partitions
    result = guideloom.export.export("force-curve", target, kind="npy", data_dir=data,
                                     record_transform=helpers.blocking_first_rows,
                                     code_version=helpers.BLOCKING_CODE_VERSION, client="sync")
    assert result.resumed_partitions >= 1
    assert len(guideloom.load_export(target)) == 6


HOLDING_TRANSFORMS = """
import os
import threading
from pathlib import Path


def hold(rec):
    Path(os.environ["STARTED_MARKER"]).touch()
    threading.Event().wait()  # the first run holds the target until it is killed
    return {"head": rec["force_data"][:4]}
"""

HOLDING_WORKFLOW = """
name = "hold"
python_path = ["."]
[dataset]
data_dir = "data"
[view]
name = "force-curve"
[transforms]
record = "holding:hold"
[output]
kind = "npy"
path = "exports/held"
"""


@pytest.mark.fast_case("sync")
@pytest.mark.parametrize("scheduler", ["sync", "local:2"])
def test_a_second_cli_run_on_a_locked_target_is_refused_at_once(data, tmp_path, scheduler):
    """A real first ``guideloom run`` holds the lock; the same command again is refused with
    the holder's pid, and costs no more than a dry run of the same job (twice its time, each the
    best of three, interleaved so that the machine's load weighs on both alike): the lock is
    taken before any cluster starts. The absolute figure (under 1 s on a quiet machine) is
    ``benchmarks/locked_target.py``'s."""
    (tmp_path / "holding.py").write_text(HOLDING_TRANSFORMS)
    (tmp_path / "job.toml").write_text(HOLDING_WORKFLOW)
    marker = tmp_path / "started"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    command = [sys.executable, "-m", "guideloom", "run", "job.toml"]
    first = subprocess.Popen([*command, "--scheduler", "sync"], cwd=tmp_path,
                             env={**env, "STARTED_MARKER": str(marker)}, start_new_session=True,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():  # the first run holds the lock and works
            assert first.poll() is None
            assert time.monotonic() < deadline
            time.sleep(0.05)
        refused, dry = [], []
        for _ in range(3):  # best of three: one scheduler hiccup of a shared machine is noise
            t0 = time.monotonic()
            plan = subprocess.run([*command, "--scheduler", scheduler, "--dry-run"],
                                  cwd=tmp_path, env=env, capture_output=True, text=True,
                                  timeout=120)
            dry.append(time.monotonic() - t0)
            assert plan.returncode == 0, plan.stderr
            t0 = time.monotonic()
            second = subprocess.run([*command, "--scheduler", scheduler], cwd=tmp_path,
                                    env=env, capture_output=True, text=True, timeout=120)
            refused.append(time.monotonic() - t0)
            assert second.returncode != 0
            assert f"another run is writing {tmp_path / 'exports' / 'held'}: pid {first.pid} on " \
                in second.stderr, second.stderr
        assert min(refused) < 2 * min(dry), \
            f"a refused run took {refused} s, a dry run of the same job {dry} s"
        assert first.poll() is None  # the holder was not disturbed
        assert not (tmp_path / "exports" / "held" / "export.json").exists()
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
