"""Exports straight from a remote release vs "download everything, then export" (issue 21, 5).

Run: ``python3 benchmarks/remote.py [--n 40] [--scan 800x1280] [--latency 0.02]
[--bandwidth 5e7] [--small-n 2000] [--no-small] [--cache DIR]``

One run serves a zipped demo release with ``python -m tests.dataverse_server --static``
(``--latency`` seconds before every answer, one ``--bandwidth`` cap in bytes per second shared
by all bodies, so loopback behaves like a link) and prints:

a. the shipped ``force_signals`` workflow with ``--data-dir`` the release's URL: bytes the
   server sent as a share of the archives' bytes (goal <= 2%) and seconds, against fetching
   every file of the release through the same capped server and then running the workflow
   on the local copy (goal >= 20x faster);
b. the ``pointcloud_op10`` workflow from the URL (capped) against the same workflow on the
   local files (not capped): experiments per second and the ratio (goal >= 50%);
c. a second pass of (a) in a fresh process with the cache the first left: requests and bytes,
   and how many of those were metadata (goal: none). The server sends ``ETag`` and
   ``Last-Modified``, as nginx and S3 do (``--no-validators``: a server that names no version,
   where every scan reads each archive's directory again, one request per archive, so that an
   archive replaced by another of the same size is not read through the old one's);
d. ``benchmarks/small_records.py``'s 2,000-experiment export vs rddac 2.0 (its own output).

Beside each remote figure the floors: the fetched bytes' transfer time at the cap, and the
latency of its requests were they issued one after another (records are fetched ahead,
``$GUIDELOOM_REMOTE_READAHEAD``, default 8, so a run can beat the second). Every export runs
in a fresh process (``--child``), timed around the export call (imports not counted); each
remote run gets its own fresh cache unless it is the second pass.
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
import urllib.request
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve()
REPO = SCRIPT.parents[1]
DEFAULT_CACHE = Path(tempfile.gettempdir()) / "guideloom-bench"
BYTES_GOAL, SPEED_GOAL, THROUGHPUT_GOAL = 0.02, 20.0, 0.5


# --- children ----------------------------------------------------------------------------
def child_export(a: dict) -> dict:
    """Run a shipped workflow on ``a["data"]`` in-process; time the export call."""
    os.environ["GUIDELOOM_CACHE_DIR"] = a["cache"]
    from guideloom.workflows import find_shipped

    from guideloom.export import run_export
    from guideloom.h5native.stats import native_stats
    from guideloom.workflow import load_workflow

    wf = load_workflow(find_shipped(a["workflow"]), data_dir=a["data"], output=a["out"])
    spec = wf.to_spec(overwrite=True)
    t0 = time.perf_counter()
    result = run_export(spec, client="sync", show_progress=False)
    seconds = time.perf_counter() - t0
    return {"export_s": seconds, "n": len(getattr(result, "sim_ids", []) or []),
            "stats": native_stats()}


CHILDREN = {"export": child_export}


# --- the parent ----------------------------------------------------------------------------
class Server:
    """``python -m tests.dataverse_server --static SITE`` as a process, and its counters."""

    def __init__(self, site: Path, latency: float, bandwidth: float, workdir: Path,
                 validators: bool = True):
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.cmd = [sys.executable, "-m", "tests.dataverse_server", "--static", str(site),
                    "--latency", str(latency), "--bandwidth", str(bandwidth),
                    *(["--validators"] if validators else [])]
        self.proc = subprocess.Popen(self.cmd, cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                                     stdout=subprocess.PIPE, text=True)
        self.url = json.loads(self.proc.stdout.readline())["url"].rstrip("/")

    def counts(self, reset: bool = False) -> dict[str, Any]:
        q = "?reset=1" if reset else ""
        with urllib.request.urlopen(f"{self.url}/_control/counts{q}", timeout=30) as resp:
            return json.loads(resp.read())

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=30)


def run_child(name: str, a: dict) -> dict:
    cmd = [sys.executable, str(SCRIPT), "--child", name, json.dumps(a)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(cmd, cwd=a.get("cwd") or tempfile.gettempdir(), env=env,
                          capture_output=True, text=True, timeout=3600)
    if done.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{done.stderr[-3000:]}")
    line = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def fetch_all(url: str, release: Path, into: Path) -> int:  # url: the release's URL
    """Every file of the release fetched whole through the server (a plain download)."""
    total = 0
    for path in sorted(release.rglob("*")):
        if not path.is_file() or path.name.startswith("."):
            continue
        rel = path.relative_to(release).as_posix()
        target = into / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        with urllib.request.urlopen(f"{url}/{rel}", timeout=600) as resp, \
                target.open("wb") as out:
            total += shutil.copyfileobj(resp, out, 1 << 20) or target.stat().st_size
    return total


def _zip_counts(c: dict) -> tuple[int, int]:
    req = sum(n for p, n in c["requests"].items() if p.endswith(".zip"))
    sent = sum(n for p, n in c["bytes"].items() if p.endswith(".zip"))
    return req, sent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=40)
    parser.add_argument("--scan", default="800x1280", help="scan shape YxX of the demo data")
    parser.add_argument("--latency", type=float, default=0.02)
    parser.add_argument("--bandwidth", type=float, default=5e7)
    parser.add_argument("--small-n", type=int, default=2000)
    parser.add_argument("--no-small", action="store_true", help="skip (d)")
    parser.add_argument("--no-validators", action="store_true",
                        help="the server sends no ETag or Last-Modified")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--child", nargs=2, metavar=("NAME", "ARGS_JSON"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        name, raw = args.child
        print("RESULT " + json.dumps(CHILDREN[name](json.loads(raw))), flush=True)
        return

    sys.path.insert(0, str(REPO))
    from guideloom.demo import cached_demo_data

    y, x = (int(v) for v in args.scan.split("x"))
    data = cached_demo_data(args.cache.expanduser().resolve(), args.n, (y, x), "zip")
    work = Path(tempfile.mkdtemp(prefix="gl-remote-bench-"))
    archives = sum(p.stat().st_size for p in data.glob("*.zip"))
    mb, cap = 1 << 20, args.bandwidth
    # the release at /<its folder name>
    server = Server(data.parent, args.latency, cap, work, validators=not args.no_validators)
    url = f"{server.url}/{data.name}"

    def floor(requests: int, sent: int) -> str:
        return (f"floor {sent / cap:.2f} s of transfer at the cap; {requests * args.latency:.2f}"
                " s of latency were the requests issued one after another")

    def remote(workflow: str, cache: Path) -> tuple[dict, int, int]:
        server.counts(reset=True)
        r = run_child("export", {"workflow": workflow, "data": url, "cache": str(cache),
                                 "out": str(work / f"out-{workflow}"), "cwd": str(work)})
        req, sent = _zip_counts(server.counts())
        return r, req, sent

    try:
        print(f"remote release: {args.n} zipped demo experiments, scans {y}x{x}, "
              f"{archives / mb:.1f} MiB of archives ({archives / args.n / mb:.2f} MiB each), "
              f"served with {args.latency * 1e3:.0f} ms latency per request and a "
              f"{cap / 1e6:.0f} MB/s cap")
        print(f"  server: {' '.join(server.cmd)}; read-ahead "
              f"{os.environ.get('GUIDELOOM_REMOTE_READAHEAD', '8')} records")
        print(f"  command: python3 benchmarks/remote.py --n {args.n} --scan {args.scan} "
              f"--latency {args.latency} --bandwidth {cap:g}"
              + (" --no-small" if args.no_small else f" --small-n {args.small_n}"))

        # (a) force-signals: remote vs download + local
        cache1 = work / "cache-a"
        ra, req_a, sent_a = remote("force_signals", cache1)
        server.counts(reset=True)
        t0 = time.perf_counter()
        fetch_all(url, data, work / "download")
        download_s = time.perf_counter() - t0
        _, dl_sent = _zip_counts(server.counts())
        la = run_child("export", {"workflow": "force_signals", "data": str(work / "download"),
                                  "cache": str(work / "cache-l"), "out": str(work / "out-l"),
                                  "cwd": str(work)})
        share = sent_a / archives
        baseline = download_s + la["export_s"]
        speed = baseline / ra["export_s"]
        print("\na. force_signals workflow (in-process export call, fresh process)")
        print(f"  remote:   {ra['export_s']:.2f} s, {req_a} requests, {sent_a / 1e6:.2f} MB "
              f"= {share * 100:.2f}% of the archives (native {ra['stats']['native']}, "
              f"h5py fallbacks {ra['stats']['fallbacks']}); {floor(req_a, sent_a)}")
        print(f"  download: {download_s:.2f} s for {dl_sent / 1e6:.1f} MB of archives (floor "
              f"{dl_sent / cap:.2f} s at the cap) + local export {la['export_s']:.2f} s "
              f"= {baseline:.2f} s")
        print(f"  goal: <= {BYTES_GOAL * 100:.0f}% of the bytes: {share * 100:.2f}%, "
              f"{'met' if share <= BYTES_GOAL else 'NOT met'}; >= {SPEED_GOAL:.0f}x faster: "
              f"{speed:.1f}x, {'met' if speed >= SPEED_GOAL else 'NOT met'}")

        # (c) the second pass of (a), fresh process, the cache of the first
        rc, req_c, sent_c = remote("force_signals", cache1)
        n_archives = len(list(data.glob("*.zip")))
        # per record one chunk read; per archive one HEAD that checks it is unchanged
        meta_req = req_c - rc["stats"]["native"] - rc["stats"]["fallbacks"] - n_archives
        if args.no_validators:  # each archive's directory is read again: its version
            meta_req -= n_archives
        print("\nc. second pass of (a) in a fresh process with the cache the first left")
        print(f"  {rc['export_s']:.2f} s, {req_c} requests, {sent_c / 1e6:.3f} MB (first pass "
              f"{req_a} requests, {sent_a / 1e6:.3f} MB); records read natively "
              f"{rc['stats']['native']}, h5py fallbacks {rc['stats']['fallbacks']}; "
              f"{floor(req_c, sent_c)}")
        beyond = ("one HEAD and one directory read per archive (no validators)"
                  if args.no_validators else "one HEAD per archive")
        print(f"  metadata requests (beyond one data read per record and {beyond}, "
              f"{n_archives} archives): {meta_req}; "
              f"goal 0: {'met' if meta_req <= 0 else 'NOT met'}")

        # (b) pointcloud-op10: remote (capped) vs local (not capped)
        rb, req_b, sent_b = remote("pointcloud_op10", work / "cache-b")
        lb = run_child("export", {"workflow": "pointcloud_op10", "data": str(data),
                                  "cache": str(work / "cache-lb"), "out": str(work / "out-lb"),
                                  "cwd": str(work)})
        n_b = max(rb["stats"]["native"] + rb["stats"]["fallbacks"], 1)
        ratio = lb["export_s"] / rb["export_s"]
        print("\nb. pointcloud_op10 workflow: remote at the cap vs local files (no cap)")
        print(f"  remote: {rb['export_s']:.2f} s, {n_b / rb['export_s']:.1f} experiments/s, "
              f"{req_b} requests, {sent_b / 1e6:.1f} MB ({sent_b / rb['export_s'] / 1e6:.1f} "
              f"MB/s); {floor(req_b, sent_b)}")
        print(f"  local:  {lb['export_s']:.2f} s, {n_b / lb['export_s']:.1f} experiments/s")
        print(f"  goal: remote >= {THROUGHPUT_GOAL * 100:.0f}% of local throughput: "
              f"{ratio * 100:.0f}%, {'met' if ratio >= THROUGHPUT_GOAL else 'NOT met'} "
              f"(the transfer floor alone allows "
              f"{min(1.0, lb['export_s'] / max(sent_b / cap, 1e-9)) * 100:.0f}%)")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)

    if not args.no_small:
        print(f"\nd. {args.small_n} small local experiments vs rddac 2.0 "
              "(benchmarks/small_records.py):", flush=True)
        cmd = [sys.executable, str(SCRIPT.parent / "small_records.py"), "--n",
               str(args.small_n), "--reps", "1", "--cache", str(args.cache)]
        print(f"  command: {' '.join(cmd)}", flush=True)
        subprocess.run(cmd, check=True, cwd=tempfile.gettempdir(),
                       env={**os.environ, "PYTHONPATH": str(REPO)})


if __name__ == "__main__":
    main()
