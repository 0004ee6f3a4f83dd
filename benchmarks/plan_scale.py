"""Scale on paper: planning an export and an update of the full release, metadata only.

Run: ``python3 benchmarks/plan_scale.py [--n 9000] [--cache DIR] [--reference PATH]``

A synthetic release of ``--n`` experiments (default 9,000, the published release's size) is
built once under ``--cache``: its manifest is the published one
(``../shared/reference/rddac-metadata.json``, read at run time, never copied into the
repository) with the file objects pointed at local files; its index table has the manifest's
columns and one made-up row per experiment; its experiments are members ``NNNN.h5`` of
``concave.zip``, ``convex.zip`` and ``sample.zip`` (stored), each a real HDF5 file of the
release's layout holding metadata only: the scans (``pointcloud/op10/z`` ..., 6,400,000
float32 each, gzip-chunked) are declared with no chunk written, the small tables (force,
sheet and oil thickness) are zeros. A second release (v2) drops 30 experiments, adds 45,
changes the HDF5 file of 90 and the index row of 60. The previous generation an update starts
from is a real ``sheet-thickness`` npy export of v1 (made once, not timed).

Then, in a fresh interpreter each (the "driver"), timed and with its peak RSS
(``ru_maxrss``; the goals of issue 42: <= 5 s and <= 500 MB):

1. the plan of an export of ``pointcloud-op10`` of v1: load the manifest and index, select,
   locate every member, estimate, partition, digest, identity (``plan_export``; no record is
   decoded: the estimate reads the first experiment's HDF5 metadata);
2. the plan of an update of the ``sheet-thickness`` export to v2: the previous generation
   opened (``open_previous``: ``export.json``, ``provenance.json``, ``sim_ids``), the new
   selection digested and compared (``plan_export(previous=...)``), and ``preview_update``
   (the bytes it would read and carry).

Each prints its phases with time and share (and its cProfile with ``--profile``). For
the export plan the task graph a 64-worker cluster would run is counted from the plan (one
``export-part`` task per partition, keyed as ``run_partitions`` keys them, plus the schema
probe), with the bytes each task's arguments pickle to; the scheduler's load is then measured,
not guessed: the same number of tasks, each carrying its real partition, run through a real
``distributed`` scheduler with 64 in-process single-thread workers (a no-op body: no data), and
the CPU seconds of the scheduler's event-loop thread per task (an upper bound: the in-process
workers' messages run on that thread too) times the rate at which 64 workers would finish
tasks of the planned length give the share of one core the scheduler needs.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
REFERENCE = REPO.parent / "shared" / "reference" / "rddac-metadata.json"
CACHE = Path(tempfile.gettempdir()) / "guideloom-bench" / "plan-scale"
GOAL_S, GOAL_MB = 5.0, 500.0
WORKERS = 64
SCAN = 2000 * 3200  # values of one scan field
REMOVED, ADDED, CHANGED_DATA, CHANGED_ROW = 30, 45, 90, 60


# --- the synthetic release --------------------------------------------------------------------
def h5_member(revision: int, oil: bool, pointcloud: bool) -> bytes:
    """One experiment's HDF5 file: the release's layout, metadata only (see the docstring)."""
    import h5py

    buffer = io.BytesIO()
    with h5py.File(buffer, "w", track_order=False) as f:
        f.attrs["revision"] = revision
        f.create_dataset("force/data", data=np.zeros((1140, 8), np.float32), chunks=(1140, 8),
                         compression="gzip")
        f["force"].attrs["columns"] = ["time", "load_cell_1", "load_cell_2", "load_cell_3",
                                       "load_cell_4", "punch_temp", "punch_pos", "total_force"]
        f.create_dataset("sheet_thickness/data", data=np.zeros((208, 2), np.float32),
                         chunks=(208, 2), compression="gzip")
        if oil:
            f.create_dataset("oil_thickness/data", data=np.zeros((421, 2), np.float32),
                             chunks=(421, 2), compression="gzip")
        if pointcloud:
            for op in ("op10", "op20"):
                group = f.create_group(f"pointcloud/{op}")
                group.attrs["x_shape"], group.attrs["y_shape"] = 2000, 3200
                for name in ("z", "luminescence"):  # declared, no chunk written
                    group.create_dataset(name, shape=(SCAN,), dtype=np.float32,
                                         chunks=(SCAN // 16,), compression="gzip")
    return buffer.getvalue()


def release_rows(n: int, version: int) -> list[dict[str, Any]]:
    """The index rows of release ``version`` (1 or 2: see the docstring)."""
    ids = list(range(n))
    if version == 2:
        ids = [i for i in ids if i % (n // REMOVED) != 7][:n - REMOVED] + list(range(n, n + ADDED))
    rows = []
    for i in ids:
        temp = 20 + (i * 37 % 4000) / 100  # of the id alone: the same in both releases
        if version == 2 and i % (n // CHANGED_ROW) == 3:
            temp += 1.0
        rows.append({"index": i, "experiment_id": 100000 + i, "category": i % 4,
                     "geometry": "concave" if i < n // 2 else "convex",
                     "blankholder_force": 100 + 10 * (i % 30), "mean_punch_temp": temp,
                     "oil_type": "none" if i % 3 == 0 else f"oil{i % 5}",
                     "has_pointcloud": i % 10 != 9, "has_oil": i % 3 != 0,
                     "split": "test" if i % 10 == 1 else "train"})
    return rows


def build_release(folder: Path, reference: Path, n: int, version: int) -> Path:
    """Write release ``version`` into ``folder`` (once; a stamp says it is whole)."""
    stamp = folder / ".complete"
    if stamp.is_file():
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    rows = release_rows(n, version)
    with open(folder / "process_parameters.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    templates: dict[tuple[int, bool, bool], bytes] = {}
    archives = {"concave.zip": [], "convex.zip": [], "sample.zip": []}
    for row in rows:
        i = row["index"]
        name = "sample.zip" if i % 500 == 499 else f"{row['geometry']}.zip"
        archives[name].append(row)
    for name, members in archives.items():
        with zipfile.ZipFile(folder / name, "w", zipfile.ZIP_STORED) as zf:
            for row in members:
                i = row["index"]
                revision = 2 if version == 2 and i % (n // CHANGED_DATA) == 5 else 1
                key = (revision, bool(row["has_oil"]), bool(row["has_pointcloud"]))
                if key not in templates:
                    templates[key] = h5_member(*key)
                zf.writestr(f"{i:04d}.h5", templates[key])
    doc = json.loads(reference.read_text())
    for item in doc["distribution"]:
        if item.get("@type") == "cr:FileObject":
            path = folder / item["name"]
            item["contentUrl"] = item["name"]
            item["md5"] = hashlib.md5(path.read_bytes()).hexdigest()
            item["contentSize"] = f"{path.stat().st_size} B"
    (folder / "metadata.json").write_text(json.dumps(doc, indent=1))
    stamp.write_text("")
    return folder


def previous_generation(cache: Path, v1: Path) -> Path:
    """A real sheet-thickness npy export of v1 (made once, not timed)."""
    target = cache / "sheet-thickness-v1"
    if (target / "export.json").is_file():
        return target
    import guideloom

    t0 = time.perf_counter()
    guideloom.export_to_numpy("sheet-thickness", target, data_dir=v1, client="sync",
                              overwrite=True)
    print(f"(made the previous generation {target} in {time.perf_counter() - t0:.0f} s)")
    return target


# --- the driver (a fresh interpreter per plan) -----------------------------------------------
def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def child_plan(args: dict[str, Any]) -> dict[str, Any]:
    """Plan in this (fresh) interpreter; phases with seconds, the peak RSS (and, with
    ``args["profile"]``, the functions taking the most time, by cProfile)."""
    if not args.get("profile"):
        return plan_here(args)
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    result = profiler.runcall(plan_here, args)
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(14)
    result["profile"] = text.getvalue()
    return result


def plan_here(args: dict[str, Any]) -> dict[str, Any]:
    """The plan of ``args["kind"]`` (export or update), phase by phase."""
    phases: list[tuple[str, float]] = []
    t_start = time.perf_counter()

    def phase(name: str, t0: float) -> float:
        now = time.perf_counter()
        phases.append((name, now - t0))
        return now

    t = time.perf_counter()
    import guideloom
    from guideloom.export.api import build_spec
    from guideloom.export.plan import (
        estimate_seconds,
        kept_partition_size,
        plan_export,
        select_experiments,
    )
    from guideloom.formats import get_format
    t = phase("imports", t)
    rss_imports = rss_mb()
    started = time.perf_counter()
    ds = guideloom.load(data_dir=args["data"])
    t = phase("manifest (load)", t)
    result: dict[str, Any] = {}
    if args["kind"] == "export":
        spec = build_spec(args["view"], "npy", args["target"], dataset=ds)
        t = phase("job description (build_spec)", t)
        selection = select_experiments(spec)
        t = phase("index, select, locate members", t)
        estimate = estimate_seconds(spec, selection)
        t = phase("estimate (first member's metadata)", t)
        plan = plan_export(spec, selection=selection, estimate_s=estimate)
        t = phase("partitions, digests, identity", t)
        result.update(graph_of(spec, plan, estimate))
        t = phase("task graph (pickled per task)", t)
    else:
        from guideloom.export.update import open_previous, preview_update

        spec = build_spec(args["view"], "npy", args["target"], dataset=ds, update=True)
        t = phase("job description (build_spec)", t)
        previous = open_previous(spec)
        assert previous is not None
        spec = kept_partition_size(spec, get_format(spec.output), previous)
        t = phase("previous generation (open_previous)", t)
        selection = select_experiments(spec)
        t = phase("index, select, locate members", t)
        plan = plan_export(spec, selection=selection, previous=previous)
        t = phase("estimate, partitions, digests, compare", t)
        preview = preview_update(previous, plan)
        t = phase("preview (bytes read and carried)", t)
        result["line"] = preview.line()
        result["partitions"] = len(plan.partitions)
    result.update(experiments=len(selection.locations), phases=phases,
                  driver_s=time.perf_counter() - started, total_s=time.perf_counter() - t_start,
                  rss_imports_mb=rss_imports, rss_peak_mb=rss_mb())
    return result


def graph_of(spec: Any, plan: Any, estimate_s: float) -> dict[str, Any]:
    """The export's tasks as ``run_partitions`` would submit them: keys and pickled sizes."""
    import cloudpickle

    from guideloom.cluster.runtime import task_key
    from guideloom.export.run import JOB_TOKEN_CHARS, TASK_STAGE

    token = plan.identity[:JOB_TOKEN_CHARS]
    keys = {task_key(TASK_STAGE, spec.view.name, token, p.index) for p in plan.partitions}
    sizes = [len(cloudpickle.dumps(p)) for p in plan.partitions]
    return {"tasks": len(keys) + 1, "partitions": len(plan.partitions),
            "partition_size": plan.partition_size, "task_s": estimate_s / len(plan.partitions),
            "estimate_s": estimate_s, "arg_bytes_mean": float(np.mean(sizes)),
            "arg_bytes_total": int(np.sum(sizes)), "job_bytes": len(cloudpickle.dumps(spec)),
            "example_key": str(sorted(keys)[0])}


