"""Files guideloom creates where another local user can write (two real users; root only)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import guideloom
from guideloom.demo import make_demo_data
from guideloom.errors import UnsafeFileError
from tests import export_helpers as helpers
from tests.second_user import second_user, shared_folder


@pytest.fixture(scope="module")
def mallory():
    with second_user() as user:
        yield user


@pytest.fixture
def shared():
    with shared_folder() as path:
        yield path


@pytest.fixture
def data(tmp_path) -> Path:
    make_demo_data(tmp_path / "data", n=4)
    return tmp_path / "data"


def export(data: Path, target: Path):
    return guideloom.export.export("force-curve", target, kind="npy", data_dir=data,
                                   record_transform=helpers.first_rows, client="sync")


def test_a_planted_lock_symlink_is_refused_and_its_victim_untouched(mallory, shared, data,
                                                                    tmp_path):
    victim = tmp_path / "thesis.tex"
    victim.write_text("five years of work")
    lock = shared / ".out.guideloom-lock"
    mallory.run("ln", "-s", str(victim), str(lock))
    assert lock.is_symlink()
    assert lock.lstat().st_uid == mallory.uid
    with pytest.raises(UnsafeFileError, match=f"lock file {lock} is a symbolic link"):
        export(data, shared / "out")
    assert victim.read_text() == "five years of work"
    assert not (shared / "out").exists()
    assert not (shared / ".out.guideloom-staging").exists()


def test_the_command_line_refuses_a_planted_lock_symlink_in_one_line(mallory, shared, data,
                                                                    tmp_path):
    victim = tmp_path / "notes.txt"
    victim.write_text("mine")
    lock = shared / ".out.guideloom-lock"
    mallory.run("ln", "-s", str(victim), str(lock))
    done = subprocess.run([sys.executable, "-m", "guideloom", "run", "force_signals",
                           "--data-dir", str(data), "--output", str(shared / "out"),
                           "--scheduler", "sync"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (f"guideloom: error: the lock file {lock} is a symbolic link "
                                   "(planted by someone?); guideloom does not follow it: remove "
                                   "it and rerun")
    assert victim.read_text() == "mine"
    assert not (shared / "out").exists()


def test_another_users_lock_file_or_a_hard_link_is_never_written(mallory, shared, data,
                                                                 tmp_path):
    planted = shared / ".a.guideloom-lock"
    mallory.run("sh", "-c", f"echo mallory > {planted}")
    with pytest.raises(UnsafeFileError, match=f"belongs to user id {mallory.uid}"):
        export(data, shared / "a")
    assert planted.read_text() == "mallory\n"
    victim = shared / "victim.cfg"  # ours, writable by all: a hard link is allowed to mallory
    victim.write_text("settings")
    victim.chmod(0o666)
    mallory.run("ln", str(victim), str(shared / ".b.guideloom-lock"))
    with pytest.raises(UnsafeFileError, match="2 hard links"):
        export(data, shared / "b")
    assert victim.read_text() == "settings"


def test_another_users_staging_area_is_neither_resumed_nor_published(mallory, shared, data):
    staging = shared / ".out.guideloom-staging"
    mallory.run("mkdir", "-p", str(staging / "data"))
    mallory.run("sh", "-c", f"echo '{{\"phase\": \"publishing\"}}' > {staging}/job.json")
    with pytest.raises(UnsafeFileError, match=f"staging directory {staging} belongs to user"):
        export(data, shared / "out")
    assert not (shared / "out").exists()
    assert not (shared / ".out.guideloom-lock").exists()  # our lock is released and removed


def test_our_lock_file_is_private_and_the_export_works_in_a_shared_folder(shared, data):
    seen = {}

    def watch(rec):
        info = os.lstat(shared / ".out.guideloom-lock")
        seen["mode"], seen["uid"] = stat.S_IMODE(info.st_mode), info.st_uid
        return helpers.first_rows(rec)

    guideloom.export.export("force-curve", shared / "out", kind="npy", data_dir=data,
                            record_transform=watch, client="sync")
    assert seen == {"mode": 0o600, "uid": os.geteuid()}
    assert len(guideloom.load_export(shared / "out")) == 4
    assert not (shared / ".out.guideloom-lock").exists()


CLUSTER_SCRIPT = """
import os, stat, sys
from guideloom.cluster import embedded
cluster, _ = embedded.embedded_cluster(1, dashboard_address=None)
root = cluster.scratch.parent
info = os.lstat(root)
print("root", root, info.st_uid, oct(stat.S_IMODE(info.st_mode)), stat.S_ISLNK(info.st_mode))
print("workers", len(cluster.client.scheduler_info()["workers"]))
embedded.close_cluster()
"""


@pytest.mark.cluster
@pytest.mark.fast_case("their folder")
@pytest.mark.parametrize("planted", ["their folder", "a symlink to their folder",
                                     "our folder, writable by all"])
def test_the_cluster_scratch_folder_is_never_another_users(mallory, shared, tmp_path, planted):
    me = os.geteuid()
    theirs = shared / f"guideloom-{me}"
    if planted == "their folder":
        mallory.run("mkdir", "-m", "777", str(theirs))
    elif planted == "a symlink to their folder":
        mallory.run("mkdir", "-m", "777", str(shared / "mallory"))
        mallory.run("ln", "-s", str(shared / "mallory"), str(theirs))
    else:
        theirs.mkdir()
        theirs.chmod(0o777)
    seen_before = sorted(p.name for p in theirs.iterdir())
    script = tmp_path / "cluster.py"
    script.write_text(CLUSTER_SCRIPT)
    root_dir = Path(__file__).resolve().parents[1]
    env = {**os.environ, "TMPDIR": str(shared), "PYTHONPATH": str(root_dir)}
    done = subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    line = next(x for x in done.stdout.splitlines() if x.startswith("root "))
    _, used, uid, mode, is_link = line.split()
    assert Path(used) != theirs
    assert Path(used).parent == shared
    assert Path(used).name.startswith(f"guideloom-{me}-")
    assert (int(uid), mode, is_link) == (me, "0o700", "False")
    assert "workers 1" in done.stdout
    assert f"not using {theirs}" in done.stderr
    assert sorted(p.name for p in theirs.iterdir()) == seen_before  # nothing written there
    assert not Path(used).exists()  # the fresh folder is removed at exit


KILLED_EXPORT = """
import sys
import guideloom
from tests import export_helpers as helpers
guideloom.export.export("force-curve", sys.argv[1], kind="npy", data_dir=sys.argv[2],
                        record_transform=helpers.first_rows, client="sync")
