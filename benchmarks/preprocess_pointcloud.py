"""The pointcloud stage of ``guideloom preprocess`` beside rddac 2.0's, on real-size scans.

Run: ``python3 benchmarks/preprocess_pointcloud.py [--n N] [--shape 2000 3200] [--cache DIR]
[--rddac-python PY] [--rf-trees N] [--no-rddac]``

Issue 39's goals: pointcloud on real-size scans (2000 x 3200) >= 1.5x rddac at the same worker
count (one worker here: each side processes the experiments one after the other in one
process), each stage's share (filtering, classifier, ICP) against its floor, and a worker's
peak memory <= 2x the largest experiment's working set.

One run: synthetic raw scans of the size asked (``tests/pointcloud_helpers.py``: a part with
fins, floating clusters and specks, its labels and a DDACS-shaped ``simulation/``), written
once under ``--cache`` (default ``~/.cache/guideloom-bench/pointcloud``); the fin classifier
trained by each side from 6 labelled experiments (3 per geometry, the minimum); then ``--n``
experiments processed by each side, guideloom's in a child process so its peak RSS is its own.
rddac runs in its own venv (``--rddac-python``, ``$GUIDELOOM_RDDAC_PYTHON``, else one is made,
tests/rddac_venv.py) through tests/rddac_pointcloud_driver.py. Printed: seconds per experiment
on each side and the speed-up; guideloom's seconds per phase with the floor of each phase (what
no implementation of the same algorithm avoids: filtering, one k-nearest-neighbour query of all
points in the plane; classifier, the forest's ``predict_proba`` on the feature matrix; ICP, the
nearest-neighbour queries of its iterations); the worker's memory (benchmarks/memory.py): its idle
resident size (imports done, the forests loaded) and, per experiment, the resident peak the
experiment added over it and tracemalloc's peak, each against the experiment's working set
(its raw scans as decoded plus the processed arrays it writes); and the agreement with rddac
(kept points in common, rotation and translation differences).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests import pointcloud_helpers as ph  # noqa: E402
from tests.rddac_venv import rddac_python  # noqa: E402

DRIVER = REPO / "tests" / "rddac_pointcloud_driver.py"


def params_for(shape: tuple[int, int]) -> dict:
    """rddac's recipe; on a smaller grid the patch size and the ICP sample shrink with it."""
    if tuple(shape) == (2000, 3200):
        return {}
    share = shape[0] * shape[1] / (2000 * 3200)
    return {"lumi_min_patch_size": max(50, int(20040 * share)),
            "icp_sample_size": max(1000, int(50000 * share))}


def dataset(cache: Path, shape: tuple[int, int]) -> tuple[Path, Path]:
    root = cache / f"{shape[0]}x{shape[1]}"
    done = root / ".complete"
    if not done.is_file():
        import shutil

        shutil.rmtree(root, ignore_errors=True)
        root.mkdir(parents=True)
        ph.write_dataset(root, shape=shape)
        done.write_text("1")
    return root / "data", root / "labels"


def _ours_child(data: str, labels: str, out: str, params: dict, ids: list[int],
                queue: multiprocessing.Queue) -> None:
    from benchmarks import memory
    from guideloom.preprocess import pointcloud as pc

    t0 = time.perf_counter()
    prepared = pc.prepare(params, out_dir=out, data_dir=data, labels=labels, rebuild=False)
    prepare_s = time.perf_counter() - t0
    rss_after_prepare = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    before_models = memory.status()["VmRSS"]
    for exp_id in ids:  # the idle worker: imports done, its experiments' forests loaded
        for op in ("op10", "op20"):
            prepared.bundles()[f"{ph.EXPERIMENTS[exp_id].geometry}_{op}"]
    idle = memory.status()["VmRSS"]

    def one(exp_id: int, timings: dict[str, float]) -> None:
        with h5py.File(Path(data) / "h5" / f"{exp_id:04d}.h5", "r") as raw, \
                h5py.File(Path(out) / f"{exp_id:04d}.h5", "w") as f:
            ph.processed_means(f, ph.EXPERIMENTS[exp_id])
            pc.process_experiment(raw, f, params=params, prepared=prepared, timings=timings)

    rows = []
    for exp_id in ids:
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        _, added = memory.resident(lambda: one(exp_id, timings))  # noqa: B023 - run at once
        rows.append({"id": exp_id, "seconds": time.perf_counter() - t0, **timings,
                     "rss_before": added.baseline, "rss_added": added.peak})
    traced_peak = memory.traced(lambda: one(ids[0], {}))[1].peak if ids else 0
    queue.put({"prepare_s": prepare_s, "rows": rows, "rss_after_prepare_kb": rss_after_prepare,
               "max_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
               "models_bytes": idle - before_models, "idle_rss": idle,
               "traced_peak": traced_peak})


