"""Scale: thousands of small experiments on a real ``dask scheduler`` + two ``dask worker``s.

Run: ``python3 benchmarks/scale.py [--quick] [--n N] [--cache DIR] [--rddac-python PY]``

For 1,000 experiments and for ``--n`` (default 9,000, the size of the real release; ``--quick``:
1,000 only) small demo experiments (``guideloom.demo.cached_demo_data``, default scan shape,
zip layout, generated once under ``--cache``), one run prints:

* guideloom's force-signals export with the seed transform (``resample_and_emit``) on a cluster
  of real processes on 127.0.0.1 (``guideloom.cluster.local_procs.start_local_cluster``: one
  ``dask scheduler``, two ``dask worker`` processes of one thread; started fresh for each size and
  stopped by PID), driven from a fresh Python process (the "driver"): export wall time, tasks
  and experiments per second, the driver's peak RSS and the scheduler's peak RSS (psutil, sampled
  every 20 ms by a thread in the driver), each also as growth over the value just before the
  export. The driver's growth per experiment at both sizes shows whether its memory stays flat
  (the graph holds experiment ids, never data).
* the serial anchor: rddac 2.0's ``rddac.streaming.export_to_numpy`` on the same data, view and
  transform, run by ``benchmarks/export.py``'s ``rddac-export`` child in the rddac venv (with the
  same documented manifest adaptation: a copy of the demo manifest with each file's sha256).

Each figure is printed with the command that produced it. Compare ratios measured in one run:
the machine may be shared and noisy.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SCRIPT = Path(__file__).resolve()
sys.path.insert(0, str(HERE))
import export as export_bench  # noqa: E402 - the sibling benchmark (stdlib-only top level)

RESULT = export_bench.RESULT
VIEW = export_bench.VIEW
VIEW_FIELDS = export_bench.VIEW_FIELDS
SAMPLE_S = 0.02
CHILD_TIMEOUT_S = 1800


# --- the driver (a fresh interpreter per size) ---------------------------------------------------
def child_driver(a: dict) -> dict:
    """Export on the running cluster at ``a["address"]``, sampling driver and scheduler RSS."""
    import threading

    import psutil

    me, sched = psutil.Process(), psutil.Process(a["scheduler_pid"])
    peaks = {"driver": 0, "scheduler": 0}
    stop = threading.Event()

    def sample() -> None:
        while True:
            for key, proc in (("driver", me), ("scheduler", sched)):
                with contextlib.suppress(psutil.NoSuchProcess):
                    peaks[key] = max(peaks[key], proc.memory_info().rss)
            if stop.wait(SAMPLE_S):
                return

    t0 = time.perf_counter()
    from distributed import Client, get_task_stream
    from guideloom.workflows.demo_transforms import resample_and_emit

    import guideloom

    ds = guideloom.load(data_dir=a["data"])
    guideloom.add_view(ds, VIEW, fields=VIEW_FIELDS)
    n_index = len(ds.index().ids)
    from guideloom.cluster.security import find_security

    client = Client(a["address"], timeout=60, security=find_security(a["address"]))
    client.wait_for_workers(2, timeout=60)
    setup_s = time.perf_counter() - t0
    before = {"driver": me.memory_info().rss, "scheduler": sched.memory_info().rss}
    peaks.update(before)
    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    t1 = time.perf_counter()
    with get_task_stream(client) as ts:
        guideloom.export_to_numpy(VIEW, a["out"], dataset=ds, record_transform=resample_and_emit,
                                  client=client)
    export_s = time.perf_counter() - t1
    stop.set()
    thread.join()
    manifest = json.loads((Path(a["out"]) / "export.json").read_text())
    tasks = [t for t in ts.data if t.get("status", "OK") == "OK"]
    out_bytes = sum(p.stat().st_size for p in Path(a["out"]).glob("*.npy"))
    client.close()
    return {"setup_s": setup_s, "export_s": export_s, "n_index": n_index,
            "count": manifest["count"], "partition_size": manifest.get("partition_size"),
            "placement": manifest["placement"]["mode"], "n_tasks": len(tasks),
            "out_bytes": out_bytes,
            "compute_s": manifest["timings"].get("compute_s"),
            "driver_before": before["driver"], "driver_peak": peaks["driver"],
            "sched_before": before["scheduler"], "sched_peak": peaks["scheduler"]}


CHILDREN = {"driver": child_driver}


# --- the parent ----------------------------------------------------------------------------------
def run_child(cmd: list[str], env: dict[str, str]) -> dict:
    """Run a child command; its ``RESULT`` line as a dict (raises with its stderr on failure)."""
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=CHILD_TIMEOUT_S)
    lines = [x for x in proc.stdout.splitlines() if x.startswith(RESULT)]
    if proc.returncode != 0 or not lines:
        tail = "\n".join((proc.stderr or proc.stdout).splitlines()[-15:])
        raise RuntimeError(f"child failed (exit {proc.returncode}):\n{tail}")
    return json.loads(lines[-1][len(RESULT):])


def worker_peak_rss(pids: list[int]) -> int:
    """Current summed RSS of the given processes and their children (after the export)."""
    import psutil

    total = 0
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            for p in (proc, *proc.children(recursive=True)):
                total += p.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return total


def run_size(n: int, data: Path, work: Path, env: dict[str, str], child: Any,
             args: argparse.Namespace) -> dict:
    """guideloom on a fresh 2-worker process cluster, then rddac serially, on ``n`` experiments."""
    from guideloom.cluster.local_procs import start_local_cluster

    state = work / f"cluster-{n}"
    t0 = time.perf_counter()
    procs = start_local_cluster(2, state_dir=state, dashboard_port=None, nthreads=1,
                                pythonpath=[REPO], timeout=120)
    start_s = time.perf_counter() - t0
    try:
        d_args = {"data": str(data), "out": str(work / f"gl-{n}"), "address": procs.address,
                  "scheduler_pid": procs.scheduler.pid}
        cmd = [sys.executable, str(SCRIPT), "--child", "driver", json.dumps(d_args)]
        t0 = time.perf_counter()
        gl = run_child(cmd, env)
        gl["wall_s"] = time.perf_counter() - t0
        gl["workers_rss_after"] = worker_peak_rss([w.pid for w in procs.workers])
    finally:
        report = procs.stop()
    gl.update(cmd=cmd, start_s=start_s, address=procs.address, pids=procs.pids,
              stopped=f"terminated {report.terminated}, killed {report.killed}, "
                      f"already gone {report.already_gone}")
    shutil.rmtree(d_args["out"], ignore_errors=True)

    rd = None
    if args.rddac_problem is None:
        rd_args = {"data": str(data), "out": str(work / f"rddac-{n}"),
                   "transform_file": str(export_bench.TRANSFORM_FILE),
                   "manifest": str(export_bench.rddac_manifest(data, args.cache))}
        rcmd = child.command("rddac-export", rd_args, args.rddac_python)
        t0 = time.perf_counter()
        rd, _ = child.run("rddac-export", rd_args, python=args.rddac_python)
        rd["wall_s"] = time.perf_counter() - t0
        rd["cmd"] = rcmd
        shutil.rmtree(rd_args["out"], ignore_errors=True)
    return {"n": n, "gl": gl, "rd": rd}


def mb(x: float) -> str:
    return f"{x / 1e6:.0f} MB"


def print_size(res: dict) -> None:
    n, gl, rd = res["n"], res["gl"], res["rd"]
    d_grow = gl["driver_peak"] - gl["driver_before"]
    s_grow = gl["sched_peak"] - gl["sched_before"]
    print(f"\n{n} experiments (index rows {gl['n_index']}, exported {gl['count']})")
    print(f"  cluster: dask scheduler + 2 dask workers (1 thread each) at {gl['address']}, "
          f"PIDs {gl['pids']}; start {gl['start_s']:.1f} s; stopped by PID: {gl['stopped']}")
    print(f"  guideloom export wall {gl['export_s']:.2f} s ({gl['placement']}; tasks' compute "
          f"{gl['compute_s']:.2f} s); {gl['n_tasks']} tasks of up to {gl['partition_size']} "
          f"experiments: {gl['n_tasks'] / gl['export_s']:.1f} tasks/s, "
          f"{n / gl['export_s']:.0f} experiments/s")
    print(f"  driver RSS: before export {mb(gl['driver_before'])}, peak {mb(gl['driver_peak'])} "
          f"(+{mb(d_grow)}, {d_grow / n:.0f} B per experiment)")
    print(f"  scheduler RSS: before export {mb(gl['sched_before'])}, peak {mb(gl['sched_peak'])} "
          f"(+{mb(s_grow)}, {s_grow / n:.0f} B per experiment); workers (nanny + worker) after "
          f"{mb(gl['workers_rss_after'])}")
    print(f"  output {mb(gl['out_bytes'])} ({gl['out_bytes'] / n:.0f} B per experiment); "
          f"driver process wall (imports, load, connect, export) {gl['wall_s']:.2f} s")
    print(f"  command: {export_bench.short(gl['cmd'])}")
    if rd is not None:
        print(f"  rddac {rd['version']} serial export call {rd['export_s']:.2f} s "
              f"({n / rd['export_s']:.0f} experiments/s; process wall {rd['wall_s']:.2f} s) -> "
              f"ratio rddac/guideloom export call {rd['export_s'] / gl['export_s']:.2f}x")
        print(f"  command: {export_bench.short(rd['cmd'])}")


def print_summary(results: list[dict]) -> None:
    print("\nSUMMARY")
    print(f"  {'experiments':>11s} {'gl wall s':>9s} {'tasks/s':>8s} {'exp/s':>7s} "
          f"{'driver peak':>11s} {'drv +B/exp':>10s} {'sched peak':>10s} {'rddac s':>8s} "
          f"{'rddac/gl':>8s}")
    for r in results:
        gl, rd = r["gl"], r["rd"]
        print(f"  {r['n']:11d} {gl['export_s']:9.2f} {gl['n_tasks'] / gl['export_s']:8.1f} "
              f"{r['n'] / gl['export_s']:7.0f} {mb(gl['driver_peak']):>11s} "
              f"{(gl['driver_peak'] - gl['driver_before']) / r['n']:10.0f} "
              f"{mb(gl['sched_peak']):>10s} "
              + (f"{rd['export_s']:8.2f} {rd['export_s'] / gl['export_s']:7.2f}x" if rd else
                 f"{'-':>8s} {'-':>8s}"))
    if len(results) >= 2:
        a, b = results[0], results[-1]
        ga = a["gl"]["driver_peak"] - a["gl"]["driver_before"]
        gb = b["gl"]["driver_peak"] - b["gl"]["driver_before"]
        per_extra = (gb - ga) / (b["n"] - a["n"])
        out_per = b["gl"]["out_bytes"] / b["n"]
        flat = per_extra < 0.05 * out_per
        print(f"  driver peak growth during the export: {mb(ga)} at {a['n']}, {mb(gb)} at "
              f"{b['n']}: {per_extra:.0f} B per extra experiment, vs {out_per:.0f} B of output "
              f"per experiment -> {'flat (< 5% of the data)' if flat else 'NOT flat'}")
        print(f"  driver peak RSS (whole process): {mb(a['gl']['driver_peak'])} -> "
              f"{mb(b['gl']['driver_peak'])}; scheduler peak RSS: "
              f"{mb(a['gl']['sched_peak'])} -> {mb(b['gl']['sched_peak'])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=9000, help="the large size (default 9000)")
    parser.add_argument("--quick", action="store_true", help="1,000 experiments only")
    parser.add_argument("--cache", type=Path, default=export_bench.DEFAULT_CACHE)
    parser.add_argument("--rddac-python", default=None,
                        help="a Python with rddac 2.0.0 (default: benchmarks/venvs.py)")
    args = parser.parse_args()
    args.cache = args.cache.expanduser().resolve()
    args.cache.mkdir(parents=True, exist_ok=True)
    sizes = [1000] if args.quick else sorted({1000, args.n})

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(args.cache / "pycache")
    sys.path.insert(0, str(REPO))
    import guideloom
    from guideloom.demo import DEFAULT_SCAN_SHAPE, cached_demo_data

    child = export_bench.Child(sys.executable, env)
    from venvs import rddac_python

    args.rddac_python = rddac_python(args.rddac_python)
    args.rddac_problem = export_bench.rddac_available(args.rddac_python)
    print(f"guideloom {guideloom.__version__} from {Path(guideloom.__file__).parent}; python "
          f"{sys.version.split()[0]}; {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f} at start")
    print(f"command: {export_bench.short([Path(sys.executable).name, *sys.argv])}")
    if args.rddac_problem:
        print(f"rddac not run: {args.rddac_problem}")
    else:
        print(f"rddac from {args.rddac_python}: rddac.load(source=<demo manifest + sha256 per "
              f"file>, data_dir=<same data>) (see benchmarks/export.py)")

    work = Path(tempfile.mkdtemp(prefix="scale-bench-", dir=args.cache))
    results = []
    try:
        for n in sizes:
            t0 = time.perf_counter()
            data = cached_demo_data(args.cache, n, DEFAULT_SCAN_SHAPE, "zip")
            print(f"\ndata: {export_bench.short([str(data)])} ({n} x scans "
                  f"{DEFAULT_SCAN_SHAPE[0]}x{DEFAULT_SCAN_SHAPE[1]}; "
                  f"{time.perf_counter() - t0:.1f} s to find or make)", flush=True)
            results.append(run_size(n, data, work, env, child, args))
            print_size(results[-1])
            sys.stdout.flush()
        print_summary(results)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--child":
        print(RESULT + json.dumps(CHILDREN[sys.argv[2]](json.loads(sys.argv[3]))), flush=True)
    else:
        main()
