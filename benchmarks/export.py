"""Export throughput: in-process vs a LocalCluster of 1 and 2 workers, in one run.

Run: ``python3 benchmarks/export.py [--force-n 1000] [--scan-n 12] [--cache DIR]``

Cases:
  (a) the seed's force-signals view with the resampling record_transform, to .npy
  (b) pointcloud-op10 at the real scan shape (2000 x 3200), to .npy

For each: experiments/s, decompressed MB/s (HDF5 bytes read), the peak resident memory of a
worker process (ru_maxrss of a fresh worker, so it is the peak of this export alone), and the
speed-up over one worker. For (b) it also exports half as many experiments with the same
partition size, to show that a worker's peak memory does not depend on the export's size.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from distributed import Client, LocalCluster

import guideloom
from guideloom.demo import cached_demo_data

SYNC = "sync"

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root
from guideloom.workflows.demo_transforms import resample_and_emit  # noqa: E402 - the seed's transform

CACHE = Path(tempfile.gettempdir()) / "guideloom-bench"


def peak_rss_mb() -> float:
    """Peak resident memory of this process in MB (Linux reports KB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def disk_write_mb_s(folder: Path, size_mb: int = 512) -> float:
    """Sequential write speed of the output disk, fsync included."""
    path = folder / "disk-probe.bin"
    block = np.zeros(16 << 20, dtype=np.uint8)
    t0 = time.perf_counter()
    with open(path, "wb") as fh:
        for _ in range(size_mb // 16):
            fh.write(block)
        fh.flush()
        os.fsync(fh.fileno())
    seconds = time.perf_counter() - t0
    path.unlink()
    return size_mb * (1 << 20) / seconds / 1e6


def warm_worker() -> None:
    """Import what a task needs, so that cluster start-up is not timed as export time."""
    import h5py  # noqa: F401

    import guideloom.export.run  # noqa: F401
    import guideloom.streaming  # noqa: F401


def run_case(name, export, n_records, bytes_per_record, out_root, workers_list):
    print(f"\n{name}: {n_records} experiments, {bytes_per_record / 1e6:.2f} MB decompressed each")
    print(f"{'where':12s} {'seconds':>8s} {'exp/s':>9s} {'MB/s':>8s} {'peak RSS/worker':>16s}"
          f" {'vs 1 worker':>12s}")
    base = None
    for workers in workers_list:
        out = out_root / f"{name}-{workers}"
        shutil.rmtree(out, ignore_errors=True)
        if workers == SYNC:
            t0 = time.perf_counter()
            export(out, SYNC)
            seconds = time.perf_counter() - t0
            peak = peak_rss_mb()
            label = "in-process"
        else:
            with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                              host="127.0.0.1", dashboard_address=None, silence_logs=50) as lc, \
                    Client(lc) as client:
                client.run(warm_worker)
                t0 = time.perf_counter()
                export(out, client)
                seconds = time.perf_counter() - t0
                peak = max(client.run(peak_rss_mb).values())
            label = f"{workers} worker{'s' if workers > 1 else ''}"
        rate = n_records / seconds
        if workers == 1:
            base = rate
        ratio = f"{rate / base:.2f}x" if base and workers != SYNC else ""
        print(f"{label:12s} {seconds:8.2f} {rate:9.1f} {rate * bytes_per_record / 1e6:8.1f}"
              f" {peak:13.0f} MB {ratio:>12s}")
        shutil.rmtree(out, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--force-n", type=int, default=1000)
    parser.add_argument("--scan-n", type=int, default=24)
    parser.add_argument("--cache", type=Path, default=CACHE)
    args = parser.parse_args()
    out_root = args.cache / "exports"
    out_root.mkdir(parents=True, exist_ok=True)

    # (a) force-signals: many experiments; scans kept small so the dataset fits the disk
    force_dir = cached_demo_data(args.cache, args.force_n, (100, 160), "zip")
    ds = guideloom.load(data_dir=force_dir)
    guideloom.add_view(ds, "force-signals", fields={
        "force": "force_data", "geometry": "process-parameters/geometry",
        "blankholder_force": "process-parameters/blankholder_force",
        "split": "process-parameters/split"})
    with guideloom.open_h5(0, dataset=ds) as f:
        force_bytes = f["force/data"].nbytes

    def force_export(out, client):
        guideloom.export_to_numpy("force-signals", out, dataset=ds, client=client,
                                  record_transform=resample_and_emit)

    run_case("force-signals", force_export, args.force_n, force_bytes, out_root,
             [SYNC, 1, 2])

    # (b) pointcloud-op10 at the real scan shape
    for n in (args.scan_n, args.scan_n // 2):
        scan_dir = cached_demo_data(args.cache, n, (2000, 3200), "zip")
        scan_ds = guideloom.load(data_dir=scan_dir)
        index = scan_ds.index()
        ids = [i for i in index.ids if index.row(i)["has_pointcloud"]]
        scan_bytes = 2 * 2000 * 3200 * 4

        def scan_export(out, client, scan_ds=scan_ds, ids=ids):
            guideloom.export_to_numpy("pointcloud-op10", out, dataset=scan_ds, sim_ids=ids,
                                      client=client, partition_size=1)

        workers = [SYNC, 1, 2] if n == args.scan_n else [2]
        run_case(f"pointcloud-op10 to npy (n={n})", scan_export, len(ids), scan_bytes,
                 out_root, workers)
        if n == args.scan_n:
            def scan_zarr(out, client, scan_ds=scan_ds, ids=ids):
                guideloom.export_to_zarr("pointcloud-op10", out, dataset=scan_ds, sim_ids=ids,
                                         client=client, partition_size=1)

            run_case(f"pointcloud-op10 to zarr/lz4 (n={n})", scan_zarr, len(ids), scan_bytes,
                     out_root, [1, 2])
    print(f"\ndisk write floor: {disk_write_mb_s(out_root):.0f} MB/s sequential with fsync "
          "(an uncompressed op10 row is 51.2 MB)")


if __name__ == "__main__":
    main()
