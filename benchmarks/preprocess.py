"""``guideloom preprocess`` beside ``rddac preprocess`` (force + sheet + oil) in one run.

Run: ``python3 benchmarks/preprocess.py [--n 1000] [--workers N] [--root DIR]``

The same raw dataset (``--n`` experiments in rddac's published zipped layout, measurements of
every cleaning branch: ``tests/preprocess_helpers.py``) is processed by rddac 2.0 (in its own
venv: ``GUIDELOOM_RDDAC_PYTHON`` or the tests' cached one) and by guideloom, each as the
command a user runs (a fresh process, wall time including start-up), with one worker
(rddac serial, guideloom in-process) and with ``--workers`` (default: the cores; rddac's
``multiprocessing.Pool``, guideloom's local Dask cluster). Printed: seconds, the speed-ups
(goals: >= 1.5x with one worker, >= 3x with the cores), guideloom's largest worker peak
resident memory, and a check that both wrote the same values. Then the memory of the work
itself (``--memory``, on by default): in a fresh process, imports done and one experiment per
stage processed to warm up, each stage processes every experiment on its own
(``guideloom.preprocess.job.process_item``, as a task does); per experiment the resident
peak over the idle process (VmHWM reset through ``/proc/self/clear_refs``,
benchmarks/memory.py) and, in a second pass, tracemalloc's peak; beside the largest
experiment's working set: its raw table as decoded plus the processed table it writes (goal:
<= 2x).

Goals are about 1,000 experiments; on a shared machine run a smaller ``--n`` and read the
ratios, which are measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
from tests.preprocess_helpers import make_raw_dataset, rddac_python  # noqa: E402

STAGES = ["force", "sheet", "oil"]
STAGES_RUN = tuple(STAGES)
GUIDELOOM_RUN = """
import json, sys
from guideloom.preprocess.job import preprocess
client = sys.argv[3]
r = preprocess(["force", "sheet", "oil"], data_dir=sys.argv[1], out_dir=sys.argv[2],
               client=client, quiet=True)
