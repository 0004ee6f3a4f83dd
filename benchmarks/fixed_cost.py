"""The fixed cost of an export (issue 42, item 1): where a small export's wall time goes.

Run: ``python3 benchmarks/fixed_cost.py [--quick] [--reps N] [--cache DIR] [--rddac-python PY]
[--no-rddac] [--small-2000]``

1. The steps of one export, on a warm client: force-signals with the seed's transform on 4 and
   on 24 small experiments (scans 100 x 160) and on 24 real-size ones (scans 2000 x 3200),
   in-process (``client="sync"``) and on a given ``distributed.LocalCluster`` (2 workers, one
   thread each) whose ``Client`` is reused across runs. Each case runs in a process of its
   own: two exports warm it up, then ``--reps`` exports to fresh targets are timed. Printed per
   step (:mod:`guideloom.export.clock`: resolve, lock, select, plan, staging, schedule,
   records, finalize-rows, provenance, checksums, croissant, fsync, manifest, publish) as the
   median milliseconds and its share of the median wall time; then the fixed part (every step
   but the records) and the records per experiment.
2. Side by side with rddac 2.0 (its serial ``rddac.streaming.export_to_numpy``, run with the
   rddac venv's interpreter): force-signals on the 24 real-size experiments with the given
   LocalCluster (the median of the warm runs above) and cold (a fresh process, the default
   client: ``benchmarks/export.py``'s ``gl-export`` child), and, with ``--small-2000``, on
   2,000 small experiments. Each rddac run is a fresh process too (the export call timed inside
   it, as ours). The ratios are rddac's median over ours.

Every run starts after ``os.sync()``. The machine may be shared: the load average is printed
before and after; compare the ratios measured in the same run.
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
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import export as export_bench  # noqa: E402 - this folder's export benchmark: data and children
import venvs  # noqa: E402

REPO = HERE.parent
SCRIPT = Path(__file__).resolve()
DEFAULT_CACHE = Path.home() / ".cache" / "guideloom-bench"
RESULT = "RESULT "
FIXED_GOAL_MS = 100.0
STEPS = ("resolve", "lock", "select", "plan", "staging", "schedule", "records",
         "finalize-rows", "provenance", "checksums", "croissant", "fsync", "manifest", "publish")


# --- the child: one case, warm, in a process of its own ------------------------------------------
def child_steps(a: dict) -> dict:
    """``reps`` exports of one case after two warm-ups; each one's steps and wall time."""
    from guideloom.export import export

    ds = export_bench._gl_dataset(a["data"])
    transform = export_bench._load_transform()
    client: Any = "sync"
    cluster = None
    if a["client"] == "localcluster":
        from distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                               dashboard_address=":0")
        client = Client(cluster)
        client.wait_for_workers(2)
    out = Path(a["out"])
    runs = []
    try:
        for k in range(a["reps"] + 2):
            target = out / f"e{k}"
            export_bench._sync()
            t0, c0 = time.perf_counter(), time.process_time()
            result = export(export_bench.VIEW, target, kind="npy", dataset=ds,
                            sim_ids=a.get("ids"), record_transform=transform, client=client,
                            quiet=True)
            wall, cpu = time.perf_counter() - t0, time.process_time() - c0
            shutil.rmtree(target)
            if k >= 2:
                runs.append({"wall_s": wall, "cpu_s": cpu, "steps": result.steps,
                             "count": result.manifest["count"],
                             "mode": result.manifest["placement"]["mode"]})
    finally:
        if cluster is not None:
            client.close()
            cluster.close()
    return {"runs": runs}


CHILDREN = {"steps": child_steps}


