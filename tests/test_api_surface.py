"""Names a user types from the docs: the package ``guideloom.export`` is also the function."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

import guideloom
from guideloom.demo import make_demo_data

ROOT = Path(__file__).resolve().parents[1]

BOTH_FORMS = textwrap.dedent("""
    import json
    import sys

    import guideloom

    called = guideloom.export("force-curve", "by-call", kind="npz", data_dir="data",
                              sim_ids=[4, 1, 3], sim_ids_order="sim_ids", client="sync")
    import guideloom.export
    from guideloom.export import ExportResult, ExportSpec

    named = guideloom.export.export("force-curve", "by-name", kind="npz", data_dir="data",
                                    sim_ids=[4, 1, 3], sim_ids_order="sim_ids", client="sync")
    assert isinstance(called, ExportResult) and isinstance(named, ExportResult)
    assert ExportSpec.__module__ == "guideloom.export.spec"
    print(json.dumps({"called": called.manifest, "named": named.manifest,
                      "package": sys.modules["guideloom.export"] is guideloom.export}))
    """)


def test_calling_the_export_package_runs_the_export_function(tmp_path):
    make_demo_data(tmp_path / "data", n=6)
    (tmp_path / "both.py").write_text(BOTH_FORMS)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "both.py"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["package"] is True
    called, named = out["called"], out["named"]
    assert called["count"] == named["count"] == 3
    assert called["identity"] == named["identity"]
    assert called["checksums"]["sha256"] == named["checksums"]["sha256"]
    a = guideloom.load_export(tmp_path / "by-call")
    b = guideloom.load_export(tmp_path / "by-name")
    assert a.sim_ids.tolist() == b.sim_ids.tolist() == [4, 1, 3]
    for i in range(3):
        np.testing.assert_array_equal(a[i]["force_data"], b[i]["force_data"])


def test_the_callable_package_shows_the_function_signature():
    import inspect

    import guideloom.export

    assert callable(guideloom.export)
    assert inspect.signature(guideloom.export) == inspect.signature(guideloom.export.export)
    assert guideloom.export.export.__module__ == "guideloom.export.api"


def test_the_callable_package_pickles_by_name_as_modules_do():
    import pickle

    import cloudpickle

    import guideloom.export as gx

    def uses_the_package(record):  # shipped by value to Dask workers, with its globals
        return gx.ExportSpec

    assert pickle.loads(pickle.dumps(gx)) is gx
    assert pickle.loads(cloudpickle.dumps(gx)) is gx
    assert pickle.loads(cloudpickle.dumps(uses_the_package))({}) is gx.ExportSpec
