"""An update never carries through a link nor writes through a shared inode, and the retired
generations it keeps for readers are the owner's alone (issue 38, items 4 and 5).

Real links made with ``os.symlink``, real ``cp -al`` and ``rsync --link-dest`` backups, a real
second local user (``tests/second_user.py``; skipped without root) planting entries and pinning
generations with ``flock(1)``.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import stat
import subprocess
from pathlib import Path

import numpy as np
import pytest

import guideloom
from guideloom import config
from guideloom.errors import CorruptExportError, UpdateRefusedError
from tests.export_helpers import first_rows
from tests.second_user import User, second_user, shared_folder
from tests.test_update_storage import export as storage_export

VIEW = "force-curve"
RETIRED = ".out.guideloom-retired"


@pytest.fixture
def data(small_loose, tmp_path) -> Path:
    """A private copy of the session's small loose dataset."""
    target = tmp_path / "data"
    shutil.copytree(small_loose, target)
    return target


def export(kind: str, data: Path, target: Path, ids, *, update: bool = False):
    return guideloom.export.export(
        VIEW, target, kind=kind, data_dir=data, sim_ids=list(ids), sim_ids_order="sim_ids",
        record_transform=first_rows, client="sync", partition_size=4, update=update)


def rows_of(target: Path) -> tuple[list, list[dict[str, np.ndarray]]]:
    with guideloom.load_export(target) as exp:
        return exp.sim_ids.tolist(), [{k: np.array(v) for k, v in exp[i].items()}
                                      for i in range(len(exp))]


def same_rows(a: tuple[list, list[dict]], b: tuple[list, list[dict]]) -> bool:
    return a[0] == b[0] and len(a[1]) == len(b[1]) and all(
        x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)
        for x, y in zip(a[1], b[1], strict=True))


def tree_digest(root: Path) -> dict[str, tuple[str, int]]:
    """Every file below ``root``: its bytes' sha256 and its mode (links not followed)."""
    out = {}
    for path in sorted(root.rglob("*")):
        info = path.lstat()
        if stat.S_ISREG(info.st_mode):
            out[str(path.relative_to(root))] = (hashlib.sha256(path.read_bytes()).hexdigest(),
                                                info.st_mode)
        elif stat.S_ISLNK(info.st_mode):
            out[str(path.relative_to(root))] = (os.readlink(path), info.st_mode)
    return out


def a_data_file(kind: str, out: Path) -> Path:
    """A file of the export's rows: an array, an experiment's file, a chunk."""
    if kind == "npy":
        return out / "force.npy"
    if kind == "npz":
        return out / "3.npz"
    return next(p for p in sorted((out / "force").rglob("*"))
                if p.is_file() and p.name != "zarr.json")


def replace_by_link(path: Path, elsewhere: Path) -> Path:
    """Move ``path`` (file or folder) to ``elsewhere`` and leave a symlink to it."""
    elsewhere.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(path, elsewhere)
    path.symlink_to(elsewhere, target_is_directory=elsewhere.is_dir())
    return elsewhere


# --- links inside the previous generation --------------------------------------------------
@pytest.mark.parametrize("kind", ["npy", "npz", "zarr"])
def test_a_symlinked_file_inside_the_export_is_refused_naming_it(kind, data, tmp_path):
    out = tmp_path / "out"
    export(kind, data, out, range(8))
    linked = a_data_file(kind, out)
    target = replace_by_link(linked, tmp_path / "elsewhere" / linked.name)
    before = tree_digest(target.parent)
    with pytest.raises(UpdateRefusedError, match=str(linked.relative_to(out)) + " is a symbolic"):
        export(kind, data, out, range(10), update=True)
    assert tree_digest(target.parent) == before  # nothing written through the link
    assert linked.is_symlink()  # the previous generation is still published, as it was


def test_a_symlinked_array_folder_inside_a_zarr_export_is_refused(data, tmp_path):
    out = tmp_path / "out"
    export("zarr", data, out, range(8))
    target = replace_by_link(out / "force", tmp_path / "elsewhere" / "force")
    before = tree_digest(target)
    with pytest.raises(UpdateRefusedError, match="force is a symbolic link"):
        export("zarr", data, out, range(10), update=True)
    assert tree_digest(target) == before


