"""npz records may differ in dtype; export.json says so (issue 22, cosmetics).

It used to record the first record's dtype for the field (``<f4``) when later records were
``<f8``; now such a field's ``dtype`` is ``"varies"`` with the sorted ``dtypes``, ``inspect``
lists them, and one dtype throughout is recorded as before.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

import guideloom
from guideloom.export import export


def mixed(rec):
    """float32 for even ids, float64 for odd ones; ``ids`` always int64."""
    dtype = np.float32 if int(rec["_sim_id"]) % 2 == 0 else np.float64
    return {"mean": np.asarray(rec["force_data"]).mean(axis=0).astype(dtype),
            "ids": np.int64(rec["_sim_id"])}


def test_npz_field_of_several_dtypes_is_recorded_as_varying(tmp_path):
    guideloom.make_demo_data(tmp_path / "data", n=6)
    result = export("force-curve", tmp_path / "out", kind="npz", data_dir=tmp_path / "data",
                    record_transform=mixed, client="sync", partition_size=2)
    fields = json.loads((tmp_path / "out" / "export.json").read_text())["fields"]
    assert fields["mean"] == {"shape": None, "dtype": "varies", "dtypes": ["<f4", "<f8"]}
    assert fields["ids"] == {"shape": None, "dtype": "<i8"}
    loaded = guideloom.load_export(result.target)
    got = {str(loaded[i]["mean"].dtype) for i in range(len(loaded))}
    assert got == {"float32", "float64"}  # what the manifest now says
    inspect = subprocess.run([sys.executable, "-m", "guideloom", "inspect", str(result.target)],
                             capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert inspect.returncode == 0, inspect.stderr
    assert "dtype varies (float32, float64)" in inspect.stdout
    croissant = (tmp_path / "out" / "croissant.json").read_text()
    assert "dtype varies (<f4, <f8)" in croissant