print(json.dumps({"peak_rss": r.peak_rss, "errors": len(r.errors), "placement": r.placement}))
"""


def _timed(cmd: list[str]) -> tuple[float, str]:
    started = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return time.perf_counter() - started, done.stdout


def _rddac(python: str, raw: Path, out: Path, workers: int) -> float:
    code = "import sys; from rddac.cli import main; sys.exit(main())"
    seconds, _ = _timed([python, "-c", code, "preprocess", *STAGES, "--data-dir", str(raw),
                         "--out", str(out), "--workers", str(workers), "-y", "-q"])
    return seconds


def _guideloom(raw: Path, out: Path, workers: int) -> tuple[float, dict]:
    client = "sync" if workers == 1 else f"local:{workers}"
    seconds, stdout = _timed([sys.executable, "-c", GUIDELOOM_RUN, str(raw), str(out), client])
    return seconds, json.loads(stdout.strip().splitlines()[-1])


MEMORY_RUN = """
import json, sys
sys.path.insert(0, sys.argv[3])
from benchmarks.preprocess import memory_child
print(json.dumps(memory_child(sys.argv[1], sys.argv[2])))
"""


def memory_child(raw: str, out: str) -> dict:
    """Per stage: the idle resident size, the largest resident peak over it and the largest
    tracemalloc peak of one experiment, and the largest working set (bytes)."""
    from benchmarks import memory
    from guideloom.h5_tools import open_h5
    from guideloom.preprocess import inputs, job, publish
    from guideloom.preprocess.params import merge
    from guideloom.preprocess.stages import STAGES
    from guideloom.select.manifest import RDDAC_SPEC, load

    Path(out).mkdir(parents=True, exist_ok=True)
    dataset = load(raw, spec=RDDAC_SPEC)
    _, locations, _ = job._select(raw, None, None, None)
    items = [job.Item(loc, publish.output_name(loc.sim_id), ev)
             for loc, ev in zip(locations, inputs.evidence_of(locations), strict=True)]
    values = merge(None)
    jobs = {n: job.Job(out, (n,), {n: values[n]}, {n: STAGES[n].fingerprint(values[n])}, True,
                       {}) for n in STAGES_RUN}
    for name in STAGES_RUN:  # warm up: lazy imports, first file handles
        job.process_item(jobs[name], items[0])
    results = {}
    for name in STAGES_RUN:
        idle = memory.status()["VmRSS"]
        over_idle, traced = 0, 0
        for item in items:
            done, added = memory.resident(lambda it=item, j=jobs[name]: job.process_item(j, it))
            assert done[1] is None, done[1]
            over_idle = max(over_idle, added.baseline + added.peak - idle)
        for item in items:
            traced = max(traced, memory.traced(
                lambda it=item, j=jobs[name]: job.process_item(j, it))[1].peak)
        group = STAGES[name].group
        largest = 0
        for item in items:
            with open_h5(item.loc.sim_id, data_dir=raw, dataset=dataset) as f, \
                    h5py.File(Path(out) / item.name, "r") as g:
                if group in f:
                    largest = max(largest, f[f"{group}/data"].size
                                  * f[f"{group}/data"].dtype.itemsize
                                  + g[f"{group}/data"].size * g[f"{group}/data"].dtype.itemsize)
        results[name] = {"idle": idle, "over_idle": over_idle, "traced": traced,
                         "working_set": largest}
    return results


def _same(a: Path, b: Path) -> bool:
    for path in sorted(b.glob("*.h5")):
        with h5py.File(a / path.name, "r") as x, h5py.File(path, "r") as y:
            if sorted(x) != sorted(y):
                return False
            for g in y:
                if not np.array_equal(x[f"{g}/data"][()], y[f"{g}/data"][()], equal_nan=True):
                    return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--root", type=Path, default=None)
    parser.add_argument("--no-memory", action="store_true", help="skip the memory pass")
    args = parser.parse_args()
    python, why = rddac_python()
    if python is None:
        sys.exit(f"rddac 2.0 is not available: {why}")
    root = Path(args.root or tempfile.mkdtemp(prefix="guideloom-bench-preprocess-"))
    raw = root / "raw"
    if not (raw / "metadata.json").exists():
        make_raw_dataset(raw, args.n, "zip")
    print(f"{args.n} experiments (zipped), {os.cpu_count()} cores, --workers {args.workers}")
    rows = []
    for workers in (1, args.workers):
        for name in ("rddac", "guideloom"):
            shutil.rmtree(root / f"{name}-{workers}", ignore_errors=True)
        t_r = _rddac(python, raw, root / f"rddac-{workers}", workers)
        t_g, info = _guideloom(raw, root / f"guideloom-{workers}", workers)
        same = _same(root / f"guideloom-{workers}", root / f"rddac-{workers}")
        rows.append((workers, t_r, t_g, info, same))
        print(f"workers {workers}: rddac {t_r:6.2f} s  guideloom {t_g:6.2f} s "
              f"({info['placement']})  speed-up {t_r / t_g:4.2f}x  same values: {same}  "
              f"guideloom worker peak RSS {info['peak_rss'] / 2**20:.0f} MiB")
    print(f"load average over the last minute: {os.getloadavg()[0]:.1f}")
    if not args.no_memory:
        done = subprocess.run([sys.executable, "-c", MEMORY_RUN, str(raw),
                               str(root / "guideloom-memory"), str(REPO)],
                              capture_output=True, text=True, check=True)
        for name, m in json.loads(done.stdout.strip().splitlines()[-1]).items():
            ws = m["working_set"]
            print(f"memory {name}: idle process {m['idle'] / 2**20:.0f} MiB resident; largest "
                  f"experiment's working set {ws / 2**10:.1f} KiB (its raw table as decoded + "
                  f"the processed table); one experiment's peak over idle: resident "
                  f"{m['over_idle'] / 2**10:.0f} KiB ({m['over_idle'] / ws:.2f}x), tracemalloc "
                  f"{m['traced'] / 2**10:.1f} KiB ({m['traced'] / ws:.2f}x) (goal <= 2x)")


if __name__ == "__main__":
    main()