def run_ours(data: Path, labels: Path, out: Path, params: dict, ids: list[int]) -> dict:
    """Prepare (train or load) in one fresh process, then process ``ids`` in another (a
    worker: it loads the cached forests, and its peak RSS is the processing's alone)."""
    out.mkdir(parents=True, exist_ok=True)
    ctx = multiprocessing.get_context("spawn")
    results = []
    for todo in ([], ids):
        queue: multiprocessing.Queue = ctx.Queue()
        proc = ctx.Process(target=_ours_child, args=(str(data), str(labels), str(out), params,
                                                     todo, queue))
        proc.start()
        results.append(queue.get())
        proc.join()
    trained, worker = results
    return {**worker, "prepare_s": trained["prepare_s"],
            "rss_after_prepare_kb": trained["max_rss_kb"]}


def run_rddac(python: str, data: Path, labels: Path, out: Path, params: dict,
              ids: list[int]) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    for exp_id in ids:
        with h5py.File(out / f"{exp_id:04d}.h5", "w") as f:
            ph.processed_means(f, ph.EXPERIMENTS[exp_id])
    done = subprocess.run([python, str(DRIVER), str(data), str(labels), str(out),
                           json.dumps(params), *map(str, ids)], capture_output=True, text=True,
                          check=True)
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {"prepare_s": lines[0]["prepare_s"], "rows": lines[1:],
            "max_rss_kb": max(r["max_rss_kb"] for r in lines[1:])}


def floors(data: Path, out: Path, exp_id: int, params: dict) -> dict[str, float]:
    """Seconds of what the same algorithm cannot avoid, on one experiment's OP10 scan."""
    from scipy.spatial import cKDTree

    from guideloom.preprocess import pointcloud as pc
    from guideloom.preprocess.pointcloud import features, grid, model

    p = {**pc.DEFAULTS, **params}
    with h5py.File(data / "h5" / f"{exp_id:04d}.h5", "r") as raw:
        z, lumi = model.read_scan(raw, "op10")
    valid = grid.surface_mask(lumi, z, int(p["lumi_min_patch_size"]))
    points = grid.scan_points(z, valid)
    t0 = time.perf_counter()
    cKDTree(points[:, :2]).query(points[:, :2], k=int(p["k_mono"]) + 1)
    filtering = time.perf_counter() - t0
    with h5py.File(out / f"{exp_id:04d}.h5", "r") as f:
        sim_id = int(f["pointcloud"].attrs["simulation_id"])
    from guideloom.preprocess.pointcloud.simulations import Simulations

    sim = Simulations(str(data / "simulation")).points(sim_id, "op10")
    tree = cKDTree(sim)
    sample = points[: min(len(points), int(p["icp_sample_size"]))]
    t0 = time.perf_counter()
    tree.query(sample)
    icp = (time.perf_counter() - t0) * 2 * int(p["icp_max_iterations"])
    bundle = model.load(out)[f"{ph.EXPERIMENTS[exp_id].geometry}_op10"]
    heights = grid.on_grid(points[:, 2], valid).astype(np.float64)
    base, _ = features.base_matrix(features.base_features(
        heights, np.zeros(valid.shape, np.float32), grid.luminescence_grid(lumi, valid), valid),
        valid)
    x = np.hstack([base, np.zeros((len(base), len(features.REGISTERED)), np.float32)])
    t0 = time.perf_counter()
    bundle["model"].predict_proba(x)
    classifier = time.perf_counter() - t0
    # both operations are processed: OP20's scan is about as large
    return {"filtering": 2 * filtering, "classifier": 2 * classifier, "icp": 2 * icp}


