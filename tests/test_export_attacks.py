"""Crafted inputs and transforms from the attack run (issue 22): each publishes nothing wrong."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

import guideloom
from guideloom.demo import make_demo_data
from guideloom.errors import ManifestError

BIG_ID = 99999999999999999999  # above int64


def fixed_force(rec):
    """The first 50 force rows, no use of the id."""
    return {"force": np.asarray(rec["force_data"])[:50]}


def out_path(result, target: Path) -> Path:
    """The export directory whatever the export function returned."""
    return target if isinstance(result, dict) else Path(result)


def _with_big_id(root: Path) -> Path:
    make_demo_data(root, n=4, layout="loose", seed=0)
    shutil.copy(root / "h5" / "0003.h5", root / "h5" / f"{BIG_ID}.h5")
    with open(root / "process_parameters.csv", "a") as fh:
        fh.write(f"{BIG_ID},1,1,concave,100,25.526,medium,True,False,val\n")
    return root


@pytest.mark.parametrize("kind", ["npy", "npz", "zarr"])
def test_an_id_above_int64_is_refused_at_plan_time(tmp_path, kind):
    data = _with_big_id(tmp_path / "data")
    target = tmp_path / f"out.{kind}"
    export = {"npy": guideloom.export_to_numpy, "npz": guideloom.export_to_numpy_per_sim,
              "zarr": guideloom.export_to_zarr}[kind]
    with pytest.raises(ManifestError, match=f"64-bit.*{BIG_ID}"):
        export("force-curve", target, data_dir=data, client="sync", record_transform=fixed_force)
    assert not target.exists()
    out = export("force-curve", target, data_dir=data, client="sync",
                 record_transform=fixed_force, sim_ids=[0, 1, 2, 3])
    assert guideloom.load_export(out_path(out, target)).sim_ids.tolist() == [0, 1, 2, 3]
