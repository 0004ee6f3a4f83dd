"""A preprocess run killed (real SIGKILL) at every step of publishing a file leaves each
``<id>.h5`` complete or absent (the previous file, or none); the next run resumes, removes the
dead run's temporary file and ends with the files an uninterrupted run writes. The raw folder
is unchanged byte for byte."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from guideloom.preprocess.publish import FAULT_POINTS, RECORD_ATTR
from guideloom.runtime.faults import FAULT_ENV
from tests.preprocess_helpers import make_raw_dataset, tree_digest

N = 6


@pytest.fixture(scope="module")
def raw(tmp_path_factory) -> Path:
    return make_raw_dataset(tmp_path_factory.mktemp("kill") / "raw", N, "zip")


@pytest.fixture(scope="module")
def reference(raw, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("kill") / "reference"
    _cli(raw, out)
    return out


def _cli(raw: Path, out: Path, *extra: str, fault: str | None = None
         ) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop(FAULT_ENV, None)
    if fault is not None:
        env[FAULT_ENV] = fault
    return subprocess.run([sys.executable, "-m", "guideloom", "preprocess", "force", "sheet",
                           "oil", "--data-dir", str(raw), "--out", str(out), "--workers", "1",
                           "-q", *extra], capture_output=True, text=True, env=env, check=False)


def _contents(path: Path) -> dict[str, np.ndarray]:
    with h5py.File(path, "r") as f:
        assert RECORD_ATTR in f.attrs
        return {g: f[f"{g}/data"][()] for g in f}


def _assert_like_reference(out: Path, reference: Path, names: list[str]) -> None:
    for name in names:
        mine, theirs = _contents(out / name), _contents(reference / name)
        assert sorted(mine) == sorted(theirs), name
        assert all(np.array_equal(mine[g], theirs[g], equal_nan=True) for g in mine), name


@pytest.mark.parametrize("point", FAULT_POINTS)
def test_killed_while_publishing_a_new_file(raw, reference, tmp_path, point):
    before = tree_digest(raw)
    out = tmp_path / "out"
    killed = _cli(raw, out, fault=point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    published = sorted(p.name for p in out.glob("*.h5"))
    # the first experiment was being published: present only once renamed, and then whole
    assert published == (["0000.h5"] if point == "preprocess-renamed" else [])
    _assert_like_reference(out, reference, published)
    assert len(list(out.glob(".*.tmp-*"))) == (0 if point == "preprocess-renamed" else 1)
    resumed = _cli(raw, out)
    assert resumed.returncode == 0, resumed.stderr
    assert not list(out.glob(".*.tmp-*"))  # the dead run's temporary file is gone
    names = sorted(p.name for p in reference.glob("*.h5"))
    assert sorted(p.name for p in out.glob("*.h5")) == names
    _assert_like_reference(out, reference, names)
    assert tree_digest(raw) == before


@pytest.mark.parametrize("point", FAULT_POINTS)
def test_killed_while_replacing_a_file_keeps_the_previous_one(raw, reference, tmp_path, point):
    out = tmp_path / "out"
    shutil.copytree(reference, out)
    inode = (out / "0000.h5").stat().st_ino
    killed = _cli(raw, out, "--overwrite", fault=point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    replaced = (out / "0000.h5").stat().st_ino != inode
    assert replaced == (point == "preprocess-renamed")
    names = sorted(p.name for p in reference.glob("*.h5"))
    _assert_like_reference(out, reference, names)  # old or new: every file whole
    assert _cli(raw, out).returncode == 0
    assert not list(out.glob(".*.tmp-*"))
    _assert_like_reference(out, reference, names)
