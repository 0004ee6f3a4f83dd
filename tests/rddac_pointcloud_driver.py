"""Runs rddac 2.0's pointcloud stage on a test data folder, in rddac's own venv (a subprocess of
the conformance tests; it imports rddac, never guideloom).

Only rddac's data access is redirected, not its algorithms: its labels come from the test's
labels folder (rddac reads its packaged ones), its simulation table and files from the test's
DDACS-shaped ``simulation/`` folder (rddac reads its packaged table and opens files through
ddacs' manifest), its raw experiments from ``<data>/h5/<id>.h5``.

Usage: python rddac_pointcloud_driver.py DATA LABELS OUT PARAMS_JSON ID [ID ...]
"""

from __future__ import annotations

import hashlib
import io
import json
import resource
import sys
import time
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
from rddac._preprocess.pointcloud import classifier, simulation, stage, training


def main(argv: list[str]) -> None:
    data, labels, out = Path(argv[0]), Path(argv[1]), Path(argv[2])
    params = json.loads(argv[3])
    ids = [int(i) for i in argv[4:]]
    label_files = sorted(p for p in labels.iterdir() if p.suffix == ".npz")

    def labeled_tasks() -> list[tuple[str, int, str]]:
        return sorted((p.stem, int(p.stem[:4]), p.stem[5:]) for p in label_files)

    def load_label(name: str) -> np.ndarray:
        return np.load(labels / f"{name}.npz")["outlier_mask"].astype(bool)

    def labels_sha256() -> str:
        digest = hashlib.sha256()
        for p in label_files:
            digest.update(p.name.encode())
            digest.update(p.read_bytes())
        return digest.hexdigest()

    class TestSimulations(simulation.SimContext):
        def __init__(self, data_dir: str | Path) -> None:
            self.sim_dir = Path(data_dir) / "simulation"
            table = pd.read_csv(self.sim_dir / "process_parameters.csv")
            self.params = table[table["rddac"]].drop(columns="rddac").reset_index(drop=True)
            self._cache = {}

    class ZipSimulations:
        @staticmethod
        def open_h5(sim_id: int, data_dir: str | Path) -> h5py.File:
            with zipfile.ZipFile(Path(data_dir) / "rddac.zip") as zf:
                return h5py.File(io.BytesIO(zf.read(f"{sim_id}.h5")), "r")

    def open_raw(exp_id: int, data_dir: str | Path) -> h5py.File:
        return h5py.File(Path(data_dir) / "h5" / f"{exp_id:04d}.h5", "r")

    training.labeled_tasks = labeled_tasks
    training.load_label = load_label
    training.open_raw = open_raw
    classifier.labels_sha256 = labels_sha256
    simulation._ddacs_h5_tools = ZipSimulations
    stage.SimContext = TestSimulations
    training.SimContext = TestSimulations

    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    stage.preflight(data, params, out_dir=out)
    print(json.dumps({"prepare_s": time.perf_counter() - started}), flush=True)
    for exp_id in ids:
        target = out / f"{exp_id:04d}.h5"
        started = time.perf_counter()
        with open_raw(exp_id, data) as raw, h5py.File(target, "a") as f:
            status = stage.process_experiment(raw, f, data_dir=data, overwrite=True, **params)
        print(json.dumps({"id": exp_id, "status": status, "seconds": time.perf_counter() - started,
                          "max_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}),
              flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
