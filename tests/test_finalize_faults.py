"""Stop the driver at every step boundary of every output kind, rerun, and compare the
published export bit for bit with an uninterrupted run: never zeros, never a half export.

The 43-case matrix runs in this process by default
(:func:`guideloom.runtime.faults.crash_at`, through the conformance kit's exports); each case is
also run for real, the driver SIGKILLed in a subprocess, marked ``slow`` but for one case per
kind, and each real kill is checked to leave exactly what the in-process crash leaves."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import guideloom
from guideloom.demo import make_demo_data
from guideloom.errors import IncompleteExportError, InjectedFault
from guideloom.formats import get_format
from guideloom.runtime.faults import FAULT_ENV, crash_at
from guideloom.testing.formats import fault_cases, files_of
from tests.format_kits import BUILT_IN_KITS, RUN
from tests.test_update import can_exchange

ROOT = Path(__file__).resolve().parents[1]
KINDS = tuple(BUILT_IN_KITS)
COMMON_POINTS = ("partitions-done", "finalize-started", "rows-finalized", "sim-ids-written",
                 "provenance-written", "checksums-written", "description-written",
                 "manifest-written", "publishing", "target-moved-aside", "data-moved")
KIND_POINTS = {"npy": ("allocated", "finalize-alias"), "zarr": ("allocated",),
               "npz": (), "storage": ()}
STABLE_MANIFEST_KEYS = ("kind", "count", "fields", "sim_ids_sha256", "identity", "skipped",
                        "checksums")

IDS = "0,3,5,7,9,11,13"  # with on_error="skip", no experiment fails here: keep is all True
OLD_IDS = "1,2"  # an earlier export at the target, to be replaced (overwrite)


def run(kind: str, data: Path, target: Path, ids: str, fault: str | None = None):
    """One export with the kind's kit in a fresh interpreter (SIGKILLed at ``fault``)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(FAULT_ENV, None)
    if fault:
        env[FAULT_ENV] = fault
    return subprocess.run([sys.executable, "-c", RUN, kind, str(data), str(target), ids],
                          env=env, capture_output=True, text=True, timeout=120)


def run_here(kind: str, data: Path, target: Path, ids: str) -> None:
    """The same export as :func:`run`, in this process."""
    BUILT_IN_KITS[kind]().run_export(data, target, [int(i) for i in ids.split(",")])


def state_of(folder: Path) -> list[str]:
    """What a stopped run left beside and in the target: every path under ``folder`` but the
    lock file (a SIGKILL leaves it, a raise releases it) and temporary files named by PID."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if not p.name.endswith(".guideloom-lock") and ".tmp-" not in p.name)


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("faults") / "data"
    make_demo_data(root, n=14)
    return root


@pytest.fixture(scope="module")
def references(data, tmp_path_factory) -> dict[str, Path]:
    """An uninterrupted export per kind (in this process: the subprocess runs the same code,
    so it writes the same bytes; the matrix checks that too)."""
    refs = {}
    for kind in KINDS:
        target = tmp_path_factory.mktemp(f"ref-{kind}") / "out"
        run_here(kind, data, target, IDS)
        refs[kind] = target
    return refs


CASES = [(kind, point) for kind in KINDS for point in (*KIND_POINTS[kind], *COMMON_POINTS)]
# the real kills that run by default (the cheapest two kinds; every kind's every point is in
# the in-process matrix below, test_a_run_stopped_at_any_step_is_completed_exactly_by_the_next)
SIGKILL_DEFAULT = {("npy", "finalize-alias"), ("npz", "partitions-done")}
SIGKILL_CASES = [pytest.param(kind, point, id=f"{kind}-{point}",
                              marks=() if (kind, point) in SIGKILL_DEFAULT else pytest.mark.slow)
                 for kind, point in CASES]


def check_completed_exactly(kind: str, point: str, target: Path, reference: Path) -> None:
    """The rerun after a stop at ``point`` published the reference's files and manifest."""
    assert files_of(target) == files_of(reference)
    got = json.loads((target / "export.json").read_text())
    want = json.loads((reference / "export.json").read_text())
    assert {k: got[k] for k in STABLE_MANIFEST_KEYS} == {k: want[k] for k in STABLE_MANIFEST_KEYS}
    assert not list(target.parent.glob(".out.guideloom-*"))  # staging and lock are gone
    first = guideloom.load_export(target)[0]
    assert all(np.asarray(v).size for v in first.values())
    assert guideloom.load_export(target).verify().rows == len(IDS.split(","))