def working_set(data: Path, out: Path, exp_id: int) -> dict[str, int]:
    """Bytes of one experiment's working set: its raw scans as decoded (``z`` and
    ``luminescence`` of both operations, in their stored dtype) plus the processed arrays it
    produces (each operation's kept points and packed luminescence)."""
    with h5py.File(data / "h5" / f"{exp_id:04d}.h5", "r") as raw, \
            h5py.File(out / f"{exp_id:04d}.h5", "r") as done:
        raw_bytes = sum(raw[f"pointcloud/{op}/{name}"].size
                        * raw[f"pointcloud/{op}/{name}"].dtype.itemsize
                        for op in ("op10", "op20") for name in ("z", "luminescence"))
        out_bytes = sum(done[f"pointcloud/{op}/{name}"].size
                        * done[f"pointcloud/{op}/{name}"].dtype.itemsize
                        for op in ("op10", "op20") for name in ("z", "luminescence"))
    return {"raw": raw_bytes, "processed": out_bytes, "total": raw_bytes + out_bytes}


def memory_lines(data: Path, out: Path, ours: dict) -> list[str]:
    """The worker's idle size, and per experiment what processing it added against its
    working set (goal: <= 2x)."""
    mib = 2**20
    lines = [f"memory (guideloom worker): idle {ours['idle_rss'] / mib:.0f} MiB resident "
             f"(imports done, the forests of its experiments loaded: "
             f"{ours['models_bytes'] / mib:.0f} MiB of it); per experiment (VmHWM reset through "
             "/proc/self/clear_refs before it), the worker's resident peak over its idle size, "
             "and over the size just before it (freed memory the allocator keeps counts in "
             "the first, not in the second):"]
    worst = 0.0
    for row in ours["rows"]:
        ws = working_set(data, out, row["id"])
        over_idle = row["rss_before"] + row["rss_added"] - ours["idle_rss"]
        ratio = over_idle / ws["total"]
        worst = max(worst, ratio)
        lines.append(f"  {row['id']:04d}: peak over idle {over_idle / mib:.1f} MiB (over the "
                     f"{row['rss_before'] / mib:.0f} MiB before it: {row['rss_added'] / mib:.1f}"
                     f" MiB); working set {ws['total'] / mib:.1f} MiB = raw z + luminescence of "
                     f"op10 and op20 as decoded {ws['raw'] / mib:.1f} MiB + processed z + "
                     f"luminescence {ws['processed'] / mib:.1f} MiB; peak over idle / working "
                     f"set {ratio:.2f}")
    first = working_set(data, out, ours["rows"][0]["id"])["total"]
    lines.append(f"  tracemalloc peak of {ours['rows'][0]['id']:04d} (numpy's buffers; not "
                 f"scipy's k-d trees): {ours['traced_peak'] / mib:.1f} MiB, "
                 f"{ours['traced_peak'] / first:.2f}x its working set")
    lines.append(f"  largest peak over idle / working set {worst:.2f} (goal <= 2)")
    return lines


