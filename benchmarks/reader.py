"""``load_export`` read cost next to the floor: raw ``np.load(..., mmap_mode="r")`` indexing.

Run: ``python3 benchmarks/reader.py [--n 1000] [--cache DIR]``

Exports the seed's force-signals view (resampled to 1000 x 8) once, then times, warm:
per-row reads (``export[i]`` vs ``{f: np.array(mm[f][i])}``) and 256-row random batches
(``export.batch(idx)`` vs ``{f: mm[f][idx]}``), all in one run.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import guideloom
from guideloom.demo import cached_demo_data

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root
from guideloom.workflows.demo_transforms import resample_and_emit  # noqa: E402 - the seed's transform

CACHE = Path(tempfile.gettempdir()) / "guideloom-bench"


def best_of(fn, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--cache", type=Path, default=CACHE)
    args = parser.parse_args()
    data = cached_demo_data(args.cache, args.n, (100, 160), "zip")
    ds = guideloom.load(data_dir=data)
    guideloom.add_view(ds, "force-signals", fields={
        "force": "force_data", "geometry": "process-parameters/geometry",
        "blankholder_force": "process-parameters/blankholder_force"})
    out = args.cache / "reader-export"
    shutil.rmtree(out, ignore_errors=True)
    guideloom.export_to_numpy("force-signals", out, dataset=ds, client="sync",
                              record_transform=resample_and_emit)
    export = guideloom.load_export(out)
    raw = {f: np.load(out / f"{f}.npy", mmap_mode="r") for f in export.fields}
    n = len(export)
    rng = np.random.default_rng(0)
    rows = rng.integers(0, n, size=2000)
    batches = [rng.integers(0, n, size=256) for _ in range(50)]

    def rows_export():
        for i in rows:
            export[int(i)]

    def rows_raw():
        for i in rows:
            {f: np.array(a[i]) for f, a in raw.items()}

    def batches_export():
        for idx in batches:
            export.batch(idx)

    def batches_raw():
        for idx in batches:
            {f: a[idx] for f, a in raw.items()}

    rows_export(), batches_export()  # warm the page cache
    t_row, t_row_raw = best_of(rows_export) / len(rows), best_of(rows_raw) / len(rows)
    t_b, t_b_raw = best_of(batches_export) / len(batches), best_of(batches_raw) / len(batches)
    print(f"load_export reader benchmark: {n} rows, fields {export.fields}")
    print(f"{'read':28s} {'load_export':>12s} {'raw memmap':>12s} {'ratio':>7s}")
    print(f"{'one row':28s} {t_row * 1e6:9.1f} us {t_row_raw * 1e6:9.1f} us "
          f"{t_row / t_row_raw:7.2f}")
    print(f"{'batch of 256 random rows':28s} {t_b * 1e3:9.2f} ms {t_b_raw * 1e3:9.2f} ms "
          f"{t_b / t_b_raw:7.2f}")


if __name__ == "__main__":
    main()
