"""Per-record cost of ``iter_view`` next to plain h5py on a loose file and the decode floor.

Run: ``python3 benchmarks/iter_view.py [--n 12] [--scan-shape 2000 3200] [--cache DIR]``

Prints per-record milliseconds for the force view and ``pointcloud-op10`` (real scan shape by
default): plain h5py on the loose file, ``iter_view`` on the loose and the zipped layout, and
the decode floor (inflating the same raw chunks with the fast path's inflater on one core,
divided by the decode threads), all measured in one run (warm page cache, median of repeats).
Then the goals of issue 11 with their figures.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np

import guideloom
from guideloom import fastread
from guideloom.demo import cached_demo_data
from guideloom.fastread import inflate

CACHE = Path(tempfile.gettempdir()) / "guideloom-bench"


def per_record_ms(fn, n_records: int, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) / n_records * 1000)
    return statistics.median(times)


def interleaved(fns, n_records: int, repeats: int, passes: int = 1) -> list[list[float]]:
    """Per-record ms of each of ``fns``, run in turn within each repeat; each timing covers
    ``passes`` calls (so that a short view's timing is not one scheduler tick)."""
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeats):
        for fn, out in zip(fns, times, strict=True):
            t0 = time.perf_counter()
            for _ in range(passes):
                fn()
            out.append((time.perf_counter() - t0) / (n_records * passes) * 1000)
    return times


def raw_chunks(files: list[Path], paths: list[str]) -> list[tuple[np.ndarray, int, int]]:
    """Every deflate chunk of ``paths`` in ``files``: (stored bytes, stored size, decoded size)."""
    out = []
    for path in files:
        with h5py.File(path, "r") as f:
            for p in paths:
                dset = f[p]
                plan = fastread.plan(dset)
                assert plan is not None, f"{p} is not on the fast path"
                with open(path, "rb") as fh:
                    for c in plan.chunks:
                        fh.seek(c.address)
                        stored = np.frombuffer(fh.read(c.size), np.uint8)
                        out.append((stored, c.size, plan.chunk_nbytes))
    return out


def decode_floor_ms(chunks: list[tuple[np.ndarray, int, int]], n_records: int,
                    repeats: int) -> float:
    """Per-record ms to inflate ``chunks`` on one core, divided by the decode threads."""
    outs = [np.empty(n, np.uint8) for _, _, n in chunks]

    def run() -> None:
        for (stored, size, _), dst in zip(chunks, outs, strict=True):
            inflate.inflate_into(stored, size, dst)

    run()
    return per_record_ms(run, n_records, repeats) / fastread.decode_threads()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=12)
    parser.add_argument("--scan-shape", type=int, nargs=2, default=(2000, 3200))
    parser.add_argument("--repeats", type=int, default=9)
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
          f"median of {args.repeats} warm runs; inflate back end {fastread.INFLATE_BACKEND}, "
          f"{fastread.decode_threads()} decode threads")
    print(f"{'view':16s} {'h5py loose':>11s} {'ours loose':>11s} {'ours zip':>9s}"
          f" {'decode floor':>13s} {'zip/h5py':>9s} {'h5py/loose':>11s} {'floor/loose':>12s}")
    results = {}
    for view, (paths, ids, kwargs) in cases.items():
        files = [loose / "h5" / f"{i:04d}.h5" for i in ids]

        def plain(paths=paths, files=files):
            for path in files:
                with h5py.File(path, "r") as f:
                    for p in paths:
                        f[p][()]

        def through(root, view=view, kwargs=kwargs):
            dataset = datasets[root]
            for _ in guideloom.streaming.iter_view(view, dataset=dataset, **kwargs):
                pass

        t0 = time.perf_counter()
        plain()  # warm the page cache
        passes = max(1, round(0.05 / (time.perf_counter() - t0)))  # timings of >= ~50 ms
        runs = interleaved([plain, lambda: through(loose), lambda: through(zipped)], len(ids),
                           args.repeats, passes)
        t_h5py, t_loose, t_zip = (statistics.median(r) for r in runs)
        t_floor = decode_floor_ms(raw_chunks(files, paths), len(ids), args.repeats)
        results[view] = (statistics.median(z / h for h, z in zip(runs[0], runs[2], strict=True)),
                         statistics.median(h / o for h, o in zip(runs[0], runs[1], strict=True)))
        print(f"{view:16s} {t_h5py:8.2f} ms {t_loose:8.2f} ms {t_zip:6.2f} ms {t_floor:10.2f} ms"
              f" {results[view][0]:9.2f} {results[view][1]:11.2f} {t_floor / t_loose:12.2f}")
    print("(ratios: median over repeats of the ratio within one repeat; the three are run in turn"
          " in each repeat so that load from elsewhere hits them alike)")
    zip_ratio = results["force-curve"][0]
    op10_speedup = results["pointcloud-op10"][1]
    print(f"goal: force from a zip within 10% of loose-file h5py: zip/h5py = {zip_ratio:.2f}"
          f" (<= 1.10) -> {'met' if zip_ratio <= 1.10 else 'NOT met'}")
    print(f"goal: op10 per record >= 1.8x faster than h5py on a loose file: {op10_speedup:.2f}x"
          f" -> {'met' if op10_speedup >= 1.8 else 'NOT met'}")


if __name__ == "__main__":
    main()