def check_complete_or_absent(point: str, target: Path) -> None:
    """Complete or absent: the old export, the new one, or (while the old one is moved aside)
    nothing that a reader would open."""
    try:
        export = guideloom.load_export(target)
    except IncompleteExportError:  # only where the two cannot be exchanged in one step
        assert point == "target-moved-aside"
        assert not target.exists()
        assert not can_exchange(target.parent / ".exchange-probe")
    else:
        assert export.sim_ids.tolist() in ([1, 2], [int(i) for i in IDS.split(",")])


def test_the_kit_crashes_at_every_point_of_the_matrix():
    """The conformance kit's fault cases (tests/test_format_conformance.py) hold every case
    here, so each format's fault points are crashed at in-process there too."""
    for kind, point in CASES:
        assert (point, False) in fault_cases(get_format(kind)), (kind, point)


@pytest.mark.parametrize(("kind", "point"), CASES, ids=[f"{k}-{p}" for k, p in CASES])
def test_a_run_stopped_at_any_step_is_completed_exactly_by_the_next(kind, point, data,
                                                                    references, tmp_path):
    target = tmp_path / "out"
    run_here(kind, data, target, OLD_IDS)  # something to replace
    with pytest.raises(InjectedFault) as stopped, crash_at(point):
        run_here(kind, data, target, IDS)
    assert stopped.value.point == point, f"the fault point {point!r} was not reached"
    check_complete_or_absent(point, target)
    run_here(kind, data, target, IDS)
    check_completed_exactly(kind, point, target, references[kind])


@pytest.mark.parametrize(("kind", "point"), SIGKILL_CASES)
def test_a_run_killed_at_any_step_is_completed_exactly_by_the_next(kind, point, data,
                                                                   references, tmp_path):
    """A real SIGKILL at the point: it leaves what the in-process crash leaves, and the next
    run (in a fresh interpreter) completes it exactly."""
    killed_dir, crashed_dir = tmp_path / "killed", tmp_path / "crashed"
    killed_dir.mkdir()
    crashed_dir.mkdir()
    target = killed_dir / "out"
    old = run(kind, data, target, OLD_IDS)  # something to replace
    assert old.returncode == 0, old.stderr
    killed = run(kind, data, target, IDS, fault=point)
    assert killed.returncode == -9, f"the fault point {point!r} was not reached: {killed.stderr}"
    run_here(kind, data, crashed_dir / "out", OLD_IDS)
    with pytest.raises(InjectedFault), crash_at(point):
        run_here(kind, data, crashed_dir / "out", IDS)
    assert state_of(killed_dir) == state_of(crashed_dir)  # both modes stop at the same step
    check_complete_or_absent(point, target)
    rerun = run(kind, data, target, IDS)
    assert rerun.returncode == 0, rerun.stderr
    check_completed_exactly(kind, point, target, references[kind])


def test_temporary_npz_files_of_an_interrupted_write_are_never_published(data, tmp_path):
    target = tmp_path / "out"
    killed = run("npz", data, target, IDS, fault="partitions-done")
    assert killed.returncode == -9
    staged = tmp_path / ".out.guideloom-staging" / "data"
    (staged / ".5.npz.tmp-12345").write_bytes(b"half a file")  # as a full disk leaves it
    done = run("npz", data, target, IDS)
    assert done.returncode == 0, done.stderr
    assert not [p.name for p in target.iterdir() if ".tmp-" in p.name]
    assert len(guideloom.load_export(target)) == 7


# --- power loss: the same matrix on an ext4 disk shut down without flushing -----------------
POWER_POINTS = ("partition-marked", "partitions-done", "sim-ids-written", "manifest-written",
                "data-moved")
POWER_CASES = [(kind, point) for kind in KINDS
               for point in (*KIND_POINTS[kind][:1], *POWER_POINTS)]


@pytest.mark.fast_case("npy-partitions-done", "npz-sim-ids-written")  # the cheapest two kinds
@pytest.mark.parametrize(("kind", "point"), POWER_CASES, ids=[f"{k}-{p}" for k, p in POWER_CASES])
def test_a_power_loss_at_any_step_is_completed_exactly_by_the_next_run(kind, point, data,
                                                                       references, disk):
    target = disk.path / "out"
    old = run(kind, data, target, OLD_IDS)  # something to replace, on disk for long
    assert old.returncode == 0, old.stderr
    os.sync()
    killed = run(kind, data, target, IDS, fault=point)
    assert killed.returncode == -9, f"the fault point {point!r} was not reached: {killed.stderr}"
    disk.power_loss()
    try:  # complete or absent, and what is there reads back intact
        export = guideloom.load_export(target)
    except IncompleteExportError:
        assert not (target / "export.json").exists(), "a published export came back damaged"
    else:
        assert export.sim_ids.tolist() in ([1, 2], [int(i) for i in IDS.split(",")])
        assert export.verify().rows == len(export)
    rerun = run(kind, data, target, IDS)
    assert rerun.returncode == 0, rerun.stderr
    assert files_of(target) == files_of(references[kind])
    assert guideloom.load_export(target).verify().rows == len(IDS.split(","))