def test_a_symlinked_shard_of_a_storage_export_is_refused(data, tmp_path):
    out = tmp_path / "out"
    storage_export("stream", data, out, list(range(8)), update=False)
    shard = next(p for p in sorted(out.iterdir()) if p.is_file() and "shard" in p.name)
    target = replace_by_link(shard, tmp_path / "elsewhere" / shard.name)
    before = tree_digest(target.parent)
    with pytest.raises(UpdateRefusedError, match=f"{shard.name} is a symbolic link"):
        storage_export("stream", data, out, list(range(10)), update=True)
    assert tree_digest(target.parent) == before


def test_a_symlinked_array_into_another_export_is_refused_and_that_export_untouched(
        data, tmp_path):
    out, other = tmp_path / "out", tmp_path / "other"
    export("npy", data, out, range(8))
    export("npy", data, other, range(8))
    (out / "force.npy").unlink()
    (out / "force.npy").symlink_to(other / "force.npy")
    before = tree_digest(other)
    with pytest.raises(UpdateRefusedError, match=r"force.npy is a symbolic link"):
        export("npy", data, out, range(12), update=True)
    assert tree_digest(other) == before  # not grown, not re-headered, not marked
    assert guideloom.load_export(other).verify().rows == 8


# --- hard-linked backups -----------------------------------------------------------------
def _cp_al(src: Path, dst: Path) -> None:
    subprocess.run(["cp", "-al", str(src), str(dst)], check=True, timeout=60)


def _rsync_link_dest(src: Path, dst: Path) -> None:
    if shutil.which("rsync") is None:
        pytest.skip("rsync is not installed")
    subprocess.run(["rsync", "-a", f"--link-dest={src}", f"{src}/", f"{dst}/"], check=True,
                   timeout=60)


@pytest.mark.parametrize("backup", [_cp_al, _rsync_link_dest], ids=["cp-al", "rsync-link-dest"])
def test_a_hard_linked_backup_stays_identical_after_an_append(backup, data, tmp_path):
    out, copy = tmp_path / "out", tmp_path / "backup"
    export("npy", data, out, range(12))
    backup(out, copy)
    assert (copy / "force.npy").stat().st_ino == (out / "force.npy").stat().st_ino  # shared
    before = tree_digest(copy)
    export("npy", data, out, range(16), update=True)  # a pure append: copied, not grown
    assert tree_digest(copy) == before
    assert guideloom.load_export(copy).verify().rows == 12
    assert (copy / "force.npy").stat().st_ino != (out / "force.npy").stat().st_ino
    export("npy", data, tmp_path / "fresh", range(16))
    assert same_rows(rows_of(out), rows_of(tmp_path / "fresh"))
    assert guideloom.load_export(out).verify().rows == 16


def test_a_single_link_array_is_still_appended_in_place(data, tmp_path):
    out = tmp_path / "out"
    export("npy", data, out, range(12))
    before = (out / "force.npy").stat()
    export("npy", data, out, range(14), update=True)
    after = (out / "force.npy").stat()
    assert (after.st_ino, after.st_nlink) == (before.st_ino, 1)


# --- retired generations -------------------------------------------------------------------
def _changed_ids(step: int) -> list[int]:
    """A selection that differs at each step (rows added: a new generation directory)."""
    return list(range(8 + step))


@pytest.mark.parametrize("kind", ["npz", pytest.param("zarr", marks=pytest.mark.slow)])
def test_pinned_generations_beyond_keep_retired_are_removed_their_readers_told(kind, data,
                                                                               tmp_path):
    out = tmp_path / "out"
    export(kind, data, out, _changed_ids(0))
    readers = []
    for step in range(1, 6):
        exp = guideloom.load_export(out)
        first = {k: np.array(v) for k, v in exp[0].items()}  # pins the generation it read
        readers.append((exp, first))
        export(kind, data, out, _changed_ids(step), update=True)
        kept = list((tmp_path / RETIRED).iterdir())
        assert len(kept) == min(step, config.get("keep_retired"))
    removed, still = readers[:-2], readers[-2:]
    for exp, first in still:
        row = exp[0]
        assert all(np.array_equal(row[k], first[k]) for k in first)
    for exp, _ in removed:
        with pytest.raises(CorruptExportError, match="retired and then removed"):
            exp[1]
    for exp, _ in readers:
        exp.close()
    export(kind, data, out, _changed_ids(6), update=True)
    assert not (tmp_path / RETIRED).exists()


