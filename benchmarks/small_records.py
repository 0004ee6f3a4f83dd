"""Small records: per-record cost of ``iter_view`` on the force table, and the 2,000-experiment
export, with guideloom's native HDF5 reader, its h5py path, plain h5py and rddac 2.0.

Run: ``python3 benchmarks/small_records.py [--n 2000] [--reps 5] [--cache DIR]
[--rddac-python PY] [--no-export] [--no-iter]``

One run prints (issue 21, items 3 and 5):

1. ``iter_view("force-curve")`` per-record milliseconds over the ``--n`` small zipped demo
   experiments (stored members, the force table of 1117 x 8 float32 in 4 gzip+shuffle chunks,
   ~27 KB), each in a FRESH process, the pass after a warm-up pass, median of ``--reps``:
   guideloom (native reader, the default), guideloom with ``GUIDELOOM_NATIVE=0`` (h5py opens
   every member), a plain h5py loop over loose copies of the same files (open, read
   ``force/data``, close: a floor-ish reference), and rddac 2.0's ``iter_view`` run with the
   rddac venv's interpreter.
2. The force-signals export of the same experiments with the seed's transform in a fresh
   process (``benchmarks/export.py``'s children ``gl-export`` and ``rddac-export``), guideloom
   native and h5py path vs rddac 2.0; goal: >= 3x rddac.

Every child process prints one ``RESULT {json}`` line; the top level imports only the standard
library (and ``benchmarks/export.py``'s helpers), so the rddac child runs in the rddac venv.
The machine may be shared and noisy: compare the figures of one run.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve()
REPO = SCRIPT.parents[1]
SMALL_SCAN = (100, 160)
DEFAULT_CACHE = Path(tempfile.gettempdir()) / "guideloom-bench"
ITER_GOAL_MS = 0.3
EXPORT_GOAL = 3.0


def _export_module() -> Any:
    spec = importlib.util.spec_from_file_location("bench_export", SCRIPT.parent / "export.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_export"] = module
    spec.loader.exec_module(module)
    return module


# --- children (each runs in a fresh interpreter) -------------------------------------------------
def child_gl_iter(a: dict) -> dict:
    """guideloom's iter_view over every experiment: a warm-up pass, then a timed one."""
    import guideloom
    from guideloom.h5native import stats as records

    ds = guideloom.load(data_dir=a["data"])
    n = sum(1 for _ in guideloom.streaming.iter_view("force-curve", dataset=ds))
    records.NATIVE_STATS.reset()
    t0, c0 = time.perf_counter(), time.process_time()
    m = sum(1 for _ in guideloom.streaming.iter_view("force-curve", dataset=ds))
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"ms": seconds / m * 1e3, "cpu_ms": cpu / m * 1e3, "n": n,
            "stats": records.native_stats()}


def child_h5py_loop(a: dict) -> dict:
    """Plain h5py over the loose copies: open, read force/data, close."""
    import h5py

    files = sorted(Path(a["loose"]).glob("*.h5"))

    def run() -> None:
        for path in files:
            with h5py.File(path, "r") as f:
                f["force/data"][()]

    run()
    t0, c0 = time.perf_counter(), time.process_time()
    run()
    return {"ms": (time.perf_counter() - t0) / len(files) * 1e3,
            "cpu_ms": (time.process_time() - c0) / len(files) * 1e3, "n": len(files)}


def child_rddac_iter(a: dict) -> dict:
    """rddac 2.0's iter_view over the same experiments (a warm-up pass, then a timed one)."""
    import logging
    import warnings

    logging.getLogger("absl").setLevel(logging.ERROR)
    warnings.simplefilter("ignore")
    import rddac

    ds = rddac.load(source=a["manifest"], data_dir=a["data"])
    n = sum(1 for _ in rddac.streaming.iter_view("force-curve", dataset=ds,
                                                 data_dir=a["data"]))
    t0, c0 = time.perf_counter(), time.process_time()
    m = sum(1 for _ in rddac.streaming.iter_view("force-curve", dataset=ds,
                                                 data_dir=a["data"]))
    return {"ms": (time.perf_counter() - t0) / m * 1e3,
            "cpu_ms": (time.process_time() - c0) / m * 1e3, "n": n,
            "version": rddac.__version__}


CHILDREN = {"gl-iter": child_gl_iter, "h5py-loop": child_h5py_loop,
            "rddac-iter": child_rddac_iter}


