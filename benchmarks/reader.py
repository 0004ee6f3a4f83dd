"""``load_export`` read cost next to rddac 2.0's ``load_export`` and raw memmap indexing.

Run: ``python3 benchmarks/reader.py [--n 2000] [--cache DIR] [--rddac-python PATH]``

Exports the seed's force-signals view (resampled to 1000 x 8, four fields) once, then times,
warm and in one run: one row (``export[i]``), ``by_sim_id`` and 256-row random batches
(``export.batch(idx)`` vs ``{f: mm[f][idx]}``). rddac's ``load_export`` reads the same export
directory in a subprocess of the Python that has ``rddac==2.0.0`` installed (default
``/work/venv-rddac/bin/python``; its side is skipped with a note when that is absent).

The same view is also exported to zarr, where ``export[a:b]`` (64-row slices) and
``export.batch(idx)`` are timed against zarr's own reads of the same arrays (``arr[a:b]`` and
``arr.get_orthogonal_selection``); the goal is within 1.2x of them. A scan-size zarr case
(``--scan-n`` experiments of ``--scan`` laser scans, the ``pointcloud-op10`` view: rows of
12.8 MB at 1000 x 1600, one chunk each) times ``export[s:s+8]`` and ``export.batch`` of 8
sorted random rows against zarr's slice and the faster of zarr's orthogonal selection and one
slice per row (``--scan-n 0`` leaves it out).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
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
RDDAC_PYTHON = Path("/work/venv-rddac/bin/python")

# Run by rddac's Python: the same reads through rddac's load_export, best of 5, as JSON.
RDDAC_SIDE = """
import json, sys, time
import numpy as np
from rddac.streaming import load_export
export = load_export(sys.argv[1])
rows = np.load(sys.argv[2]); ids = np.load(sys.argv[3])
def best(fn):
    out = []
    for _ in range(5):
        t0 = time.perf_counter(); fn(); out.append(time.perf_counter() - t0)
    return min(out)
def read_rows():
    for i in rows.tolist():
        export[i]
def read_ids():
    for s in ids.tolist():
        export.by_sim_id(s)
read_rows(); read_ids()
print(json.dumps({"row": best(read_rows) / len(rows), "by_sim_id": best(read_ids) / len(ids),
                  "fields": list(export.fields)}))