def test_keep_retired_zero_removes_every_replaced_generation(data, tmp_path):
    out = tmp_path / "out"
    export("npz", data, out, _changed_ids(0))
    exp = guideloom.load_export(out)
    exp[0]
    with config.set(keep_retired=0):
        export("npz", data, out, _changed_ids(1), update=True)
    assert not (tmp_path / RETIRED).exists()
    with pytest.raises(CorruptExportError, match="keep_retired=2"):  # the setting now
        exp[0]
    exp.close()


def test_an_npy_reader_keeps_its_rows_after_its_generation_is_removed(data, tmp_path):
    """Its arrays are mapped when it is opened: the maps keep the removed files."""
    out = tmp_path / "out"
    export("npy", data, out, range(1, 9))
    exp = guideloom.load_export(out)
    want = [{k: np.array(v) for k, v in exp[i].items()} for i in range(len(exp))]
    with config.set(keep_retired=0):  # its generation is removed at once, although read
        for step in range(3):  # an inserted first row: no append, a new generation each
            export("npy", data, out, [0, *range(1, 9 + step)], update=True)
    assert not (tmp_path / RETIRED).exists()
    for i, row in enumerate(want):
        assert all(np.array_equal(exp[i][k], row[k]) for k in row)
    exp.close()


# --- a second local user ---------------------------------------------------------------
def _plant(user: User, shared: Path, how: str) -> Path:
    """Let ``user`` plant ``.out.guideloom-retired`` in ``shared`` (her way ``how``); return
    her own folder that the planted entry leads to."""
    home = Path(f"/home/{user.name}")
    stash = home / "stash"
    user.run("mkdir", "-p", str(stash))
    planted = shared / RETIRED
    if how == "symlink":
        user.run("ln", "-s", str(stash), str(planted))
    elif how == "her-folder":
        user.run("mkdir", "-m", "700", str(planted))
    else:  # a folder holding a link
        user.run("mkdir", "-m", "755", str(planted))
        user.run("ln", "-s", str(stash), str(planted / "00000000000000000001-planted"))
    return stash


@pytest.mark.parametrize("how", ["symlink", "her-folder", "folder-holding-a-link"])
def test_a_planted_retired_folder_is_reported_never_used(how, data, caplog):
    with second_user() as mallory, shared_folder() as shared:
        out = shared / "out"
        export("npz", data, out, range(8))
        stash = _plant(mallory, shared, how)
        planted = shared / RETIRED
        before = (tree_digest(stash), tree_digest(planted) if planted.is_dir() else None,
                  planted.lstat().st_uid)
        exp = guideloom.load_export(out)
        want = {k: np.array(v) for k, v in exp[2].items()}  # pinned: must be kept
        with caplog.at_level(logging.WARNING, logger="guideloom"):
            export("npz", data, out, range(10), update=True)  # succeeds
        reported = [r.getMessage() for r in caplog.records if str(planted) in r.getMessage()]
        assert reported
        assert mallory.name in reported[0]
        assert (tree_digest(stash), tree_digest(planted) if planted.is_dir() else None,
                planted.lstat().st_uid) == before  # nothing moved into it or removed
        ours = [p for p in shared.iterdir() if p.name.startswith(f"{RETIRED}-")]
        assert len(ours) == 1
        info = ours[0].lstat()
        assert stat.S_ISDIR(info.st_mode)
        assert info.st_uid == os.geteuid()
        assert stat.S_IMODE(info.st_mode) == 0o700
        assert len(list(ours[0].iterdir())) == 1  # the pinned generation, in our folder
        assert all(np.array_equal(exp[2][k], want[k]) for k in want)
        exp.close()
        export("npz", data, out, range(11), update=True)  # the next publish sweeps ours
        assert not ours[0].exists()
        assert planted.is_symlink() if how == "symlink" else planted.is_dir()
        assert guideloom.load_export(out).verify().rows == 11