"""


def test_an_unfinished_export_is_private_and_the_published_one_is_not(mallory, shared, data,
                                                                      tmp_path):
    """The staging area in a shared folder is 0o700 while the job runs, so another user can
    neither read its partial rows nor write into it; the export it publishes has the modes
    of the user's umask, as any file they write."""
    target = shared / "out"
    root_dir = Path(__file__).resolve().parents[1]
    env = {**os.environ, "GUIDELOOM_FAULT_POINT": "partitions-done",
           "PYTHONPATH": str(root_dir)}
    killed = subprocess.run([sys.executable, "-c", KILLED_EXPORT, str(target), str(data)],
                            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert killed.returncode == -9, killed.stderr[-2000:]  # SIGKILL at the fault point
    staging = shared / ".out.guideloom-staging"
    assert stat.S_IMODE(staging.lstat().st_mode) == 0o700
    staged = sorted(p for p in staging.rglob("*") if p.is_file())
    assert staged, "the killed run staged nothing"
    for path in (staged[0], staging / "data"):
        with pytest.raises(subprocess.CalledProcessError):
            mallory.run("ls", str(path))
    with pytest.raises(subprocess.CalledProcessError):
        mallory.run("touch", str(staging / "parts" / "999999.json"))
    umask = os.umask(0o022)
    os.umask(umask)
    export(data, target)  # resumes the staged partitions and publishes
    assert stat.S_IMODE(target.stat().st_mode) == 0o777 & ~umask
    assert mallory.run("cat", str(target / "export.json")).stdout.startswith("{")
    assert not staging.exists()