# --- the parent ----------------------------------------------------------------------------------
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--rddac-python", default=None)
    parser.add_argument("--no-export", action="store_true", help="only the iter_view figures")
    parser.add_argument("--no-iter", action="store_true", help="only the export figures")
    parser.add_argument("--child", nargs=2, metavar=("NAME", "ARGS_JSON"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        name, raw = args.child
        print("RESULT " + json.dumps(CHILDREN[name](json.loads(raw))), flush=True)
        return

    bench = _export_module()
    from venvs import rddac_python as find_rddac

    rddac_python = find_rddac(args.rddac_python)
    cache = args.cache.expanduser().resolve()
    sys.path.insert(0, str(REPO))
    from guideloom.demo import cached_demo_data

    data = cached_demo_data(cache, args.n, SMALL_SCAN, "zip")
    loose = bench.loose_copy(data)
    problem = bench.rddac_available(rddac_python)
    manifest = None if problem else str(bench.rddac_manifest(data, cache))
    env = dict(os.environ)
    h5py_env = {**env, "GUIDELOOM_NATIVE": "0"}

    class Ours(bench.Child):
        """Runs this file's children."""

        def command(self, name: str, a: dict, python: str | None = None) -> list[str]:
            return [python or self.python, str(SCRIPT), "--child", name, json.dumps(a)]

    ours = Ours(sys.executable, env)
    print(f"small records: {args.n} zipped demo experiments (scans {SMALL_SCAN[0]}x"
          f"{SMALL_SCAN[1]}) in {bench.short([str(data)])}; {args.reps} fresh processes each, "
          "median [min-max]")
    if problem:
        print(f"rddac not run: {problem}")

    cases: list[tuple[str, str, dict, str | None, dict | None]] = [
        ("guideloom native", "gl-iter", {"data": str(data)}, None, env),
        ("guideloom h5py path", "gl-iter", {"data": str(data)}, None, h5py_env),
        ("plain h5py loop (loose)", "h5py-loop", {"loose": str(loose)}, None, env),
    ]
    if manifest:
        cases.append(("rddac 2.0", "rddac-iter", {"data": str(data), "manifest": manifest},
                      rddac_python, env))
    if not args.no_iter:
        results: dict[str, list[dict]] = {label: [] for label, *_ in cases}
        for _ in range(args.reps):  # interleaved, so load changes hit every case alike
            for label, name, a, python, case_env in cases:
                results[label].append(ours.run(name, a, python=python, env=case_env)[0])
        print("\n1. iter_view('force-curve'), per record (the second pass of a fresh process): "
              "wall ms, and the process's CPU ms (less sensitive to a loaded machine)")
        for label, name, a, python, case_env in cases:
            runs = results[label]
            extra = ""
            if "stats" in runs[0]:
                s = runs[0]["stats"]
                extra = f"  native {s['native']}, fallbacks {s['fallbacks']}"
            print(f"  {label:26s} {bench.stats([r['ms'] for r in runs]):>26s} ms  CPU "
                  f"{bench.stats([r['cpu_ms'] for r in runs]):>24s} ms{extra}")
            flag = " GUIDELOOM_NATIVE=0" if case_env is h5py_env else ""
            print(f"    command:{flag} {bench.short(ours.command(name, a, python))}")
        native_cpu = statistics.median(r["cpu_ms"] for r in results["guideloom native"])
        print(f"  (native CPU per record: {native_cpu:.3f} ms; load average when done: "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
        native_ms = statistics.median(r["ms"] for r in results["guideloom native"])
        h5py_ms = statistics.median(r["ms"] for r in results["guideloom h5py path"])
        rddac_ms = (statistics.median(r["ms"] for r in results["rddac 2.0"]) if manifest
                    else 0.0)
        print(f"  goal: native <= {ITER_GOAL_MS} ms per record: {native_ms:.3f} ms, "
              f"{bench.verdict(native_ms <= ITER_GOAL_MS)} ({h5py_ms / native_ms:.2f}x the h5py "
              "path" + (f", {rddac_ms / native_ms:.2f}x rddac" if manifest else "") + ")")
    if args.no_export:
        return

    print(f"\n2. force-signals export of the {args.n} experiments, seed transform, default "
          "client, fresh process (export call, seconds)")
    child = bench.Child(sys.executable, env)
    work = Path(tempfile.mkdtemp(prefix="gl-small-"))
    try:
        gl_args = {"data": str(data), "out": str(work / "gl")}
        rd_args = {"data": str(data), "out": str(work / "rddac"),
                   "transform_file": str(bench.TRANSFORM_FILE), "manifest": manifest}
        unforked_env = {**env, "GUIDELOOM_FORK_START_S": "1e9"}  # never forks: in-process
        runs: dict[str, list[dict]] = {"guideloom native": [], "guideloom not forked": [],
                                       "guideloom h5py path": [], "rddac 2.0": []}
        for rep in range(args.reps + 1):  # run 0 warms bytecode and the page cache
            for label, name, a, python, case_env in (
                    ("guideloom native", "gl-export", gl_args, None, env),
                    ("guideloom not forked", "gl-export", gl_args, None, unforked_env),
                    ("guideloom h5py path", "gl-export", gl_args, None, h5py_env),
                    ("rddac 2.0", "rddac-export", rd_args, rddac_python, env)):
                if name == "rddac-export" and not manifest:
                    continue
                shutil.rmtree(a["out"], ignore_errors=True)
                result, _wall = child.run(name, a, python=python, env=case_env)
                if rep:
                    runs[label].append(result)
        for label, rs in runs.items():
            if rs:
                placed = rs[0].get("placement", {}).get("mode", "")
                print(f"  {label:22s} {bench.stats([r['export_s'] for r in rs]):>24s} s"
                      + (f"  (placement {placed})" if placed else ""))
        print(f"    command: {bench.short(child.command('gl-export', gl_args))}")
        if manifest:
            rd_cmd = child.command("rddac-export", rd_args, rddac_python)
            print(f"    command: {bench.short(rd_cmd)}")
            ratio = [r["export_s"] / g["export_s"]
                     for g, r in zip(runs["guideloom native"], runs["rddac 2.0"], strict=True)]
            print(f"  goal: >= {EXPORT_GOAL}x rddac 2.0: {bench.stats(ratio, fmt='{:.2f}')}x, "
                  f"{bench.verdict(statistics.median(ratio) >= EXPORT_GOAL)}")
            unforked = [r["export_s"] / g["export_s"] for g, r in
                        zip(runs["guideloom not forked"], runs["rddac 2.0"], strict=True)]
            print("  (not forked, GUIDELOOM_FORK_START_S=1e9: "
                  f"{bench.stats(unforked, fmt='{:.2f}')}x rddac; load average when done: "
                  f"{os.getloadavg()[0]:.1f})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