def test_another_users_pins_cannot_keep_more_than_keep_retired(data):
    if shutil.which("flock") is None:
        pytest.skip("flock(1) is not installed")
    with second_user() as mallory, shared_folder() as shared:
        out = shared / "out"
        export("npz", data, out, _changed_ids(0))
        pins: list[subprocess.Popen] = []
        try:
            for step in range(1, 6):
                pin = subprocess.Popen(  # her reader of the current generation
                    ["flock", "-s", str(out), "sh", "-c", "echo pinned; exec sleep 300"],
                    user=mallory.uid, group=mallory.gid, extra_groups=[],
                    stdout=subprocess.PIPE, text=True)
                pins.append(pin)
                assert pin.stdout is not None
                assert pin.stdout.readline() == "pinned\n"
                export("npz", data, out, _changed_ids(step), update=True)
                assert len(list((shared / RETIRED).iterdir())) == min(
                    step, config.get("keep_retired"))
        finally:
            for pin in pins:
                pin.kill()
                pin.wait(timeout=30)
        assert guideloom.load_export(out).verify().rows == len(_changed_ids(5))


# --- the carrying primitives on their own (a link made after the tree was checked) ----------
def test_open_and_link_refuse_a_link_at_the_moment_of_use(tmp_path):
    from guideloom.formats import own_files

    root, outside = tmp_path / "export", tmp_path / "outside"
    (root / "force" / "c").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret").write_bytes(b"not the export's")
    (root / "force" / "c" / "0").write_bytes(b"chunk")
    own_files.check_tree(str(root))  # clean
    fd = own_files.open_file(str(root), "force/c/0")
    assert os.pread(fd, 5, 0) == b"chunk"
    os.close(fd)
    (root / "force" / "c" / "1").symlink_to(outside / "secret")  # after the check
    with pytest.raises(UpdateRefusedError, match="force/c/1 is a symbolic link"):
        own_files.open_file(str(root), "force/c/1")
    with pytest.raises(UpdateRefusedError, match="force/c/1 is a symbolic link"):
        own_files.link_file(str(root), "force/c/1", str(tmp_path / "linked"))
    assert not (tmp_path / "linked").exists()
    (root / "other").symlink_to(outside, target_is_directory=True)  # a linked folder
    with pytest.raises(UpdateRefusedError, match="other is a symbolic link"):
        own_files.open_file(str(root), "other/secret")
    with pytest.raises(UpdateRefusedError, match="is a symbolic link"):
        own_files.check_tree(str(root))
    assert own_files.link_file(str(root), "force/c/0", str(tmp_path / "linked"))
    assert (tmp_path / "linked").stat().st_ino == (root / "force" / "c" / "0").stat().st_ino
    assert (outside / "secret").read_bytes() == b"not the export's"


def test_a_planted_link_at_the_retired_name_does_not_break_the_sweep(tmp_path, caplog):
    from guideloom.formats.generations import sweep

    (tmp_path / "theirs").mkdir()
    (tmp_path / "theirs" / "00000000000000000001-x").mkdir()
    (tmp_path / RETIRED).symlink_to(tmp_path / "theirs", target_is_directory=True)
    with caplog.at_level(logging.WARNING, logger="guideloom"):
        assert sweep(str(tmp_path / "out"), keep_retired=0) == 0
    assert "is a symbolic link" in caplog.text
    assert (tmp_path / "theirs" / "00000000000000000001-x").is_dir()


def test_a_file_that_cannot_be_hard_linked_is_cloned_or_copied_whole(tmp_path):
    """Across file systems (here ``/dev/shm`` when it is another one) no hard link can be
    made: the file is copied from its open descriptor (a reflink where the file system has
    one), never through a link."""
    from guideloom.formats import own_files

    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("no second file system at /dev/shm")
    root = tmp_path / "export"
    root.mkdir()
    blob = np.random.default_rng(0).bytes(3 << 20)
    (root / "3.npz").write_bytes(blob)
    target = shm / f"guideloom-test-{os.getpid()}-{tmp_path.name}"
    try:
        assert own_files.link_file(str(root), "3.npz", str(target)) is False  # a copy
        assert target.read_bytes() == blob
        assert target.stat().st_nlink == 1
        assert (root / "3.npz").stat().st_nlink == 1
    finally:
        target.unlink(missing_ok=True)
