"""The seed workflows' exports in every placement, side by side, beside rddac 2.0, optionally A/B
against another source tree.

Run: ``python3 benchmarks/placements.py [--reps N] [--inner N] [--pc-n N] [--cache DIR]
[--rddac-python PY] [--tree DIR] [--views force-signals,pointcloud-op10]
[--placements sync,fork,cluster]``

One run prints, on the same data (``guideloom.demo.cached_demo_data``: 24 experiments with
real-size scans 2000 x 3200, zip layout, generated once under ``--cache``):

* the seed workflows ``workflows/force_signals.toml`` (the force tables resampled by the seed's
  ``resample_and_emit``, to npy; all 24 experiments) and ``workflows/pointcloud_op10.toml``
  (the OP10 scans with ``zero_to_nan``, to zarr with lz4; the first ``--pc-n`` experiments
  with scans), each run with ``client="sync"`` (in-process), ``client="fork"`` (forked
  processes) and a given ``distributed.LocalCluster`` (2 worker processes of 1 thread, made by
  the child as a user's script does, before and outside the timed part);
* rddac 2.0's serial ``rddac.streaming.export_to_numpy`` of the same views on the same data
  (``benchmarks/export.py``'s children ``rddac-export`` and ``rddac-pc``, run with
  ``--rddac-python``; rddac writes npy, it has no zarr or transform for op10);
* per placement: the first export of a fresh process (on the cluster: of fresh workers, which
  import guideloom for their first task), the median of the ``--inner`` exports after it
  ("warm": a notebook's second export), the placement the export recorded, and the peak RSS
  of the driver and of its worker processes (``ru_maxrss``; forked children: the largest one);
* the ratios: rddac's median over each warm median (how many times faster than rddac), and
  with ``--tree`` the other tree's warm median over this one's.

``--tree DIR`` runs every guideloom child twice per repetition, once with this checkout and once
with ``PYTHONPATH=DIR`` (e.g. a worktree of main before a refactor), alternating which goes first,
so that both see the same machine. Every child is this file run as ``--child NAME ARGS_JSON`` in a
fresh interpreter; it prints one ``RESULT {json}`` line and the tree its guideloom came from. The
top level imports only the standard library. Children use compiled bytecode (under ``--cache``),
as an installed package does. The machine may be shared: the load average is printed with the
figures; compare the ratios of one run.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve()
REPO = SCRIPT.parents[1]
DEFAULT_CACHE = Path.home() / ".cache" / "guideloom-bench"
REAL_SCAN = (2000, 3200)
N_EXPERIMENTS = 24
FORCE, OP10 = "force-signals", "pointcloud-op10"
WORKFLOWS = {FORCE: "force_signals.toml", OP10: "pointcloud_op10.toml"}
PLACEMENTS = ("sync", "fork", "cluster")
CLUSTER_WORKERS = 2
RESULT = "RESULT "
CHILD_TIMEOUT_S = 900
GOAL_CLUSTER_S, GOAL_VS_RDDAC = 0.15, 5.0  # issue 29, item 4: force-signals on a LocalCluster


def _export_module() -> Any:
    """``benchmarks/export.py`` (its rddac children and helpers), loaded by path."""
    spec = importlib.util.spec_from_file_location("bench_export", SCRIPT.parent / "export.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_export"] = module
    spec.loader.exec_module(module)
    return module


# --- the guideloom child (a fresh interpreter, guideloom from PYTHONPATH) -------------------------
def _peak_mb(who: int = resource.RUSAGE_SELF) -> float:
    return resource.getrusage(who).ru_maxrss / 1024  # KiB on Linux


def _worker_peak_mb() -> float:
    import resource as res

    return res.getrusage(res.RUSAGE_SELF).ru_maxrss / 1024


def child_placement(a: dict) -> dict:
    """One seed workflow run ``1 + inner`` times in one placement; seconds of each export call."""
    import guideloom
    from guideloom.export import run_export
    from guideloom.workflow import load_workflow

    out = Path(a["out"])
    cluster = client = None
    if a["placement"] == "cluster":  # the user's own LocalCluster, outside the timed part
        from distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=CLUSTER_WORKERS, threads_per_worker=1, processes=True,
                               host="127.0.0.1", dashboard_address="127.0.0.1:0",
                               silence_logs=40)
        client = Client(cluster)
        client.wait_for_workers(CLUSTER_WORKERS, timeout=120)
    target: Any = client if client is not None else a["placement"]
    times, modes = [], []
    try:
        for k in range(1 + a["inner"]):
            wf = load_workflow(a["workflow"], data_dir=a["data"], output=str(out / f"e{k}"))
            if a.get("ids") is not None:
                wf.sim_ids = tuple(a["ids"])
            spec = wf.to_spec(overwrite=True)
            if hasattr(os, "sync"):
                os.sync()  # no export pays for the previous one's writeback
            t0 = time.perf_counter()
            result = run_export(spec, client=target)
            times.append(time.perf_counter() - t0)
            modes.append(str(result.manifest.get("placement", {}).get("mode")))
            count = result.manifest.get("count")
            shutil.rmtree(out / f"e{k}", ignore_errors=True)
        workers_mb = (max(client.run(_worker_peak_mb).values()) if client is not None
                      else _peak_mb(resource.RUSAGE_CHILDREN) if a["placement"] == "fork"
                      else None)
    finally:
        if client is not None:
            client.close()
            cluster.close()
    return {"first_s": times[0], "warm_s": times[1:], "modes": modes, "count": count,
            "driver_mb": _peak_mb(), "workers_mb": workers_mb,
            "guideloom": str(Path(guideloom.__file__).resolve().parents[1])}


def child_data(a: dict) -> dict:
    """The demo data (made once) and the ids: all, and those with scans."""
    import csv

    from guideloom.demo import cached_demo_data

    data = cached_demo_data(a["cache"], N_EXPERIMENTS, REAL_SCAN, "zip")
    with open(data / "process_parameters.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return {"data": str(data), "ids": [int(r["index"]) for r in rows],
            "pc_ids": [int(r["index"]) for r in rows if r["has_pointcloud"].lower() == "true"]}


CHILDREN = {"placement": child_placement, "data": child_data}


# --- the parent -----------------------------------------------------------------------------------
def run_child(python: str, script: Path, name: str, args: dict, env: dict[str, str]) -> dict:
    """Run ``script --child name args`` and return its result (raises with its stderr)."""
    cmd = [python, str(script), "--child", name, json.dumps(args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=CHILD_TIMEOUT_S)
    lines = [x for x in proc.stdout.splitlines() if x.startswith(RESULT)]
    if proc.returncode != 0 or not lines:
        tail = "\n".join((proc.stderr or proc.stdout).splitlines()[-20:])
        raise RuntimeError(f"child {name} failed (exit {proc.returncode}): {shlex.join(cmd)}\n"
                           f"{tail}")
    return json.loads(lines[-1][len(RESULT):])


def tree_env(tree: Path, cache: Path) -> dict[str, str]:
    """The children's environment: guideloom from ``tree``, compiled bytecode kept under
    ``cache`` (this environment may set PYTHONDONTWRITEBYTECODE; every fresh worker process
    would then recompile guideloom)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(cache / "pycache")
    return env


