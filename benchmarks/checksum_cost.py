"""The write-time cost of full-data checksums (issue 10: at most 5% of export time), and why xxh3.

Run: ``python3 benchmarks/checksum_cost.py [--reps N] [--cache DIR] [--quick]``

One run prints:

1. Hash throughput on this machine (one core, data in cache): xxh3_64 (what guideloom uses),
   xxh3_128, crc32, adler32, sha256, blake2b and md5, on a 25.6 MB buffer (one pointcloud row)
   and on 4 kB buffers (small rows).
2. The same exports with checksums on and off (``GUIDELOOM_CHECKSUMS=0``, a switch for this
   measurement only), interleaved, each in a fresh Python process (the export call is timed
   inside it), after one warm-up pair, in-process (``client="sync"``, so that every checksum
   adds to the export's time; the default client runs these jobs in-process here too):
   pointcloud-op10 to npy on the real-size experiments (scans 2000 x 3200;
   ``guideloom.demo.cached_demo_data``, generated once under ``--cache``, default
   ``~/.cache/guideloom-bench``), and force-signals with the seed's transform on the same
   experiments and on 2,000 small ones. Printed: wall and cpu seconds, median [min-max], their
   on/off ratios, and the time spent taking checksums, timed inside the "on" runs (every call
   of the sinks' checksum helper and the finalize step writing ``checksums.json``) as a share of
   the export: the figure for the goal, since on a shared machine the wall time of one job
   moves by 2x between runs by itself (the best-run ratio is printed as well).
3. ``Export.verify()`` on the pointcloud export: seconds and MB/s.

The machine may be shared and noisy: compare the ratios measured in the same run.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SCRIPT = Path(__file__).resolve()
DEFAULT_CACHE = Path.home() / ".cache" / "guideloom-bench"
REAL_SCAN = (2000, 3200)
SMALL_SCAN = (100, 160)
SWITCH_ENV = "GUIDELOOM_CHECKSUMS"
RESULT = "RESULT "
GOAL = 1.05  # checksums on / off
FORCE_VIEW = "force-signals"
FORCE_FIELDS = {
    "force": "force_data",
    "geometry": "process-parameters/geometry",
    "blankholder_force": "process-parameters/blankholder_force",
    "split": "process-parameters/split",
}
PC_VIEW = "pointcloud-op10"


# --- children (each a fresh interpreter) ---------------------------------------------------------
def child_export(a: dict) -> dict:
    """One export, timed inside the process; with checksums on, the time spent taking them too
    (every sink call of the checksum helper and the finalize step that writes them)."""
    import guideloom
    from guideloom.export import finalize
    from guideloom.formats import checksums

    spent = [0.0]

    def timed(fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent[0] += time.perf_counter() - t
        return wrapper

    checksums.RowDigests.add = timed(checksums.RowDigests.add)
    checksums.RowDigests.add_file = timed(checksums.RowDigests.add_file)
    checksums.RowDigests.summary = timed(checksums.RowDigests.summary)
    finalize.record_checksums = timed(finalize.record_checksums)
    ds = guideloom.load(data_dir=a["data"])
    transform = None
    if a["view"] == FORCE_VIEW:
        from guideloom.workflows.demo_transforms import resample_and_emit

        guideloom.add_view(ds, FORCE_VIEW, fields=FORCE_FIELDS)
        transform = resample_and_emit
    ids = ids_of(Path(a["data"]), a["ids"] == "pointcloud")
    t0, c0 = time.perf_counter(), time.process_time()
    guideloom.export_to_numpy(a["view"], a["out"], dataset=ds, sim_ids=ids,
                              record_transform=transform, client=a["client"] or None)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    manifest = json.loads((Path(a["out"]) / "export.json").read_text())
    hashed = sum(os.path.getsize(Path(a["out"]) / f"{alias}.npy")
                 for alias in manifest["fields"]) if "checksums" in manifest else 0
    return {"export_s": seconds, "cpu_s": cpu, "checksum_s": spent[0],
            "mode": manifest["placement"]["mode"], "count": manifest["count"],
            "checksums": "checksums" in manifest, "hashed_bytes": hashed}


def child_verify(a: dict) -> dict:
    """``Export.verify()`` of a finished export."""
    import guideloom

    report = guideloom.load_export(a["out"]).verify()
    return {"seconds": report.seconds, "bytes": report.bytes, "rows": report.rows}


CHILDREN = {"export": child_export, "verify": child_verify}


# --- the parent --------------------------------------------------------------------------------
def hash_table(quick: bool) -> dict[str, float]:
    """GB/s of each candidate on a pointcloud-row-sized buffer and on 4 kB buffers."""
    import numpy as np
    import xxhash

    candidates = {
        "xxh3_64": xxhash.xxh3_64_intdigest,
        "xxh3_128": xxhash.xxh3_128_intdigest,
        "crc32 (zlib)": zlib.crc32,
        "adler32 (zlib)": zlib.adler32,
        "sha256": lambda b: hashlib.sha256(b).digest(),
        "blake2b": lambda b: hashlib.blake2b(b).digest(),
        "md5": lambda b: hashlib.md5(b).digest(),
    }
    rng = np.random.default_rng(0)
    print("1. HASH THROUGHPUT, one core, data in cache, GB/s (best of 3)")
    print(f"  {'':16s} {'25.6 MB buffer':>15s} {'4 kB buffers':>13s}")
    rates = {}
    for name, fn in candidates.items():
        row = []
        for size in (25_600_000, 4096):
            buf = memoryview(rng.integers(0, 255, size, dtype=np.uint8))
            reps = max(2, int((2e7 if quick else 2e8) // size))
            fn(buf)
            best = min(_timed(fn, buf, reps) for _ in range(3))
            row.append(size / best / 1e9)
        rates[name] = row[0]
        print(f"  {name:16s} {row[0]:15.2f} {row[1]:13.2f}")
    return rates


def _timed(fn: Any, buf: Any, reps: int) -> float:
    t0 = time.perf_counter()
    for _ in range(reps):
        fn(buf)
    return (time.perf_counter() - t0) / reps


def run_child(name: str, args: dict, checksums: bool) -> dict:
    env = {**os.environ, SWITCH_ENV: "1" if checksums else "0",
           "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, str(SCRIPT), "--child", name, json.dumps(args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    lines = [x for x in proc.stdout.splitlines() if x.startswith(RESULT)]
    if proc.returncode != 0 or not lines:
        tail = "\n".join((proc.stderr or proc.stdout).splitlines()[-15:])
        raise RuntimeError(f"child {name} failed (exit {proc.returncode}):\n{tail}")
    return json.loads(lines[-1][len(RESULT):])


def stats(values: list[float]) -> str:
    return (f"{statistics.median(values):.3f} [{min(values):.3f}-{max(values):.3f}]"
            if len(values) > 1 else f"{values[0]:.3f}")


def compare(label: str, args: dict, reps: int) -> tuple[str, float, float, float, float]:
    """Interleaved on/off runs after one warm-up pair; print the line; return the ratio."""
    on, off = [], []
    for rep in range(reps + 1):
        order = (True, False) if rep % 2 == 0 else (False, True)
        for checksums in order:
            shutil.rmtree(args["out"], ignore_errors=True)
            res = run_child("export", args, checksums)
            assert res["checksums"] == checksums, res
            if rep:
                (on if checksums else off).append(res)
    on_s = [r["export_s"] for r in on]
    off_s = [r["export_s"] for r in off]
    ratio = statistics.median(on_s) / statistics.median(off_s)
    paired = statistics.median(a / b for a, b in zip(on_s, off_s, strict=True))
    best = min(on_s) / min(off_s)
    cpu = statistics.median(r["cpu_s"] for r in on) / statistics.median(r["cpu_s"] for r in off)
    share = statistics.median(r["checksum_s"] / r["export_s"] for r in on)
    hashed = on[0]["hashed_bytes"]
    print(f"  {label} ({on[0]['count']} rows, {on[0]['mode']}, {hashed / 1e9:.2f} GB hashed)")
    print(f"    checksums on  {stats(on_s):>26s} s wall, "
          f"{stats([r['cpu_s'] for r in on]):>26s} s cpu")
    print(f"    checksums off {stats(off_s):>26s} s wall, "
          f"{stats([r['cpu_s'] for r in off]):>26s} s cpu")
    print(f"    on/off: wall {ratio:.3f} (medians), {paired:.3f} (median of paired runs), "
          f"{best:.3f} (best runs), cpu {cpu:.3f} (medians); time spent taking checksums "
          "(timed inside the 'on' runs): "
          f"{stats([r['checksum_s'] for r in on])} s = {share * 100:.2f}% of the export "
          f"(goal <= 5%: {'MET' if share <= GOAL - 1 else 'NOT MET'})")
    cmd = [sys.executable, str(SCRIPT), "--child", "export", json.dumps(args)]
    print(f"    command: {SWITCH_ENV}=0|1 {shlex.join(cmd)}")
    return label, ratio, best, cpu, share


def ids_of(data: Path, pointcloud: bool) -> list[int]:
    with open(data / "process_parameters.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return [int(r["index"]) for r in rows
            if not pointcloud or r["has_pointcloud"].lower() == "true"]


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        print(RESULT + json.dumps(CHILDREN[sys.argv[2]](json.loads(sys.argv[3]))), flush=True)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--reps", type=int, default=5, help="measured runs per setting")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--quick", action="store_true",
                        help="4 real-size and 200 small experiments, 2 runs (a smoke test)")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    from guideloom.demo import cached_demo_data

    n_big, n_small, reps = (4, 200, 2) if args.quick else (24, 2000, args.reps)
    big = cached_demo_data(args.cache, n_big, REAL_SCAN, "zip")
    small = cached_demo_data(args.cache, n_small, SMALL_SCAN, "zip")
    print(f"data: {big} and {small} (cached_demo_data); {os.cpu_count()} cores; "
          f"python {sys.version.split()[0]}\n")
    hash_table(args.quick)
    print(f"\n2. EXPORT WITH CHECKSUMS ON vs OFF, {reps} interleaved runs per setting after a "
          "warm-up pair, fresh process each, export call timed, median [min-max]")
    work = Path(tempfile.mkdtemp(prefix="gl-checksum-cost-"))
    pc = {"data": str(big), "ids": "pointcloud", "view": PC_VIEW, "client": "sync"}
    jobs = [
        ("pointcloud-op10 to npy, real-size", pc),
        ("force-signals to npy, real-size",
         {"data": str(big), "ids": "all", "view": FORCE_VIEW, "client": "sync"}),
        (f"force-signals to npy, {n_small} small",
         {"data": str(small), "ids": "all", "view": FORCE_VIEW, "client": "sync"}),
    ]
    try:
        results = [compare(label, {**job, "out": str(work / "out")}, reps)
                   for label, job in jobs]
        print("\n3. Export.verify() of the pointcloud export (page cache warm: just written)")
        shutil.rmtree(work / "out", ignore_errors=True)
        run_child("export", {**pc, "out": str(work / "out")}, True)
        v = run_child("verify", {"out": str(work / "out")}, True)
        print(f"  {v['rows']} rows, {v['bytes'] / 1e9:.2f} GB in {v['seconds']:.3f} s "
              f"({v['bytes'] / v['seconds'] / 1e9:.1f} GB/s)")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("\nSUMMARY: checksums on / off (wall seconds: medians and best runs; cpu seconds: "
          "medians) and the share of the export spent taking checksums (goal <= 5%)")
    for label, ratio, best, cpu, share in results:
        print(f"  {label:36s} wall {ratio:.3f}  best {best:.3f}  cpu {cpu:.3f}  "
              f"share {share * 100:5.2f}%  {'MET' if share <= GOAL - 1 else 'NOT MET'}")


if __name__ == "__main__":
    main()
