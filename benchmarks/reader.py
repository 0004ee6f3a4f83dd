"""``load_export`` read cost next to rddac 2.0's ``load_export`` and raw memmap indexing.

Run: ``python3 benchmarks/reader.py [--n 2000] [--rounds 9] [--cache DIR] [--rddac-python PATH]``

Exports the seed's force-signals view (resampled to 1000 x 8, four fields) of ``--n`` small
zipped demo experiments once, then compares, side by side in one run, rddac 2.0's
``load_export`` with ours on the same export directory: one row (``export[i]``, 4000 random
rows) and ``by_sim_id`` (every id once, shuffled). rddac runs in a subprocess of a Python that
has ``rddac==2.0.0`` (``benchmarks/venvs.py``: ``--rddac-python``, ``$GUIDELOOM_RDDAC_PYTHON``,
a known venv, or one made once under the temporary directory; its side is skipped with a note
when none can be had) that stays up and times its reads whenever asked, so the two sides
alternate (A B, then B A, ``--rounds`` times; a side's time in a round is its fastest of three
passes, so a pass the busy machine preempted does not count, on the thread's CPU clock for the
single-threaded reads: rows, ids and batches); the figures are the medians of
the per-round times and of the per-round ratios, with the load average. The goal of issue 42:
per record >= 3x rddac.

Also timed, warm: 256-row random batches (``export.batch(idx)`` vs ``{f: mm[f][idx]}``), and
the loader's throughput (``StatefulDataLoader.from_export``, 256-row shuffled batches, no
worker processes, one epoch) against raw memmap reads of the same rows in the same order
(the loader's own order, ``loader.order(0)``), alternating likewise.

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
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import guideloom
from guideloom.demo import cached_demo_data

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root
sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling helpers
from guideloom.workflows.demo_transforms import resample_and_emit
from venvs import anchor_popen, rddac_python

CACHE = Path(tempfile.gettempdir()) / "guideloom-bench"
GOAL_PER_RECORD = 3.0  # issue 42: load_export per record >= 3x rddac 2.0
PASSES = 3  # passes per side and round; the fastest counts

# Run by rddac's Python: rddac's load_export on the same export; each line read from stdin
# ("rows 3": what, and how many passes) is answered with the seconds per read of the fastest
# pass, as JSON.
RDDAC_SIDE = """
import json, sys, time
import numpy as np
from rddac.streaming import load_export
export = load_export(sys.argv[1])
rows = np.load(sys.argv[2]).tolist(); ids = np.load(sys.argv[3]).tolist()
def read_rows():
    for i in rows:
        export[i]
def read_ids():
    for s in ids:
        export.by_sim_id(s)
work = {"rows": (read_rows, len(rows)), "ids": (read_ids, len(ids))}
read_rows(); read_ids()
print(json.dumps({"fields": list(export.fields)}), flush=True)
for line in sys.stdin:
    what, passes = line.split()
    fn, count = work[what]
    took = []
    for _ in range(int(passes)):
        t0 = time.thread_time(); fn(); took.append(time.thread_time() - t0)
    print(json.dumps(min(took) / count), flush=True)
