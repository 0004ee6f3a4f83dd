"""What ``verify_crc=True`` costs: CRC-32 throughput, then iter_view and export with it on and off.

Run: ``python3 benchmarks/crc_cost.py [--n 24] [--scan-shape 2000 3200] [--reps 3] [--cache DIR]``

One run prints, on the zipped demo data of ``guideloom.demo.cached_demo_data`` (real-size scans,
generated once under ``--cache``, default ``~/.cache/guideloom-bench``; stored members of about
19 MB each):

1. CRC-32 throughput on this machine: zlib's and libdeflate's (the ``deflate`` package, the one
   ``guideloom.read.zipmember`` uses) over a 64 MiB buffer in memory, and
   ``zipmember.member_crc`` over every member of the archives (pread in 4 MiB blocks, page
   cache warm).
2. ``iter_view`` of two views, each as one epoch with the check off, on (first epoch: every
   member is read whole once) and on again (a later epoch: the process remembers the members);
   ``force-curve`` reads a small table of each member (the worst case for the check),
   ``pointcloud-op10`` about half of each member.
3. An in-process (``client="sync"``) npy export of ``pointcloud-op10`` with the check off and on.

Timings are the median [min-max] of ``--reps`` interleaved repeats in this process, page cache
warm: on a cold cache the check also reads from disk the bytes of each member the view skips.
The machine may be shared and noisy: compare the ratios printed side by side.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import guideloom
from guideloom.demo import cached_demo_data
from guideloom.read import zipmember
from guideloom.read.scan import scan_locations
from guideloom.read.zipmember import member_data_offset

DEFAULT_CACHE = Path.home() / ".cache" / "guideloom-bench"
BUFFER_BYTES = 64 << 20


def median_text(values: list[float], unit: str = "s", fmt: str = "{:.3f}") -> str:
    """``median [min-max] unit``."""
    return (f"{fmt.format(statistics.median(values))} [{fmt.format(min(values))}-"
            f"{fmt.format(max(values))}] {unit}")


def crc_throughput(reps: int) -> dict[str, list[float]]:
    """GB/s of zlib.crc32 and of the CRC-32 zipmember uses, over one buffer in memory."""
    buf = os.urandom(BUFFER_BYTES)
    funcs = {"zlib.crc32": zlib.crc32,
             f"zipmember.crc32 ({zipmember.crc32.__module__})": zipmember.crc32}
    assert len({f(buf) & 0xFFFFFFFF for f in funcs.values()}) == 1, "the CRCs differ"
    out: dict[str, list[float]] = {name: [] for name in funcs}
    for _ in range(reps):
        for name, fn in funcs.items():
            t0 = time.perf_counter()
            fn(buf)
            out[name].append(len(buf) / (time.perf_counter() - t0) / 1e9)
    return out


def member_throughput(data: Path, reps: int) -> tuple[list[float], int, int]:
    """GB/s of ``zipmember.member_crc`` over every stored member of the dataset's archives."""
    locs = [loc for loc in scan_locations(guideloom.load(data_dir=data), data).values()
            if loc.member is not None and loc.stored]
    fds = {loc.path: os.open(loc.path, os.O_RDONLY) for loc in locs}
    try:
        starts = [(fds[loc.path], member_data_offset(fds[loc.path], loc), loc) for loc in locs]
        total = sum(loc.size for loc in locs)
        rates = []
        for _ in range(reps + 1):  # the first pass warms the page cache and is not counted
            t0 = time.perf_counter()
            for fd, start, loc in starts:
                crc, got = zipmember.member_crc(fd, start, loc.size)
                assert got == loc.size, loc.describe()
                assert crc == loc.crc, loc.describe()
            rates.append(total / (time.perf_counter() - t0) / 1e9)
        return rates[1:], len(locs), total
    finally:
        for fd in fds.values():
            os.close(fd)


def interleaved(cases: dict[str, Callable[[], object]], reps: int) -> dict[str, list[float]]:
    """Seconds of each case, run in turn within each repeat."""
    out: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(reps):
        for name, fn in cases.items():
            t0 = time.perf_counter()
            fn()
            out[name].append(time.perf_counter() - t0)
    return out


