"""A damaged export is named as damaged, with the file (issue 22, unclear errors).

Each case damages one file of a real export the way a disk or a careless copy would; then
``load_export``, ``guideloom verify`` (exit 1: damaged, not 2: "not an export") and
``guideloom inspect`` (exit 1) all say which file and that the export is damaged, never a bare
``TokenError``, ``JSONDecodeError`` or ``FileNotFoundError``.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import guideloom
from guideloom.errors import CorruptExportError
from guideloom.export import export


def mean_force(rec):
    """One fixed-shape output."""
    return {"mean": np.asarray(rec["force_data"], dtype=np.float64).mean(axis=0)}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pristine")
    guideloom.make_demo_data(root / "data", n=6)
    out = {}
    for kind in ("npy", "npz", "zarr"):
        out[kind] = Path(export("force-curve", root / kind, kind=kind, data_dir=root / "data",
                                record_transform=mean_force, client="sync").target)
    return out


def _break_npy_header(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[20:30] = b"(" * 10  # the header's dict literal no longer closes
    path.write_bytes(bytes(data))


DAMAGE = {
    "npy data header": ("npy", "mean.npy", _break_npy_header),
    "npy sim_ids header": ("npy", "sim_ids.npy", _break_npy_header),
    "npz sim_ids missing": ("npz", "sim_ids.npy", Path.unlink),
    "npy sim_ids missing": ("npy", "sim_ids.npy", Path.unlink),
    "zarr array zarr.json": ("zarr", "mean/zarr.json", lambda p: p.write_text('{"broken')),
    "zarr root zarr.json": ("zarr", "zarr.json", lambda p: p.write_text('{"broken')),
    "zarr sim_ids zarr.json": ("zarr", "sim_ids/zarr.json", lambda p: p.write_text("[")),
    "zarr array made a group": ("zarr", "mean/zarr.json", lambda p: p.write_text(
        '{"zarr_format": 3, "node_type": "group", "attributes": {}}')),
    "npz export.json torn": ("npz", "export.json",
                             lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2])),
}


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "guideloom", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.fast_case("npy data header", "npy sim_ids header", "npy sim_ids missing",
                       "npz export.json torn", "npz sim_ids missing")
@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_damaged_file_is_a_corrupt_export_naming_it(pristine, tmp_path, case):
    kind, name, damage = DAMAGE[case]
    target = tmp_path / "export"
    shutil.copytree(pristine[kind], target)
    damage(target / name)
    with pytest.raises(CorruptExportError, match="damaged") as caught:
        guideloom.load_export(target)[0]
    assert str(target / name) in str(caught.value)

    verify = _cli("verify", str(target), cwd=tmp_path)
    assert verify.returncode == 1, verify.stderr  # damaged, not "not an export" (2)
    assert str(target / name) in verify.stderr
    assert "damaged" in verify.stderr
    assert "Traceback" not in verify.stderr

    inspect = _cli("inspect", str(target), cwd=tmp_path)
    assert inspect.returncode == 1, inspect.stdout + inspect.stderr
    assert f"status: damaged: {target / name}" in inspect.stdout