@pytest.mark.fast_case("croissant.json")
@pytest.mark.parametrize("name", ["croissant.json", "checksums.json", "export.json"])
def test_a_json_write_killed_before_its_rename_publishes_no_temporary(name, data, tmp_path):
    """SIGKILL between writing a JSON file's temporary copy and renaming it: the rerun's
    published export holds no ``*.tmp-PID`` file (it was written inside ``data/``)."""
    target = tmp_path / "out"
    killed = run("npy", data, target, IDS, fault=f"json-written:{name}")
    assert killed.returncode == -9, f"the write of {name} was not reached: {killed.stderr}"
    done = run("npy", data, target, IDS)
    assert done.returncode == 0, done.stderr
    assert not [p.name for p in target.iterdir() if ".tmp-" in p.name]
    assert guideloom.load_export(target).verify().rows == 7


def test_temporary_json_files_left_in_the_data_folder_are_never_published(data, tmp_path):
    target = tmp_path / "out"
    killed = run("npy", data, target, IDS, fault="partitions-done")
    assert killed.returncode == -9
    staged = tmp_path / ".out.guideloom-staging" / "data"
    (staged / "croissant.json.tmp-12345").write_text('{"half')  # as an older run leaves them
    (staged / "export.json.tmp-12346").write_text("{")
    done = run("npy", data, target, IDS)
    assert done.returncode == 0, done.stderr
    assert not [p.name for p in target.iterdir() if ".tmp-" in p.name]
    assert len(guideloom.load_export(target)) == 7


@pytest.mark.fast_case("publishing")
@pytest.mark.parametrize("point", ["publishing", "target-moved-aside", "data-moved"])
def test_cli_rerun_after_a_kill_during_publish_completes_it_with_exit_0(point, tmp_path):
    """``guideloom run`` killed while publishing, then run again as typed: the rerun finishes
    the publish and exits 0 saying so (it used to exit 2: "already holds a complete export")."""
    make_demo_data(tmp_path / "demo-data", n=8)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", FAULT_ENV)}
    command = [sys.executable, "-m", "guideloom", "run", "force_signals", "--scheduler", "sync"]
    reference = subprocess.run([*command, "--output", "reference"], cwd=tmp_path, env=env,
                               capture_output=True, text=True, timeout=300)
    assert reference.returncode == 0, reference.stderr
    killed = subprocess.run(command, cwd=tmp_path, env={**env, FAULT_ENV: point},
                            capture_output=True, text=True, timeout=300)
    if point == "target-moved-aside":  # reached only when an export is replaced
        assert killed.returncode == 0, killed.stderr
        killed = subprocess.run([*command, "--overwrite"], cwd=tmp_path,
                                env={**env, FAULT_ENV: point}, capture_output=True, text=True,
                                timeout=300)
    assert killed.returncode == -9, killed.stderr
    rerun = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert "already holds a complete export" not in rerun.stderr
    assert "its publish is now done" in rerun.stderr, rerun.stderr
    target = tmp_path / "exports" / "force-signals"
    assert files_of(target) == files_of(tmp_path / "reference")
    assert not list((tmp_path / "exports").glob(".force-signals.guideloom-*"))
    assert guideloom.load_export(target).verify().rows == 8


def test_crash_at_raises_only_inside_its_block_in_every_thread_of_the_process():
    import threading

    from guideloom.runtime.faults import fault_point, reached_points

    fault_point("somewhere")  # nothing armed: nothing happens
    seen: list[str] = []

    def in_thread() -> None:
        try:
            fault_point("somewhere")
        except InjectedFault as exc:
            seen.append(exc.point)

    with reached_points() as passed, crash_at("somewhere"):
        with pytest.raises(InjectedFault, match="'somewhere'"):
            fault_point("somewhere")
        fault_point("elsewhere")  # another point passes
        worker = threading.Thread(target=in_thread)
        worker.start()
        worker.join()
    assert seen == ["somewhere"]
    assert passed == ["somewhere", "elsewhere", "somewhere"]
    fault_point("somewhere")  # disarmed when the block ended
    assert issubclass(InjectedFault, BaseException)
    assert not issubclass(InjectedFault, Exception)
