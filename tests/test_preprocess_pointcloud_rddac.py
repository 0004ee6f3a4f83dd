"""Conformance of the pointcloud stage with rddac 2.0: the same synthetic raw scans (loose, and
zipped for guideloom), the same labels and simulations; rddac runs in its own venv
(tests/rddac_venv.py) through tests/rddac_pointcloud_driver.py. Issue 39 asks for >= 99 % of
the kept points in common, rotations within 1e-3 and translations within 0.05 mm; the
cleaning statistics and the packed luminescence are compared exactly.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest

from guideloom.h5_tools import open_h5
from guideloom.preprocess import pointcloud as pc
from guideloom.select.manifest import RDDAC_SPEC, load
from tests import pointcloud_helpers as ph
from tests.rddac_venv import rddac_python

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]
DRIVER = Path(__file__).with_name("rddac_pointcloud_driver.py")
COUNTS = ("n_valid_pixels", "n_angle_seeds", "n_component_seeds", "n_mono_seeds",
          "n_geometric_outliers", "closing_iterations", "n_rf_removed", "n_final_sweep",
          "n_final_points", "n_anchor_points")


@pytest.fixture(scope="module")
def rddac() -> str:
    python, why = rddac_python()
    if python is None:
        pytest.skip(f"rddac 2.0 is not available: {why}")
    return python


@pytest.fixture(scope="module")
def runs(rddac: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("conformance")
    data, labels = ph.write_dataset(root)
    ids = [str(e.index) for e in ph.EXPERIMENTS]
    reference = root / "rddac"
    reference.mkdir()
    for exp in ph.EXPERIMENTS:
        with h5py.File(reference / f"{exp.index:04d}.h5", "w") as f:
            ph.processed_means(f, exp)
    subprocess.run([rddac, str(DRIVER), str(data), str(labels), str(reference),
                    json.dumps(ph.SMALL), *ids], check=True, timeout=1500)
    loose = root / "loose"
    _ours(data, labels, loose, lambda exp: h5py.File(data / "h5" / f"{exp.index:04d}.h5", "r"))
    zipped = _zipped_copy(data, root / "zipped-data")
    dataset = load(str(zipped), spec=RDDAC_SPEC)
    _ours(zipped, labels, root / "zipped",
          lambda exp: open_h5(exp.index, data_dir=str(zipped), dataset=dataset))
    return {"rddac": reference, "loose": loose, "zipped": root / "zipped"}


def _ours(data: Path, labels: Path, out: Path, open_raw) -> None:
    out.mkdir()
    prepared = pc.prepare(ph.SMALL, out_dir=str(out), data_dir=str(data), labels=str(labels),
                          rebuild=False)
    for exp in ph.EXPERIMENTS:
        with open_raw(exp) as raw, h5py.File(out / f"{exp.index:04d}.h5", "w") as f:
            ph.processed_means(f, exp)
            assert pc.process_experiment(raw, f, params=ph.SMALL, prepared=prepared) == "processed"


def _zipped_copy(data: Path, target: Path) -> Path:
    """The same files with the experiments as members of ``concave.zip``/``convex.zip``."""
    shutil.copytree(data, target, ignore=shutil.ignore_patterns("h5"))
    for geometry in ("concave", "convex"):
        with zipfile.ZipFile(target / f"{geometry}.zip", "w", zipfile.ZIP_STORED) as zf:
            for exp in ph.EXPERIMENTS:
                if exp.geometry == geometry:
                    zf.write(data / "h5" / f"{exp.index:04d}.h5", f"{exp.index:04d}.h5")
    return target


def test_defaults_are_rddacs(rddac: str) -> None:
    done = subprocess.run([rddac, "-c", "import json; from rddac._preprocess.config import "
                           "DEFAULTS; print(json.dumps(DEFAULTS['pointcloud']))"],
                          capture_output=True, text=True, check=True, timeout=300)
    assert json.loads(done.stdout) == pc.DEFAULTS


@pytest.mark.parametrize("layout", ["loose", "zipped"])
def test_same_points_and_alignment(runs: dict[str, Path], layout: str) -> None:
    for exp in ph.EXPERIMENTS:
        name = f"{exp.index:04d}.h5"
        with h5py.File(runs[layout] / name, "r") as ours, \
                h5py.File(runs["rddac"] / name, "r") as theirs:
            a, b = ours["pointcloud"], theirs["pointcloud"]
            assert dict(a.attrs).keys() == dict(b.attrs).keys()
            for key in a.attrs:
                assert str(a.attrs[key]) == str(b.attrs[key]), (name, key)
            for op in ("op10", "op20"):
                ga, gb = a[op], b[op]
                assert set(ga.attrs) == set(gb.attrs), (name, op)
                za, zb = ga["z"][:], gb["z"][:]
                common = len(set(map(tuple, za)) & set(map(tuple, zb)))
                assert common >= 0.99 * max(len(za), len(zb)), (name, op, common, len(za), len(zb))
                assert np.abs(ga.attrs["icp_rotation"] - gb.attrs["icp_rotation"]).max() <= 1e-3
                assert np.abs(ga.attrs["icp_translation"]
                              - gb.attrs["icp_translation"]).max() <= 0.05
                assert np.array_equal(ga["luminescence"][:], gb["luminescence"][:])
                for key in COUNTS:
                    assert ga.attrs[key] == gb.attrs[key], (name, op, key)
