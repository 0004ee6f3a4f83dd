"""Per-record cost of ``iter_view`` next to the floor: plain h5py on a loose file.

Run: ``python3 benchmarks/iter_view.py [--n 12] [--scan-shape 2000 3200] [--cache DIR]``

Prints per-record milliseconds for the force view and ``pointcloud-op10`` (real scan shape by
default), zipped and loose, and the ratio to the floor, all measured in one run (warm cache,
median of repeats).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import h5py

import guideloom
from guideloom.demo import cached_demo_data

CACHE = Path(tempfile.gettempdir()) / "guideloom-bench"


def per_record_ms(fn, n_records: int, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) / n_records * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=12)
    parser.add_argument("--scan-shape", type=int, nargs=2, default=(2000, 3200))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--cache", type=Path, default=CACHE)
    args = parser.parse_args()
    shape = tuple(args.scan_shape)
    zipped = cached_demo_data(args.cache, args.n, shape, "zip")
    loose = cached_demo_data(args.cache, args.n, shape, "loose")
    ds = guideloom.load(data_dir=loose)
    datasets = {loose: ds, zipped: guideloom.load(data_dir=zipped)}  # manifest parsed once
    index = ds.index()
    with_scans = [i for i in index.ids if index.row(i)["has_pointcloud"]]

    cases = {
        "force-curve": (["force/data"], index.ids, {}),
        "pointcloud-op10": (["pointcloud/op10/z", "pointcloud/op10/luminescence"],
                            with_scans, {"where": lambda r: r["has_pointcloud"]}),
    }
    next(guideloom.streaming.iter_view("force-curve", data_dir=loose))  # imports, h5py start-up
    for name, root in (("loose", loose), ("zip", zipped)):
        t0 = time.perf_counter()
        next(guideloom.streaming.iter_view("force-curve", data_dir=root))
        print(f"first record, {name} layout, manifest + index + file scan included: "
              f"{(time.perf_counter() - t0) * 1000:.1f} ms")
    print(f"iter_view benchmark: {args.n} experiments, scans {shape[0]}x{shape[1]}, "
          f"median of {args.repeats} warm runs")
    print(f"{'view':18s} {'floor h5py loose':>17s} {'iter_view loose':>16s} {'iter_view zip':>14s}"
          f" {'loose/floor':>12s} {'zip/floor':>10s}")
    for view, (paths, ids, kwargs) in cases.items():
        def floor(paths=paths, ids=ids):
            for i in ids:
                with h5py.File(loose / "h5" / f"{i:04d}.h5", "r") as f:
                    for p in paths:
                        f[p][()]

        def through(root, view=view, kwargs=kwargs):
            dataset = datasets[root]
            for _ in guideloom.streaming.iter_view(view, dataset=dataset, **kwargs):
                pass

        floor()  # warm the page cache
        t_floor = per_record_ms(floor, len(ids), args.repeats)
        t_loose = per_record_ms(lambda: through(loose), len(ids), args.repeats)
        t_zip = per_record_ms(lambda: through(zipped), len(ids), args.repeats)
        print(f"{view:18s} {t_floor:14.2f} ms {t_loose:13.2f} ms {t_zip:11.2f} ms"
              f" {t_loose / t_floor:12.2f} {t_zip / t_floor:10.2f}")


if __name__ == "__main__":
    main()