def med(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def show(values: list[float]) -> str:
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.3f}"
    return f"{med(values):.3f} [{min(values):.3f}-{max(values):.3f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3, help="fresh children per case and tree")
    parser.add_argument("--inner", type=int, default=3,
                        help="exports after the first in each child (the warm figures)")
    parser.add_argument("--pc-n", type=int, default=6,
                        help="experiments with scans in the op10 export (default 6)")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--rddac-python", default=None,
                        help="a Python with rddac 2.0.0 (default: benchmarks/venvs.py)")
    parser.add_argument("--tree", type=Path, default=None,
                        help="another source tree to compare with (its guideloom on PYTHONPATH)")
    parser.add_argument("--views", default=f"{FORCE},{OP10}")
    parser.add_argument("--placements", default=",".join(PLACEMENTS))
    args = parser.parse_args()
    views = [v for v in args.views.split(",") if v]
    placements = [p for p in args.placements.split(",") if p]
    cache = args.cache.expanduser().resolve()
    cache.mkdir(parents=True, exist_ok=True)
    trees = {"this": REPO}
    if args.tree is not None:
        trees["other"] = args.tree.expanduser().resolve()
    envs = {name: tree_env(tree, cache) for name, tree in trees.items()}
    bench = _export_module()

    print(f"benchmarks/placements.py: python {sys.version.split()[0]} ({sys.executable}); "
          f"{os.cpu_count()} cores; load average {os.getloadavg()[0]:.2f} at start")
    print("command: " + shlex.join([Path(sys.executable).name, *sys.argv]))
    for name, tree in trees.items():
        print(f"tree {name}: {tree} ({_git_head(tree)})")
    info = run_child(sys.executable, SCRIPT, "data", {"cache": str(cache)}, envs["this"])
    data = Path(info["data"])
    pc_ids = info["pc_ids"][:args.pc_n]
    print(f"data: {data} ({len(info['ids'])} experiments, scans {REAL_SCAN[0]}x{REAL_SCAN[1]}); "
          f"op10: {len(pc_ids)} experiments {pc_ids}")
    from venvs import rddac_python

    args.rddac_python = rddac_python(args.rddac_python)
    rddac_problem = bench.rddac_available(args.rddac_python)
    work = Path(tempfile.mkdtemp(prefix="placements-", dir=cache))
    results: dict[tuple[str, str, str], list[dict]] = {}
    rddac: dict[str, list[dict]] = {v: [] for v in views}
    loads: list[float] = []
    try:
        for rep in range(args.reps):
            order = list(trees) if rep % 2 == 0 else list(reversed(trees))
            for view in views:
                for placement in placements:
                    for tree in order:
                        child_args = {"workflow": str(REPO / "workflows" / WORKFLOWS[view]),
                                      "data": str(data), "placement": placement,
                                      "inner": args.inner, "out": str(work / tree),
                                      "ids": pc_ids if view == OP10 else None}
                        loads.append(os.getloadavg()[0])
                        got = run_child(sys.executable, SCRIPT, "placement", child_args,
                                        envs[tree])
                        if Path(got["guideloom"]) != trees[tree]:
                            raise RuntimeError(f"tree {tree}: guideloom came from "
                                               f"{got['guideloom']}, not {trees[tree]}")
                        results.setdefault((view, placement, tree), []).append(got)
                if rddac_problem is None:
                    rddac[view].append(_rddac_run(bench, args, view, data, pc_ids, work, cache))
            print(f"  repetition {rep + 1}/{args.reps} done, load average "
                  f"{os.getloadavg()[0]:.2f}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    report(views, placements, trees, results, rddac, rddac_problem, loads, args)


def _rddac_run(bench: Any, args: argparse.Namespace, view: str, data: Path,
               pc_ids: list[int], work: Path, cache: Path) -> dict:
    out = work / "rddac"
    shutil.rmtree(out, ignore_errors=True)
    manifest = str(bench.rddac_manifest(data, cache))
    if view == FORCE:
        child_args = {"data": str(data), "out": str(out), "manifest": manifest,
                      "transform_file": str(REPO / "workflows" / "demo_transforms.py")}
        got = run_child(args.rddac_python, SCRIPT.parent / "export.py", "rddac-export",
                        child_args, dict(os.environ))
    else:
        child_args = {"data": str(data), "out": str(out), "manifest": manifest, "ids": pc_ids}
        got = run_child(args.rddac_python, SCRIPT.parent / "export.py", "rddac-pc",
                        child_args, dict(os.environ))
    shutil.rmtree(out, ignore_errors=True)
    return got


def report(views: list[str], placements: list[str], trees: dict[str, Path],
           results: dict[tuple[str, str, str], list[dict]], rddac: dict[str, list[dict]],
           rddac_problem: str | None, loads: list[float], args: argparse.Namespace) -> None:
    print(f"\nseconds of the export call, median [min-max] over {args.reps} fresh children "
          f"(first) and {args.reps} x {args.inner} exports after the first (warm); peak RSS "
          f"in MB; load average {min(loads):.1f}-{max(loads):.1f} (median {med(loads):.1f}) "
          "while the children ran")
    for view in views:
        rd = [r["export_s"] for r in rddac[view]]
        print(f"\n{view}" + (f" ({len(rd)} rddac runs: {show(rd)} s, rddac "
                             f"{rddac[view][0]['version']}, serial, npy)" if rd else
                             f" (rddac not run: {rddac_problem})"))
        print(f"  {'placement':10s} {'tree':6s} {'mode':13s} {'first':>22s} {'warm':>22s} "
              f"{'x rddac':>8s} {'vs other':>9s} {'driver MB':>10s} {'workers MB':>11s}")
        for placement in placements:
            for tree in trees:
                runs = results.get((view, placement, tree), [])
                if not runs:
                    continue
                first = [r["first_s"] for r in runs]
                warm = [s for r in runs for s in r["warm_s"]]
                modes = sorted({m for r in runs for m in r["modes"]})
                vs_rddac = f"{med(rd) / med(warm):.1f}x" if rd else "-"
                other = [s for t in trees if t != tree
                         for r in results.get((view, placement, t), []) for s in r["warm_s"]]
                vs_other = f"{med(other) / med(warm):.2f}" if other else "-"
                print(f"  {placement:10s} {tree:6s} {'/'.join(modes):13s} {show(first):>22s} "
                      f"{show(warm):>22s} {vs_rddac:>8s} {vs_other:>9s} "
                      f"{max(r['driver_mb'] for r in runs):10.0f} {_mb(runs):>11s}")
    if FORCE in views and "cluster" in placements:
        runs = results.get((FORCE, "cluster", "this"), [])
        warm = [s for r in runs for s in r["warm_s"]]
        rd = [r["export_s"] for r in rddac[FORCE]]
        if warm:
            ok_s = med(warm) <= GOAL_CLUSTER_S
            verdict = "met" if ok_s else "NOT met"
            line = (f"\ngoal (issue 29, item 4): force-signals on a given LocalCluster "
                    f"<= {GOAL_CLUSTER_S} s: {med(warm):.3f} s warm ({verdict}), first export "
                    f"of fresh workers {med([r['first_s'] for r in runs]):.3f} s")
            if rd:
                ratio = med(rd) / med(warm)
                line += (f"; >= {GOAL_VS_RDDAC:.0f}x rddac: {ratio:.1f}x "
                         f"({'met' if ratio >= GOAL_VS_RDDAC else 'NOT met'})")
            print(line)


def _mb(runs: list[dict]) -> str:
    """The largest worker peak RSS of the runs ("-": the export ran in the driver)."""
    peaks = [r["workers_mb"] for r in runs if r.get("workers_mb") is not None]
    return f"{max(peaks):.0f}" if peaks else "-"


def _git_head(tree: Path) -> str:
    proc = subprocess.run(["git", "-C", str(tree), "log", "-1", "--format=%h %s"],
                          capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(tree), "status", "--porcelain", "-uno"],
                           capture_output=True, text=True).stdout.strip()
    head = proc.stdout.strip()[:70] or "not a git tree"
    return head + (", with uncommitted changes" if dirty else "")


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "--child":
        print(RESULT + json.dumps(CHILDREN[sys.argv[2]](json.loads(sys.argv[3]))), flush=True)
    else:
        main()