def child_scheduler(args: dict[str, Any]) -> dict[str, Any]:
    """Run ``args["tasks"]`` no-op tasks, each with a real partition of the plan, through a
    real scheduler with 64 in-process workers; the scheduler loop's CPU seconds per task."""
    import logging

    from distributed import Client, LocalCluster, wait

    import guideloom
    from guideloom.export.api import build_spec
    from guideloom.export.plan import plan_export

    logging.getLogger("distributed").setLevel(logging.ERROR)
    ds = guideloom.load(data_dir=args["data"])
    plan = plan_export(build_spec(args["view"], "npy", args["target"], dataset=ds),
                       estimate_s=args["estimate_s"])
    with LocalCluster(n_workers=WORKERS, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        def loop_cpu() -> float:
            return time.thread_time()

        def body(part: Any) -> int:
            return len(part.locations)

        client.submit(body, plan.partitions[0], pure=False).result()  # warm
        cpu0, t0 = client.run_on_scheduler(loop_cpu), time.perf_counter()
        futures = [client.submit(body, p, key=f"export-part-{p.index}", pure=False)
                   for p in plan.partitions]
        wait(futures)
        wall, cpu = time.perf_counter() - t0, client.run_on_scheduler(loop_cpu) - cpu0
        done = sum(f.result() for f in futures)
    assert done == len(plan.selection.locations)
    return {"wall_s": wall, "loop_cpu_s": cpu, "tasks": len(futures)}


def run_child(kind: str, args: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", kind,
                           json.dumps(args)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    if done.returncode:
        raise RuntimeError(f"{kind} child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def show(title: str, r: dict[str, Any]) -> list[tuple[str, float, bool]]:
    print(f"\n{title}: {r['experiments']} experiments")
    timed = [(n, s) for n, s in r["phases"] if n != "imports"]
    for name, seconds in r["phases"]:
        share = "" if name == "imports" else f"{seconds / r['driver_s']:6.1%}"
        print(f"  {name:42s} {seconds * 1e3:9.1f} ms {share}")
    slowest = max(timed, key=lambda p: p[1])
    if r.get("profile"):
        print("\n".join(f"    {line}" for line in r["profile"].splitlines() if line.strip()))
    print(f"  driver time (without imports) {r['driver_s']:.2f} s (slowest: {slowest[0]}); "
          f"peak RSS {r['rss_peak_mb']:.0f} MB ({r['rss_imports_mb']:.0f} MB after imports)")
    return [(f"{title}: driver time <= {GOAL_S:g} s", r["driver_s"], r["driver_s"] <= GOAL_S),
            (f"{title}: peak RSS <= {GOAL_MB:g} MB", r["rss_peak_mb"],
             r["rss_peak_mb"] <= GOAL_MB)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=9000)
    parser.add_argument("--cache", type=Path, default=CACHE)
    parser.add_argument("--reference", type=Path, default=REFERENCE)
    parser.add_argument("--no-scheduler", action="store_true",
                        help="leave out the simulation on a real scheduler")
    parser.add_argument("--profile", action="store_true",
                        help="also print the plans' cProfile (by own time)")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, payload = args.child
        fn = child_scheduler if kind == "scheduler" else child_plan
        print(json.dumps(fn(json.loads(payload))))
        return
    if not args.reference.is_file():
        raise SystemExit(f"{args.reference} not found: the published manifest (--reference)")
    cache = args.cache / f"n{args.n}"
    t0 = time.perf_counter()
    v1 = build_release(cache / "release-v1", args.reference, args.n, 1)
    v2 = build_release(cache / "release-v2", args.reference, args.n, 2)
    previous = previous_generation(cache, v1)
    built = time.perf_counter() - t0
    zips = sum(p.stat().st_size for p in v1.glob("*.zip"))
    print(f"plan at release scale: releases under {cache} ({zips / 1e6:.0f} MB of zipped "
          f"metadata-only HDF5 in v1; ready in {built:.0f} s); "
          "load average {:.1f} {:.1f} {:.1f} on {} CPUs".format(*os.getloadavg(), os.cpu_count()))
    scratch = cache / "targets"
    scratch.mkdir(exist_ok=True)
    export = run_child("plan", {"kind": "export", "data": str(v1), "view": "pointcloud-op10",
                                "target": str(scratch / "op10"), "profile": args.profile})
    goals = show("1. plan of an export of pointcloud-op10", export)
    print(f"  task graph: {export['tasks']} tasks ({export['partitions']} export-part tasks of "
          f"up to {export['partition_size']} experiments, keys like {export['example_key']}, "
          "and the schema probe)")
    print(f"  each task's partition pickles to {export['arg_bytes_mean']:.0f} B on average "
          f"({export['arg_bytes_total'] / 1e6:.2f} MB in all); the job once: "
          f"{export['job_bytes'] / 1e3:.0f} kB; estimated {export['estimate_s']:.0f} s of "
          f"in-process work, {export['task_s']:.2f} s per task")
    update = run_child("plan", {"kind": "update", "data": str(v2), "view": "sheet-thickness",
                                "target": str(previous), "profile": args.profile})
    goals += show("2. plan of an update of the sheet-thickness export to v2", update)
    print(f"  {update['line']}")
    if not args.no_scheduler:
        sim = run_child("scheduler", {"data": str(v1), "view": "pointcloud-op10",
                                      "target": str(scratch / "op10"),
                                      "estimate_s": export["estimate_s"]})
        per_task = sim["loop_cpu_s"] / sim["tasks"]
        rate = WORKERS / export["task_s"]  # tasks finished per second by 64 busy workers
        load = rate * per_task
        print(f"\n3. scheduler load on {WORKERS} workers: {sim['tasks']} tasks with their real "
              f"partitions through a real scheduler and {WORKERS} in-process workers took "
              f"{sim['wall_s']:.2f} s, {per_task * 1e3:.2f} ms of the scheduler loop's CPU per "
              f"task (an upper bound); {WORKERS} workers finish {rate:.1f} tasks/s at "
              f"{export['task_s']:.2f} s each: the scheduler is busy {load:.1%} of one core")
    print()
    for goal, value, ok in goals:
        print(f"goal: {goal}: {value:.2f} -> {'met' if ok else 'NOT met'}")


if __name__ == "__main__":
    main()