def agreement(ours: Path, theirs: Path, ids: list[int]) -> list[str]:
    lines = []
    for exp_id in ids:
        with h5py.File(ours / f"{exp_id:04d}.h5", "r") as a, \
                h5py.File(theirs / f"{exp_id:04d}.h5", "r") as b:
            for op in ("op10", "op20"):
                ga, gb = a[f"pointcloud/{op}"], b[f"pointcloud/{op}"]
                za, zb = ga["z"][:], gb["z"][:]
                common = len(set(map(tuple, za)) & set(map(tuple, zb)))
                rot = float(np.abs(ga.attrs["icp_rotation"] - gb.attrs["icp_rotation"]).max())
                tra = float(np.abs(ga.attrs["icp_translation"]
                                   - gb.attrs["icp_translation"]).max())
                lines.append(f"  {exp_id:04d} {op}: {common / max(len(za), len(zb)):.4%} of the "
                             f"kept points in common ({len(za)} / {len(zb)}), rotation "
                             f"{rot:.2e}, translation {tra:.2e} mm")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1, help="experiments processed (default 1)")
    parser.add_argument("--shape", type=int, nargs=2, default=(2000, 3200))
    parser.add_argument("--cache", type=Path,
                        default=Path.home() / ".cache" / "guideloom-bench" / "pointcloud")
    parser.add_argument("--rddac-python", default=os.environ.get("GUIDELOOM_RDDAC_PYTHON"))
    parser.add_argument("--rf-trees", type=int, default=None,
                        help="rf_n_estimators for both sides (default rddac's 150; training "
                             "150 trees on 1.2 M rows takes an hour on a busy 2-core machine)")
    parser.add_argument("--no-rddac", action="store_true",
                        help="guideloom's side and its memory only (no rddac, no speed-up)")
    args = parser.parse_args()
    shape = (args.shape[0], args.shape[1])
    python = args.rddac_python
    if python is None and not args.no_rddac:
        python, why = rddac_python()
        if python is None:
            raise SystemExit(f"rddac 2.0 is not available: {why}")
    t0 = time.perf_counter()
    data, labels = dataset(args.cache, shape)
    print(f"data: {data} ({shape[0]} x {shape[1]} scans; {time.perf_counter() - t0:.0f} s)")
    params = params_for(shape)
    if args.rf_trees is not None:
        params["rf_n_estimators"] = args.rf_trees
    ids = [e.index for e in ph.EXPERIMENTS][-args.n:]  # unlabelled first: 7, 6, ...
    # one folder per shape and recipe: a run stopped during training resumes with the grids
    # both sides prepared (the outputs are written anew)
    run_dir = args.cache / f"run-{shape[0]}x{shape[1]}-{args.rf_trees or 150}"
    ours = run_ours(data, labels, run_dir / "guideloom", params, ids)
    print(f"uptime: {os.getloadavg()[0]:.1f} load over the last minute, {os.cpu_count()} cores")
    print("\n".join(memory_lines(data, run_dir / "guideloom", ours)))
    if args.no_rddac:
        return
    theirs = run_rddac(python, data, labels, run_dir / "rddac", params, ids)
    trees = params.get("rf_n_estimators", 150)
    print(f"training the fin classifier (6 labelled experiments, {trees} trees): guideloom "
          f"{ours['prepare_s']:.1f} s, rddac {theirs['prepare_s']:.1f} s")
    ours_s = sum(r["seconds"] for r in ours["rows"]) / len(ids)
    theirs_s = sum(r["seconds"] for r in theirs["rows"]) / len(ids)
    print(f"per experiment (one worker each): guideloom {ours_s:.1f} s, rddac {theirs_s:.1f} s, "
          f"speed-up {theirs_s / ours_s:.2f}x (goal >= 1.5x)")
    phases = {k: sum(r.get(k, 0.0) for r in ours["rows"]) / len(ids)
              for k in ("filtering", "classifier", "icp")}
    floor = floors(data, run_dir / "guideloom", ids[0], params)
    for phase, seconds in phases.items():
        print(f"  {phase:10s} {seconds:7.1f} s  {seconds / ours_s:5.1%} of the experiment; "
              f"floor {floor[phase]:.1f} s ({seconds / max(floor[phase], 1e-9):.1f}x it)")
    print(f"peak RSS of the whole process: guideloom worker {ours['max_rss_kb'] / 1e3:.0f} MB "
          f"(training: {ours['rss_after_prepare_kb'] / 1e3:.0f} MB), rddac "
          f"{theirs['max_rss_kb'] / 1e3:.0f} MB")
    print("agreement with rddac:")
    print("\n".join(agreement(run_dir / "guideloom", run_dir / "rddac", ids)))


if __name__ == "__main__":
    main()