# --- the parent ----------------------------------------------------------------------------------
def run_child(name: str, args: dict, env: dict[str, str]) -> dict:
    cmd = [sys.executable, str(SCRIPT), "--child", name, json.dumps(args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    lines = [x for x in proc.stdout.splitlines() if x.startswith(RESULT)]
    if proc.returncode != 0 or not lines:
        tail = "\n".join((proc.stderr or proc.stdout).splitlines()[-15:])
        raise RuntimeError(f"child {name} failed (exit {proc.returncode}):\n{tail}")
    result: dict = json.loads(lines[-1][len(RESULT):])
    return result


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def print_steps(label: str, runs: list[dict]) -> dict[str, float]:
    """The step table of one case; returns its medians (ms) and figures."""
    wall = median([r["wall_s"] for r in runs]) * 1e3
    n = runs[0]["count"]
    print(f"\n  {label}: {len(runs)} runs, {n} experiments, placement {runs[0]['mode']}, "
          f"wall {wall:.1f} ms median [{min(r['wall_s'] for r in runs) * 1e3:.1f}-"
          f"{max(r['wall_s'] for r in runs) * 1e3:.1f}]")
    print(f"    {'step':16s} {'ms':>9s} {'share':>7s}")
    found = [s for s in STEPS if any(s in r["steps"] for r in runs)]
    found += sorted({s for r in runs for s in r["steps"]} - set(found))
    meds = {}
    for step in found:
        meds[step] = median([r["steps"].get(step, 0.0) for r in runs]) * 1e3
        print(f"    {step:16s} {meds[step]:9.2f} {meds[step] / wall:7.1%}")
    fixed = [sum(v for k, v in r["steps"].items() if k != "records") * 1e3 for r in runs]
    records = [r["steps"].get("records", 0.0) * 1e3 for r in runs]
    unclocked = [r["wall_s"] * 1e3 - sum(r["steps"].values()) * 1e3 for r in runs]
    print(f"    {'fixed (all but records)':26s} {median(fixed):9.2f} ms  "
          f"[{min(fixed):.1f}-{max(fixed):.1f}]  goal <= {FIXED_GOAL_MS:.0f} ms: "
          f"{'met' if median(fixed) <= FIXED_GOAL_MS else 'NOT met'}")
    print(f"    {'records':26s} {median(records):9.2f} ms  ({median(records) / n:.2f} ms "
          "per experiment)")
    print(f"    {'outside the steps':26s} {median(unclocked):9.2f} ms  (the call's wall less "
          "the steps' sum)")
    cpu = [r.get("cpu_s", 0.0) * 1e3 for r in runs]
    print(f"    {'driver CPU':26s} {median(cpu):9.2f} ms  (this process's CPU time in the call, "
          "all its threads: less sensitive to the machine's load than the wall time)")
    return {"wall_ms": wall, "fixed_ms": median(fixed), "records_ms": median(records), "n": n}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="3 repetitions, no real-size case")
    parser.add_argument("--reps", type=int, default=None, help="timed exports per case (7)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--rddac-python", default=None)
    parser.add_argument("--no-rddac", action="store_true", help="skip the side by side")
    parser.add_argument("--small-2000", action="store_true",
                        help="also 2,000 small experiments beside rddac")
    parser.add_argument("--child", nargs=2, metavar=("NAME", "ARGS_JSON"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        result = CHILDREN[args.child[0]](json.loads(args.child[1]))
        print(RESULT + json.dumps(result))
        return
    reps = args.reps or (3 if args.quick else 7)
    cache = args.cache.expanduser().resolve()
    cache.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: compiled bytecode, in the cache
    env["PYTHONPYCACHEPREFIX"] = str(cache / "pycache")
    sys.path.insert(0, str(REPO))
    import guideloom
    from guideloom.demo import cached_demo_data

    print(f"guideloom {guideloom.__version__} from {Path(guideloom.__file__).parent}; python "
          f"{sys.version.split()[0]}; {os.cpu_count()} cores; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} at start")
    print(f"command: {export_bench.short([Path(sys.executable).name, *sys.argv])}")
    small = cached_demo_data(cache, 24, export_bench.SMALL_SCAN, "zip")
    big = None if args.quick else cached_demo_data(cache, 24, export_bench.REAL_SCAN, "zip")
    work = Path(tempfile.mkdtemp(prefix="fixed-cost-", dir=cache))
    try:
        print(f"\n1. STEPS of one export on a warm client (median of {reps} after 2 warm-ups; "
              "ms and share of the wall time)")
        cases = [("force-signals, 4 small", small, [0, 1, 2, 3]),
                 ("force-signals, 24 small", small, None)]
        if big is not None:
            cases.append(("force-signals, 24 real-size", big, None))
        figures: dict[tuple[str, str], dict] = {}
        for label, data, ids in cases:
            for client in ("sync", "localcluster"):
                a = {"data": str(data), "ids": ids, "client": client, "reps": reps,
                     "out": str(work / "steps")}
                res = run_child("steps", a, env)
                name = "in-process (client='sync')" if client == "sync" else \
                    "given LocalCluster(2 workers)"
                figures[(label, client)] = print_steps(f"{label}, {name}", res["runs"])
        command = [sys.executable, str(SCRIPT), "--child", "steps", json.dumps(a)]
        print(f"  command (the last case): {export_bench.short(command)}")
        if not args.no_rddac and big is not None:
            side_by_side(args, reps, big, work, cache, env, figures, "24 real-size")
        if not args.no_rddac and args.small_2000:
            small2000 = cached_demo_data(cache, 2000, export_bench.SMALL_SCAN, "zip")
            a = {"data": str(small2000), "ids": None, "client": "localcluster",
                 "reps": max(3, reps // 2), "out": str(work / "steps")}
            res = run_child("steps", a, env)
            figures[("force-signals, 2000 small", "localcluster")] = print_steps(
                "force-signals, 2000 small, given LocalCluster(2 workers)", res["runs"])
            side_by_side(args, max(3, reps // 2), small2000, work, cache, env, figures,
                         "2000 small")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nload average {' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end")


def side_by_side(args: argparse.Namespace, reps: int, data: Path, work: Path, cache: Path,
                 env: dict[str, str], figures: dict[tuple[str, str], dict], label: str) -> None:
    """rddac 2.0's serial export against ours, warm on the given LocalCluster and cold."""
    python = venvs.rddac_python(args.rddac_python)
    print(f"\n2. FORCE-SIGNALS, {label}, beside rddac 2.0 ({reps} fresh processes each, "
          "median [min-max] ms of the export call)")
    if python is None:
        print("  rddac not run: no interpreter with rddac 2.0.0 (pass --rddac-python)")
        return
    child = export_bench.Child(sys.executable, env)
    cold_args = {"data": str(data), "out": str(work / "cold")}
    rd_args = {"data": str(data), "out": str(work / "rddac"),
               "transform_file": str(export_bench.TRANSFORM_FILE),
               "manifest": str(export_bench.rddac_manifest(data, cache))}
    cold, rd = [], []
    for rep in range(reps + 1):
        for folder in (cold_args["out"], rd_args["out"]):
            shutil.rmtree(folder, ignore_errors=True)
        export_bench._sync()
        c, _ = child.run("gl-export", cold_args)
        export_bench._sync()
        r, _ = child.run("rddac-export", rd_args, python=python, env=venvs.anchor_env())
        if rep:  # the first of each warms the page cache
            cold.append(c["export_s"] * 1e3)
            rd.append(r["export_s"] * 1e3)
    for folder in (cold_args["out"], rd_args["out"]):
        shutil.rmtree(folder, ignore_errors=True)
    warm = figures.get((f"force-signals, {label}", "localcluster"))
    rows = [("rddac 2.0 (serial)", rd)]
    if warm is not None:
        rows.append(("guideloom, given LocalCluster, warm", [warm["wall_ms"]]))
    rows.append(("guideloom, default client, fresh process", cold))
    for name, vals in rows:
        print(f"  {name:44s} {export_bench.stats(vals, fmt='{:.1f}'):>28s}")
    base = median(rd)
    if warm is not None:
        print(f"  speed-up rddac/guideloom, given LocalCluster (warm): "
              f"{base / warm['wall_ms']:.2f}x")
    print(f"  speed-up rddac/guideloom, cold (fresh process, default client): "
          f"{base / median(cold):.2f}x [{min(rd) / max(cold):.2f}-{max(rd) / min(cold):.2f}]")
    print(f"  command: {export_bench.short(child.command('gl-export', cold_args))}")
    print(f"  command: {export_bench.short(child.command('rddac-export', rd_args, python))}")


if __name__ == "__main__":
    main()