"""


def best_of(fn, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def rddac_side(python: Path, export_dir: Path, rows: np.ndarray, ids: np.ndarray) -> dict | None:
    """rddac's timings on the same export and reads, or ``None`` when rddac is not installed."""
    if not python.is_file():
        return None
    with tempfile.TemporaryDirectory() as tmp:
        np.save(Path(tmp) / "rows.npy", rows)
        np.save(Path(tmp) / "ids.npy", ids)
        done = subprocess.run(
            [str(python), "-c", RDDAC_SIDE, str(export_dir), f"{tmp}/rows.npy", f"{tmp}/ids.npy"],
            capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--rddac-python", type=Path, default=RDDAC_PYTHON)
    parser.add_argument("--scan-n", type=int, default=48)
    parser.add_argument("--scan", default="1000x1600")
    args = parser.parse_args()
    data = cached_demo_data(args.cache, args.n, (100, 160), "zip")
    ds = guideloom.load(data_dir=data)
    guideloom.add_view(ds, "force-signals", fields={
        "force": "force_data", "geometry": "process-parameters/geometry",
        "blankholder_force": "process-parameters/blankholder_force"})
    out = args.cache / f"reader-export-n{args.n}"
    if not (out / "export.json").is_file():
        shutil.rmtree(out, ignore_errors=True)
        guideloom.export_to_numpy("force-signals", out, dataset=ds, client="sync",
                                  record_transform=resample_and_emit)
    export = guideloom.load_export(out)
    raw = {f: np.load(out / f"{f}.npy", mmap_mode="r") for f in export.fields}
    n = len(export)
    rng = np.random.default_rng(0)
    rows = rng.integers(0, n, size=4000)
    ids = np.asarray(export.sim_ids)[rng.permutation(n)]
    batches = [rng.integers(0, n, size=256) for _ in range(50)]

    def rows_export():
        for i in rows.tolist():
            export[i]

    def ids_export():
        for s in ids.tolist():
            export.by_sim_id(s)

    def batches_export():
        for idx in batches:
            export.batch(idx)

    def batches_raw():
        for idx in batches:
            {f: a[idx] for f, a in raw.items()}

    rows_export(), ids_export(), batches_export(), batches_raw()  # warm the page cache
    t_row, t_id = best_of(rows_export) / len(rows), best_of(ids_export) / len(ids)
    t_b, t_b_raw = best_of(batches_export) / len(batches), best_of(batches_raw) / len(batches)
    theirs = rddac_side(args.rddac_python, out, rows, ids)
    print(f"load_export reader benchmark: {n} rows, fields {export.fields}")
    print(f"{'read':26s} {'guideloom':>11s} {'rddac 2.0':>11s} {'raw memmap':>11s} "
          f"{'rddac/ours':>11s} {'ours/raw':>9s}")
    r_row = f"{theirs['row'] * 1e6:8.2f} us" if theirs else f"{'n/a':>11s}"
    r_id = f"{theirs['by_sim_id'] * 1e6:8.2f} us" if theirs else f"{'n/a':>11s}"
    print(f"{'one row (export[i])':26s} {t_row * 1e6:8.2f} us {r_row} {'':11s} "
          f"{theirs['row'] / t_row if theirs else float('nan'):11.2f}")
    print(f"{'by_sim_id':26s} {t_id * 1e6:8.2f} us {r_id} {'':11s} "
          f"{theirs['by_sim_id'] / t_id if theirs else float('nan'):11.2f}")
    print(f"{'batch of 256 random rows':26s} {t_b * 1e3:8.3f} ms {'':11s} {t_b_raw * 1e3:8.3f} ms"
          f" {'':11s} {t_b / t_b_raw:9.2f}")
    zarr_goals = zarr_case(ds, args.cache / f"reader-export-n{args.n}.zarr", rng)
    if args.scan_n:
        zarr_goals += scan_case(args.cache, args.scan_n,
                                tuple(int(v) for v in args.scan.split("x")), rng)
    if theirs is None:
        print(f"rddac side skipped: {args.rddac_python} not found")
        report_goals(zarr_goals)
        return
    report_goals(zarr_goals + [
        ("load_export per record >= 2x faster than rddac", theirs["row"] / t_row,
         theirs["row"] / t_row >= 2),
        ("by_sim_id >= 2x faster than rddac", theirs["by_sim_id"] / t_id,
         theirs["by_sim_id"] / t_id >= 2),
        ("batch of 256 within 1.2x of raw memmap fancy indexing", t_b / t_b_raw,
         t_b / t_b_raw <= 1.2),
    ])


def report_goals(goals: list[tuple[str, float, bool]]) -> None:
    for goal, value, ok in goals:
        print(f"goal: {goal}: {value:.2f} -> {'met' if ok else 'NOT met'}")


def zarr_case(ds, out: Path, rng) -> list[tuple[str, float, bool]]:
    """``load_export`` on a zarr export of the same view against zarr's own slicing."""
    import zarr

    if not (out / "export.json").is_file():
        shutil.rmtree(out, ignore_errors=True)
        guideloom.export_to_zarr("force-signals", out, dataset=ds, client="sync",
                                 record_transform=resample_and_emit)
    export = guideloom.load_export(out)
    group = zarr.open_group(str(out), mode="r")
    raw = {f: group[f] for f in export.fields}
    n = len(export)
    starts = [int(s) for s in rng.integers(0, n - 64, size=20)]
    batches = [np.sort(rng.choice(n, size=256, replace=False)) for _ in range(10)]

    def slices_export():
        for s in starts:
            export[s:s + 64]

    def slices_raw():
        for s in starts:
            {f: a[s:s + 64] for f, a in raw.items()}

    def batches_export():
        for idx in batches:
            export.batch(idx)

    def batches_raw():
        for idx in batches:
            {f: a.get_orthogonal_selection((idx,)) for f, a in raw.items()}

    slices_export(), slices_raw(), batches_export(), batches_raw()  # warm
    t_s, t_s_raw = best_of(slices_export) / len(starts), best_of(slices_raw) / len(starts)
    t_b, t_b_raw = best_of(batches_export) / len(batches), best_of(batches_raw) / len(batches)
    print(f"zarr export ({n} rows, chunks of {raw[export.fields[0]].chunks[0]} rows):")
    print(f"{'read':26s} {'load_export':>11s} {'raw zarr':>11s} {'ours/raw':>9s}")
    print(f"{'export[s:s+64]':26s} {t_s * 1e3:8.3f} ms {t_s_raw * 1e3:8.3f} ms "
          f"{t_s / t_s_raw:9.2f}")
    print(f"{'batch of 256 sorted rows':26s} {t_b * 1e3:8.3f} ms {t_b_raw * 1e3:8.3f} ms "
          f"{t_b / t_b_raw:9.2f}")
    return [("zarr export[s:s+64] within 1.2x of zarr's slice", t_s / t_s_raw,
             t_s / t_s_raw <= 1.2),
            ("zarr batch of 256 within 1.2x of zarr's orthogonal selection", t_b / t_b_raw,
             t_b / t_b_raw <= 1.2)]


def scan_case(cache: Path, n: int, scan: tuple[int, ...], rng) -> list[tuple[str, float, bool]]:
    """``load_export`` on a zarr export of scan-size rows against zarr's own reads."""
    import zarr

    data = cached_demo_data(cache, n, scan, "zip")
    out = cache / f"reader-scan-n{n}-{scan[0]}x{scan[1]}.zarr"
    if not (out / "export.json").is_file():
        shutil.rmtree(out, ignore_errors=True)
        guideloom.export_to_zarr("pointcloud-op10", out, data_dir=data, client="sync",
                                 on_error="skip")
    export = guideloom.load_export(out)
    group = zarr.open_group(str(out), mode="r")
    raw = {f: group[f] for f in export.fields}
    rows = len(export)
    starts = [int(s) for s in rng.integers(0, rows - 8, size=6)]
    batches = [np.sort(rng.choice(rows, size=8, replace=False)) for _ in range(6)]

    def slices_export():
        for s in starts:
            export[s:s + 8]

    def slices_raw():
        for s in starts:
            {f: a[s:s + 8] for f, a in raw.items()}

    def batches_export():
        for idx in batches:
            export.batch(idx)

    def batches_orthogonal():
        for idx in batches:
            {f: a.get_orthogonal_selection((idx,)) for f, a in raw.items()}

    def batches_per_row():
        for idx in batches:
            {f: np.concatenate([a[i:i + 1] for i in idx.tolist()]) for f, a in raw.items()}

    for fn in (slices_export, slices_raw, batches_export, batches_orthogonal, batches_per_row):
        fn()  # warm
    t_s, t_s_raw = best_of(slices_export, 3) / len(starts), best_of(slices_raw, 3) / len(starts)
    t_b = best_of(batches_export, 3) / len(batches)
    t_o = best_of(batches_orthogonal, 3) / len(batches)
    t_r = best_of(batches_per_row, 3) / len(batches)
    t_b_raw = min(t_o, t_r)
    mb = sum(a.nbytes for a in export[0].values()) / 1e6
    print(f"zarr scan export ({rows} rows of {mb:.1f} MB, {scan[0]}x{scan[1]} scans, chunks "
          f"of {raw[export.fields[0]].chunks[0]} row):")
    print(f"{'read':26s} {'load_export':>11s} {'raw zarr':>11s} {'ours/raw':>9s}")
    print(f"{'export[s:s+8]':26s} {t_s * 1e3:8.1f} ms {t_s_raw * 1e3:8.1f} ms "
          f"{t_s / t_s_raw:9.2f}")
    print(f"{'batch of 8 sorted rows':26s} {t_b * 1e3:8.1f} ms {t_b_raw * 1e3:8.1f} ms "
          f"{t_b / t_b_raw:9.2f}  (zarr: orthogonal {t_o * 1e3:.1f} ms, "
          f"a slice per row {t_r * 1e3:.1f} ms)")
    return [("zarr scan rows export[s:s+8] within 1.2x of zarr's slice", t_s / t_s_raw,
             t_s / t_s_raw <= 1.2),
            ("zarr scan rows batch of 8 within 1.2x of zarr's faster own read", t_b / t_b_raw,
             t_b / t_b_raw <= 1.2)]


if __name__ == "__main__":
    main()
