"""``croissant.json``: the same for a resumed job as for an uninterrupted one, and checked by
``load_export`` and ``verify`` like the other files of the export (issue 22)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import guideloom
from guideloom.errors import CorruptExportError
from guideloom.runtime.faults import FAULT_ENV

ROOT = Path(__file__).resolve().parents[1]
RUN = """
import sys
import guideloom
from tests import export_helpers

kind, data, target = sys.argv[1:4]
guideloom.export.export("force-curve", target, kind=kind, data_dir=data, client="sync",
                        partition_size=2, record_transform=export_helpers.unsorted_fields)
"""
VOLATILE = ("datePublished", "url")


def run(kind: str, data: Path, target: Path, fault: str | None = None):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(FAULT_ENV, None)
    if fault:
        env[FAULT_ENV] = fault
    return subprocess.run([sys.executable, "-c", RUN, kind, str(data), str(target)], env=env,
                          capture_output=True, text=True, timeout=300, cwd=target.parent)


def description(target: Path) -> dict:
    doc = json.loads((target / "croissant.json").read_text())
    return {k: v for k, v in doc.items() if k not in VOLATILE}


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("croissant") / "data"
    guideloom.make_demo_data(root, n=6)
    return root


@pytest.mark.fast_case("npz")
@pytest.mark.parametrize("kind", ["npy", "npz", "zarr"])
def test_resumed_job_describes_its_export_in_the_same_order(kind, data, tmp_path):
    (tmp_path / "fresh").mkdir()
    (tmp_path / "resumed").mkdir()
    fresh, resumed = tmp_path / "fresh" / "out", tmp_path / "resumed" / "out"
    assert run(kind, data, fresh).returncode == 0
    killed = run(kind, data, resumed, fault="partitions-done")
    assert killed.returncode == -9, killed.stderr
    done = run(kind, data, resumed)
    assert done.returncode == 0, done.stderr
    assert json.dumps(description(resumed)) == json.dumps(description(fresh))  # order too


def _cli_verify(target: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "guideloom", "verify", str(target)],
                          capture_output=True, text=True, timeout=120, cwd=target.parent)


@pytest.mark.fast_case("edited")
@pytest.mark.parametrize("damage", ["edited", "removed"])
def test_changed_croissant_json_is_refused_by_load_export_and_verify(damage, data, tmp_path):
    target = tmp_path / "out"
    assert run("npy", data, target).returncode == 0
    assert guideloom.load_export(target).verify().rows == 6
    path = target / "croissant.json"
    if damage == "edited":  # a catalogue entry that no longer describes these files
        doc = json.loads(path.read_text())
        doc["recordSet"] = doc["recordSet"][:1]
        path.write_text(json.dumps(doc))
    else:
        path.unlink()
    with pytest.raises(CorruptExportError, match=f"{path}: (missing|does not match)"):
        guideloom.load_export(target)
    verify = _cli_verify(target)
    assert verify.returncode == 1, verify.stderr
    assert str(path) in verify.stderr
    assert "damaged" in verify.stderr
