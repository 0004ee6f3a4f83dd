"""``guideloom preprocess`` beside ``rddac preprocess`` (force + sheet + oil) in one run.

Run: ``python3 benchmarks/preprocess.py [--n 1000] [--workers N] [--root DIR]``

The same raw dataset (``--n`` experiments in rddac's published zipped layout, measurements of
every cleaning branch: ``tests/preprocess_helpers.py``) is processed by rddac 2.0 (in its own
venv: ``GUIDELOOM_RDDAC_PYTHON`` or the tests' cached one) and by guideloom, each as the
command a user runs (a fresh process, wall time including start-up), with one worker
(rddac serial, guideloom in-process) and with ``--workers`` (default: the cores; rddac's
``multiprocessing.Pool``, guideloom's local Dask cluster). Printed: seconds, the speed-ups
(goals: >= 1.5x with one worker, >= 3x with the cores), guideloom's largest worker peak
resident memory beside the largest single experiment's working set (goal: <= 2x), and a
check that both wrote the same values.

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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.preprocess_helpers import make_raw_dataset, rddac_python  # noqa: E402

STAGES = ["force", "sheet", "oil"]
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


def _working_set(raw_dir: Path) -> int:
    """The largest experiment's raw tables as the stages hold them (float64), plus outputs."""
    import zipfile

    largest = 0
    for archive in raw_dir.glob("*.zip"):
        with zipfile.ZipFile(archive) as zf:
            for name in zf.namelist():
                with zf.open(name) as fh, h5py.File(fh, "r") as f:
                    size = sum(int(np.prod(f[f"{g}/data"].shape)) * 8 * 2
                               for g in ("force", "sheet_thickness", "oil_thickness") if g in f)
                largest = max(largest, size)
    return largest


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
    ws = _working_set(raw)
    print(f"largest experiment's working set: {ws / 2**10:.0f} KiB (a worker's peak is "
          "dominated by the interpreter and its libraries, not by the experiment)")


if __name__ == "__main__":
    main()