"""


class RddacSide:
    """rddac's ``load_export`` in its own interpreter, timing one pass when asked."""

    def __init__(self, python: str, export_dir: Path, rows: np.ndarray, ids: np.ndarray):
        self._tmp = tempfile.TemporaryDirectory()
        np.save(Path(self._tmp.name) / "rows.npy", rows)
        np.save(Path(self._tmp.name) / "ids.npy", ids)
        self._proc = anchor_popen(
            [python, "-c", RDDAC_SIDE, str(export_dir), f"{self._tmp.name}/rows.npy",
             f"{self._tmp.name}/ids.npy"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self._proc.stdout is not None
        self.fields = json.loads(self._proc.stdout.readline())["fields"]

    def time(self, what: str) -> float:
        """Seconds per read of the fastest of :data:`PASSES` passes of ``what`` ("rows" or
        "ids")."""
        assert self._proc.stdin is not None
        assert self._proc.stdout is not None
        self._proc.stdin.write(f"{what} {PASSES}\n")
        self._proc.stdin.flush()
        return float(json.loads(self._proc.stdout.readline()))

    def close(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        self._proc.wait(timeout=60)
        self._tmp.cleanup()


def best_of(fn, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def fastest(fn: Callable[[], object], clock: Callable[[], float] = time.perf_counter) -> float:
    """Seconds of the fastest of :data:`PASSES` calls (a pass the busy machine preempted
    does not count), on ``clock``."""
    took = []
    for _ in range(PASSES):
        t0 = clock()
        fn()
        took.append(clock() - t0)
    return min(took)


def cpu_fastest(fn: Callable[[], object]) -> float:
    """:func:`fastest` on this thread's CPU time: a single-threaded loop over warm pages,
    timed without the time other processes held the CPU (on a shared machine at load 15 a
    3 ms pass was preempted in each of its three tries; rddac's side uses the same clock)."""
    return fastest(fn, time.thread_time)


def alternate(a: Callable[[], float], b: Callable[[], float], rounds: int
              ) -> tuple[float, float, float]:
    """Medians of ``a()``, ``b()`` and ``b()/a()`` over ``rounds`` rounds run A B, B A, ..."""
    times_a, times_b = [], []
    for r in range(rounds):
        if r % 2:
            times_b.append(b())
            times_a.append(a())
        else:
            times_a.append(a())
            times_b.append(b())
    ratios = [tb / ta for ta, tb in zip(times_a, times_b, strict=True)]
    return statistics.median(times_a), statistics.median(times_b), statistics.median(ratios)


def load() -> str:
    return "load average {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--rddac-python", default=None)
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
    row_list, id_list = rows.tolist(), ids.tolist()

    def rows_export():
        for i in row_list:
            export[i]

    def ids_export():
        for s in id_list:
            export.by_sim_id(s)

    def batches_export():
        for idx in batches:
            export.batch(idx)

    def batches_raw():
        for idx in batches:
            {f: a[idx] for f, a in raw.items()}

    rows_export(), ids_export(), batches_export(), batches_raw()  # warm the page cache
    t_b, t_b_raw, _ = alternate(lambda: cpu_fastest(batches_export) / len(batches),
                                lambda: cpu_fastest(batches_raw) / len(batches), args.rounds)
    python = rddac_python(args.rddac_python)
    theirs = None if python is None else RddacSide(python, out, rows, ids)
    print(f"load_export reader benchmark: {n} rows, fields {export.fields}; medians of "
          f"{args.rounds} alternating rounds; {load()} on {os.cpu_count()} CPUs")
    goals: list[tuple[str, float, bool]] = []
    if theirs is not None:
        try:
            t_row, r_row, row_ratio = alternate(lambda: cpu_fastest(rows_export) / len(rows),
                                                lambda: theirs.time("rows"), args.rounds)
            t_id, r_id, id_ratio = alternate(lambda: cpu_fastest(ids_export) / len(ids),
                                             lambda: theirs.time("ids"), args.rounds)
        finally:
            theirs.close()
        print(f"{'read':26s} {'guideloom':>11s} {'rddac 2.0':>11s} {'rddac/ours':>11s}")
        print(f"{'one row (export[i])':26s} {t_row * 1e6:8.2f} us {r_row * 1e6:8.2f} us "
              f"{row_ratio:11.2f}")
        print(f"{'by_sim_id':26s} {t_id * 1e6:8.2f} us {r_id * 1e6:8.2f} us {id_ratio:11.2f}")
        goals += [(f"load_export per record >= {GOAL_PER_RECORD:g}x faster than rddac",
                   row_ratio, row_ratio >= GOAL_PER_RECORD),
                  ("by_sim_id >= 3x faster than rddac", id_ratio, id_ratio >= 3)]
    else:
        print("rddac side skipped: no Python with rddac 2.0.0 (see benchmarks/venvs.py)")
    print(f"{'batch of 256 random rows':26s} {t_b * 1e3:8.3f} ms, raw memmap "
          f"{t_b_raw * 1e3:8.3f} ms: ours/raw {t_b / t_b_raw:.2f}")
    goals.append(("batch of 256 within 1.2x of raw memmap fancy indexing", t_b / t_b_raw,
                  t_b / t_b_raw <= 1.2))
    goals += loader_case(export, raw, args.rounds)
    goals += zarr_case(ds, args.cache / f"reader-export-n{args.n}.zarr", rng)
    if args.scan_n:
        goals += scan_case(args.cache, args.scan_n,
                           tuple(int(v) for v in args.scan.split("x")), rng)
    print(f"when done: {load()}")
    report_goals(goals)


def loader_case(export, raw: dict[str, np.ndarray], rounds: int
                ) -> list[tuple[str, float, bool]]:
    """Rows/s of one epoch of ``StatefulDataLoader.from_export`` (256-row shuffled batches, no
    worker processes) against raw memmap reads of the same rows in the same order."""
    from guideloom import StatefulDataLoader

    loader = StatefulDataLoader.from_export(export, device="cpu", local_batch_size=256,
                                            shuffle=True, shuffle_seed=0, drop_last=False,
                                            num_workers=0)
    n = len(export)
    order = loader.order(0)
    index_batches = [order(np.arange(s, min(s + 256, n))) for s in range(0, n, 256)]

    def one_epoch() -> None:
        loader.set_epoch(0)
        seen = sum(len(batch["force"]) for batch in loader)
        assert seen == n, (seen, n)

    def raw_reads() -> None:
        for idx in index_batches:
            {f: a[idx] for f, a in raw.items()}

    def epoch_loader() -> float:
        return n / fastest(one_epoch)

    def epoch_raw() -> float:
        return n / fastest(raw_reads)

    epoch_loader(), epoch_raw()  # warm
    ours, theirs, _ = alternate(epoch_loader, epoch_raw, rounds)
    loader.close()
    share = ours / theirs
    print(f"loader, one epoch of 256-row shuffled batches (no workers): {ours:,.0f} rows/s; "
          f"raw memmap reads of the same rows in the same order {theirs:,.0f} rows/s: "
          f"{share:.2f} of raw")
    return []  # printed beside the raw reads; the issue sets no goal for it


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
