"""A file the reader may not open is reported as such, naming it, never as "damaged"
(issue 22, unclear errors).

The reader runs without the capabilities that let root read anything (``setpriv`` drops
``CAP_DAC_OVERRIDE`` and friends), so a file of mode 0000 is as unreadable to it as another
user's private file is to you.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import guideloom
from guideloom.export import export

SETPRIV = shutil.which("setpriv")


def mean_force(rec):
    """One fixed-shape output."""
    return {"mean": np.asarray(rec["force_data"], dtype=np.float64).mean(axis=0)}


@pytest.fixture(scope="module")
def exports(tmp_path_factory) -> dict[str, Path]:
    if os.geteuid() != 0 or SETPRIV is None:
        pytest.skip("needs root and setpriv (util-linux) to read without CAP_DAC_OVERRIDE")
    root = tmp_path_factory.mktemp("perm")
    guideloom.make_demo_data(root / "data", n=6)
    return {kind: Path(export("force-curve", root / kind, kind=kind, data_dir=root / "data",
                              record_transform=mean_force, client="sync").target)
            for kind in ("npy", "npz", "zarr")}


def _unprivileged(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SETPRIV, "--inh-caps=-all", "--bounding-set=-all", sys.executable,
                           "-m", "guideloom", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120)


CASES = {"npy data": ("npy", "mean.npy"), "npz record": ("npz", "0.npz"),
         "zarr chunk": ("zarr", "mean/c/0/0"), "checksums.json": ("npy", "checksums.json"),
         "export.json": ("npy", "export.json")}


@pytest.mark.fast_case("export.json")
@pytest.mark.parametrize("case", sorted(CASES))
def test_unreadable_file_is_a_permission_error_naming_it(exports, tmp_path, case):
    kind, name = CASES[case]
    target = tmp_path / "export"
    shutil.copytree(exports[kind], target)
    (target / name).chmod(0)
    for command in ("verify", "inspect"):
        done = _unprivileged(command, str(target), cwd=tmp_path)
        out = done.stdout + done.stderr
        if command == "inspect" and done.returncode == 0:
            continue  # inspect's open-time checks need not read this file
        assert done.returncode == 1, out
        assert f"cannot read {target / name}: permission denied" in out, out
        assert "damaged" not in out, out
        assert "Traceback" not in out, out


# --- data files another user owns (issue 30, C6) --------------------------------------------
DATA_FILES = {"loose h5": ("loose", "h5/0001.h5"), "zip archive": ("zip", "concave.zip"),
              "index CSV": ("zip", "process_parameters.csv"),
              "manifest": ("loose", "metadata.json")}


@pytest.fixture(scope="module")
def demo_layouts(tmp_path_factory) -> dict[str, Path]:
    if os.geteuid() != 0 or SETPRIV is None:
        pytest.skip("needs root and setpriv (util-linux) to read without CAP_DAC_OVERRIDE")
    root = tmp_path_factory.mktemp("layouts")
    return {layout: guideloom.make_demo_data(root / layout, n=4, layout=layout).data_dir
            for layout in ("loose", "zip")}


def _run_on(data: Path, tmp_path: Path) -> str:
    done = _unprivileged("run", "force_signals", "--scheduler", "sync", "--data-dir", str(data),
                         "--output", str(tmp_path / "out"), cwd=tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "damaged" not in out, out
    assert "Traceback" not in out, out
    assert "[Errno" not in out, out
    assert not (tmp_path / "out").exists(), out
    return out


@pytest.mark.parametrize("case", sorted(DATA_FILES))
def test_a_data_file_of_another_user_is_a_permission_error_naming_owner_and_mode(
        demo_layouts, tmp_path, case):
    from tests.second_user import second_user

    layout, name = DATA_FILES[case]
    data = tmp_path / "data"
    shutil.copytree(demo_layouts[layout], data)
    with second_user() as user:
        os.chown(data / name, user.uid, user.gid)
        (data / name).chmod(0o600)
        out = _run_on(data, tmp_path)
        assert (f"cannot read {data / name}: permission denied (owner {user.name} "
                f"(uid {user.uid}), mode 0600; this process runs as root (uid 0))") in out, out


@pytest.mark.parametrize("case", sorted(DATA_FILES))
def test_a_data_file_of_mode_0000_is_a_permission_error_naming_it(demo_layouts, tmp_path,
                                                                  case):
    layout, name = DATA_FILES[case]
    data = tmp_path / "data"
    shutil.copytree(demo_layouts[layout], data)
    (data / name).chmod(0)
    out = _run_on(data, tmp_path)
    assert (f"cannot read {data / name}: permission denied (owner root (uid 0), mode 0000"
            in out), out


def test_extract_names_an_archive_of_another_user_with_owner_and_mode(demo_layouts, tmp_path):
    from tests.second_user import second_user

    data = tmp_path / "data"
    shutil.copytree(demo_layouts["zip"], data)
    with second_user() as user:
        os.chown(data / "convex.zip", user.uid, user.gid)
        (data / "convex.zip").chmod(0o600)
        done = _unprivileged("extract", str(data), "--scheduler", "sync", cwd=tmp_path)
        out = done.stdout + done.stderr
        assert done.returncode == 1, out
        assert (f"cannot read {data / 'convex.zip'}: permission denied (owner {user.name} "
                f"(uid {user.uid}), mode 0600") in out, out
        assert "damaged" not in out, out
        assert "Traceback" not in out, out
        assert "[Errno" not in out, out