CHECK_SECONDS: list[float] = []  # time spent inside zipmember.member_crc, per call


def _timed_member_crc() -> None:
    """Wrap ``zipmember.member_crc`` to record the seconds of each check (the cost of the check
    itself, free of the noise of the rest of the epoch)."""
    real = zipmember.member_crc

    def timed(fd: int, start: int, size: int, block: int = zipmember.CRC_BLOCK) -> tuple[int, int]:
        t0 = time.perf_counter()
        try:
            return real(fd, start, size, block)
        finally:
            CHECK_SECONDS.append(time.perf_counter() - t0)

    zipmember.member_crc = timed


def epoch(view: str, data: Path, where, verify: bool, cold: bool) -> Callable[[], int]:
    def run() -> int:
        if cold:
            zipmember.forget_verified()
        return sum(1 for _ in guideloom.streaming.iter_view(view, data_dir=data, where=where,
                                                            verify_crc=verify))
    return run


def export_case(data: Path, scratch: Path, verify: bool) -> Callable[[], object]:
    counter = iter(range(10**6))

    def run() -> object:
        zipmember.forget_verified()
        target = scratch / f"{'on' if verify else 'off'}-{next(counter)}"
        return guideloom.export_to_numpy("pointcloud-op10", target, data_dir=data,
                                         where=lambda row: row["has_pointcloud"],
                                         client="sync", verify_crc=verify)
    return run


def print_ratios(title: str, times: dict[str, list[float]], base: str, reps: int) -> None:
    print(title)
    ref = statistics.median(times[base])
    for name, values in times.items():
        ratio = statistics.median(values) / ref
        print(f"  {name:34s} {median_text(values)}   x{ratio:.2f} of {base!r}")
    if CHECK_SECONDS:
        per_run = sum(CHECK_SECONDS) / reps
        print(f"  inside the CRC check: {per_run:.3f} s per checked run "
              f"({len(CHECK_SECONDS) // reps} members), {per_run / ref * 100:.1f}% of {base!r}")
    CHECK_SECONDS.clear()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=24)
    parser.add_argument("--scan-shape", type=int, nargs=2, default=(2000, 3200))
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    args = parser.parse_args()

    data = cached_demo_data(args.cache, args.n, args.scan_shape, "zip")
    _timed_member_crc()
    print(f"data: {data}")
    print("1. CRC-32 throughput (64 MiB in memory; members by pread from the page cache)")
    for name, rates in crc_throughput(max(args.reps, 5)).items():
        print(f"  {name:34s} {median_text(rates, 'GB/s', '{:.2f}')}")
    rates, n_members, total = member_throughput(data, args.reps)
    print(f"  {'zipmember.member_crc, ' + str(n_members) + ' members':34s} "
          f"{median_text(rates, 'GB/s', '{:.2f}')} ({total / 1e6:.0f} MB)")

    print(f"  the check reads every member once: {total / 1e6:.0f} MB, "
          f"{total / statistics.median(rates) / 1e9 * 1000:.0f} ms at the member_crc rate")
    with_pc = lambda row: row["has_pointcloud"]  # noqa: E731 - a filter, named for reuse
    for view, where in (("force-curve", None), ("pointcloud-op10", with_pc)):
        n = epoch(view, data, where, False, False)()  # warms the page cache and the handles
        CHECK_SECONDS.clear()
        times = interleaved({
            "verify_crc=False": epoch(view, data, where, False, False),
            "verify_crc=True, first epoch": epoch(view, data, where, True, True),
            "verify_crc=True, later epoch": epoch(view, data, where, True, False),
        }, args.reps)
        print_ratios(f"2. iter_view {view!r}, {n} records, one epoch", times, "verify_crc=False",
                     args.reps)

    with tempfile.TemporaryDirectory(prefix="crc-cost-") as scratch:
        times = interleaved({
            "verify_crc=False": export_case(data, Path(scratch), False),
            "verify_crc=True": export_case(data, Path(scratch), True),
        }, args.reps)
    print_ratios("3. export_to_numpy 'pointcloud-op10', client='sync'", times, "verify_crc=False",
                 args.reps)


if __name__ == "__main__":
    main()
