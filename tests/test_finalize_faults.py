"""Kill the driver (SIGKILL) at every step boundary of every output kind, rerun, and compare the
published export bit for bit with an uninterrupted run: never zeros, never a half export."""

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
from guideloom.errors import IncompleteExportError
from guideloom.faults import FAULT_ENV

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("npy", "npz", "zarr", "storage")
COMMON_POINTS = ("partitions-done", "finalize-started", "rows-finalized", "sim-ids-written",
                 "checksums-written", "description-written", "manifest-written", "publishing",
                 "target-moved-aside", "data-moved")
KIND_POINTS = {"npy": ("allocated", "finalize-alias"), "zarr": ("allocated",),
               "npz": (), "storage": ()}
VOLATILE = {"export.json", "croissant.json"}  # timings and dates differ between runs
STABLE_MANIFEST_KEYS = ("kind", "count", "fields", "sim_ids_sha256", "identity", "skipped",
                        "checksums")

RUN = """
import sys
import numpy as np
import guideloom
from guideloom.workflows.demo_transforms import total_force_stream
from tests import export_helpers

kind, data, target, ids = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
opts = dict(data_dir=data, sim_ids=[int(i) for i in ids.split(",")], client="sync",
            partition_size=3, overwrite=True, on_error="skip")
if kind == "storage":
    fmt = guideloom.StreamNumpyFormat(np.dtype([("force", "<f4"), ("doc", "<u4")]))
    guideloom.export_to_storage("force-curve", guideloom.StreamStorage(target, fmt),
                                record_transform=total_force_stream, **opts)
else:
    guideloom.export.export("force-curve", target, kind=kind,
                            record_transform=export_helpers.first_rows, **opts)
"""

IDS = "0,3,5,7,9,11,13"  # with on_error="skip", no experiment fails here: keep is all True
OLD_IDS = "1,2"  # an earlier export at the target, to be replaced (overwrite)


def run(kind: str, data: Path, target: Path, ids: str, fault: str | None = None):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(FAULT_ENV, None)
    if fault:
        env[FAULT_ENV] = fault
    return subprocess.run([sys.executable, "-c", RUN, kind, str(data), str(target), ids],
                          env=env, capture_output=True, text=True, timeout=120)


def files_of(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name not in VOLATILE}


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("faults") / "data"
    make_demo_data(root, n=14)
    return root


@pytest.fixture(scope="module")
def references(data, tmp_path_factory) -> dict[str, Path]:
    refs = {}
    for kind in KINDS:
        target = tmp_path_factory.mktemp(f"ref-{kind}") / "out"
        done = run(kind, data, target, IDS)
        assert done.returncode == 0, done.stderr
        refs[kind] = target
    return refs


CASES = [(kind, point) for kind in KINDS for point in (*KIND_POINTS[kind], *COMMON_POINTS)]


# One real SIGKILL case per format runs in the fast set; the rest of the matrix is slow.
@pytest.mark.fast_case("npy-sim-ids-written", "npz-publishing", "storage-sim-ids-written",
                       "zarr-data-moved")
@pytest.mark.parametrize(("kind", "point"), CASES, ids=[f"{k}-{p}" for k, p in CASES])
def test_a_run_killed_at_any_step_is_completed_exactly_by_the_next(kind, point, data,
                                                                   references, tmp_path):
    target = tmp_path / "out"
    old = run(kind, data, target, OLD_IDS)  # something to replace
    assert old.returncode == 0, old.stderr
    killed = run(kind, data, target, IDS, fault=point)
    assert killed.returncode == -9, f"the fault point {point!r} was not reached: {killed.stderr}"
    # complete or absent: the old export, the new one, or (while the old one is moved aside)
    # nothing that a reader would open
    try:
        export = guideloom.load_export(target)
    except IncompleteExportError:
        assert point == "target-moved-aside" and not target.exists()
    else:
        assert export.sim_ids.tolist() in ([1, 2], [int(i) for i in IDS.split(",")])
    rerun = run(kind, data, target, IDS)
    assert rerun.returncode == 0, rerun.stderr
    assert files_of(target) == files_of(references[kind])
    got = json.loads((target / "export.json").read_text())
    want = json.loads((references[kind] / "export.json").read_text())
    assert {k: got[k] for k in STABLE_MANIFEST_KEYS} == {k: want[k] for k in STABLE_MANIFEST_KEYS}
    assert not list(tmp_path.glob(".out.guideloom-*"))  # staging and lock are gone
    first = guideloom.load_export(target)[0]
    assert all(np.asarray(v).size for v in first.values())
    assert guideloom.load_export(target).verify().rows == len(IDS.split(","))


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
EXT4_IOC_SHUTDOWN = (2 << 30) | (4 << 16) | (ord("X") << 8) | 125  # _IOR('X', 125, __u32)
EXT4_GOING_FLAGS_NOLOGFLUSH = 2  # drop what is not on disk yet, like pulling the plug
POWER_POINTS = ("partition-marked", "partitions-done", "sim-ids-written", "manifest-written",
                "data-moved")
POWER_CASES = [(kind, point) for kind in KINDS
               for point in (*KIND_POINTS[kind][:1], *POWER_POINTS)]


class Disk:
    """A fresh ext4 file system on a loop device of this test, mounted at ``path``."""

    def __init__(self, image: Path, path: Path):
        self.image, self.path = image, path
        subprocess.run(["truncate", "-s", "256M", str(image)], check=True)
        subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, capture_output=True)
        self.device = subprocess.run(["losetup", "-f", "--show", str(image)], check=True,
                                     capture_output=True, text=True).stdout.strip()
        path.mkdir()
        self._mount()

    def _mount(self) -> None:
        subprocess.run(["mount", self.device, str(self.path)], check=True, capture_output=True)

    def power_loss(self) -> None:
        """Stop the file system as a power cut would (unwritten data is lost), then mount it
        again (the journal is replayed)."""
        import fcntl
        import struct

        fd = os.open(self.path, os.O_RDONLY)
        try:
            fcntl.ioctl(fd, EXT4_IOC_SHUTDOWN, struct.pack("I", EXT4_GOING_FLAGS_NOLOGFLUSH))
        finally:
            os.close(fd)
        subprocess.run(["umount", str(self.path)], check=True, capture_output=True)
        self._mount()

    def close(self) -> None:
        """Unmount (lazily if a failed test still holds a file open) and free the device."""
        if subprocess.run(["umount", str(self.path)], capture_output=True).returncode:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True)
        subprocess.run(["losetup", "-d", self.device], capture_output=True)


def _no_disk_reason() -> str | None:
    import shutil

    if os.geteuid() != 0:
        return "emulating a power loss needs root (loop device, mount)"
    missing = [t for t in ("mkfs.ext4", "losetup", "mount", "umount") if shutil.which(t) is None]
    if missing:
        return f"emulating a power loss needs {', '.join(missing)}"
    return None


@pytest.fixture
def disk(tmp_path):
    reason = _no_disk_reason()
    if reason:
        pytest.skip(reason)
    try:
        disk = Disk(tmp_path / "disk.img", tmp_path / "disk")
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"no loop-mounted ext4 here: {exc.stderr or exc}")
    yield disk
    disk.close()


@pytest.mark.fast_case("npy-partitions-done", "npz-sim-ids-written", "storage-manifest-written",
                       "zarr-sim-ids-written")  # one per format in the fast set
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
