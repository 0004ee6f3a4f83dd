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
        assert "damaged" not in out and "Traceback" not in out, out
