"""Per-record cost of reading small records (where per-field checks weigh most).

Run: ``python3 benchmarks/record_open_cost.py [--n 36] [--repeats 15]``

Reads every record of the ``force-curve`` view (one field) and of ``pointcloud-op10``
(two fields) from the loose and the zipped demo layout with
:class:`guideloom.read.records.RecordReader`, warm page cache; prints the microseconds per record
of the fastest of ``--repeats`` passes (the fastest, so that other processes' load on a shared
machine weighs least) and the cost of one self-containment check of a chunked field. Run it
on two checkouts to compare a change of the record path (e.g. the self-containment check of
each HDF5 dataset, issue 22 B13).

It also prices the check of a chunked dataset's index for chunks sharing bytes on the h5py
path (issue 38): the check (h5py's ``chunk_iter`` and one pass over the extents) against a
read of the same dataset, the fast path's and h5py's, for a pointcloud field of a real-size
scan (``--scan 2000x3200``: 6.4 million float32 points in 512 gzip chunks; ``--scan 0``
leaves it out).
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import h5py

import guideloom
from guideloom.demo import make_demo_data
from guideloom.read.records import RecordReader
from guideloom.select.selection import select


def per_record_us(view: str, data_dir: Path, repeats: int) -> float:
    """Microseconds per record of the fastest of ``repeats`` passes over every record."""
    ds = guideloom.load(data_dir=data_dir)
    where = (lambda r: r["has_pointcloud"]) if view.startswith("pointcloud") else None
    selection = select(ds, data_dir, where=where)
    plan = list(zip(selection.locations, selection.rows, strict=True))
    reader = RecordReader(ds.view(view))
    for loc, row in plan:  # warm: page cache, descriptors
        reader.read(loc, row)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for loc, row in plan:
            reader.read(loc, row)
        times.append((time.perf_counter() - t0) / len(plan) * 1e6)
    return min(times)


def check_us(data_dir: Path, calls: int = 20000) -> float | None:
    """Microseconds of one self-containment check of an open dataset (None before B13)."""
    try:
        from guideloom.read.hdf5 import check_self_contained
    except ImportError:
        return None
    ds = guideloom.load(data_dir=data_dir)
    loc = select(ds, data_dir).locations[0]
    fid = h5py.h5f.open(str(loc.path).encode(), h5py.h5f.ACC_RDONLY)
    dsid = h5py.h5d.open(fid, b"force/data")  # chunked: the check needs its property list
    fileno = fid.fileno
    best = math.inf
    for _ in range(9):  # the fastest batch: the cost without other processes' load
        t0 = time.perf_counter()
        for _ in range(calls // 9):
            check_self_contained(dsid, fileno, loc, "force/data")
        best = min(best, (time.perf_counter() - t0) / (calls // 9) * 1e6)
    return best


def best_ms(fn, repeats: int) -> float:
    """Milliseconds of the fastest of ``repeats`` calls of ``fn``."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times) * 1e3


def chunk_check_cost(root: Path, scan: tuple[int, int], repeats: int) -> None:
    """Print the cost of the shared-chunk check of one scan-size pointcloud field against
    reading it (page cache warm)."""
    import numpy as np

    from guideloom.fastread import RawSource, read_dataset
    from guideloom.read.hdf5 import check_chunks_apart
    from guideloom.read.locations import Location

    data = root / f"scan-{scan[0]}x{scan[1]}"
    make_demo_data(data, n=3, scan_shape=scan, layout="loose", seed=0)
    path = next(p for p in sorted((data / "h5").glob("*.h5"))
                if "pointcloud" in h5py.File(p, "r"))
    loc = Location(sim_id=0, path=str(path))
    fid = h5py.h5f.open(str(path).encode(), h5py.h5f.ACC_RDONLY)
    dsid = h5py.h5d.open(fid, b"pointcloud/op10/z")
    dcpl = dsid.get_create_plist()
    raw = RawSource.checked(fid.get_vfd_handle())
    out = np.empty(dsid.shape, dsid.dtype)
    chunks = check_chunks_apart(dsid, dcpl, loc, "pointcloud/op10/z")
    assert chunks is not None
    check = best_ms(lambda: check_chunks_apart(dsid, dcpl, loc, "pointcloud/op10/z"),
                    repeats * 4)
    fast = best_ms(lambda: read_dataset(dsid, raw, out=out, dcpl=dcpl, chunks=chunks), repeats)
    slow = best_ms(lambda: dsid.read(h5py.h5s.ALL, h5py.h5s.ALL, out), repeats)
    one_by_one = best_ms(lambda: [dsid.get_chunk_info(i) for i in range(len(chunks))], 3)
    print(f"shared-chunk check of a {scan[0]}x{scan[1]} pointcloud field ({len(chunks)} "
          f"chunks, {out.nbytes / 1e6:.1f} MB): {check:.3f} ms; read by the fast path "
          f"{fast:.1f} ms ({check / fast:.1%}), by h5py {slow:.1f} ms ({check / slow:.1%}); "
          f"without chunk_iter (HDF5 < 1.12.3: get_chunk_info per chunk) {one_by_one:.1f} ms")
    dsid.close()
    fid.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=36)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--scan", default="2000x3200", help="scan shape of the chunk-check "
                        "case, e.g. 2000x3200; 0 leaves it out")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="record-open-cost-"))
    for layout in ("loose", "zip"):
        data = root / layout
        make_demo_data(data, n=args.n, layout=layout, seed=0)
        for view in ("force-curve", "pointcloud-op10"):
            print(f"{layout:5s} {view:16s} {per_record_us(view, data, args.repeats):8.1f} "
                  "us/record")
    cost = check_us(root / "loose")
    if cost is not None:
        print(f"self-containment check of one field: {cost:.2f} us")
    if args.scan != "0":
        y, x = (int(v) for v in args.scan.split("x"))
        chunk_check_cost(root, (y, x), args.repeats)


if __name__ == "__main__":
    main()
