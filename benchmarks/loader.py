"""Loader throughput.

* batches/s of ``StatefulDataLoader.from_export`` (batch 256, a ``force-signals`` export of the
  demo data, forces resampled to (1000, 8) float32) against
  ``torch.utils.data.DataLoader(export, batch_size=256, shuffle=True)`` with 0 and 2 workers;
* windows/s of ``StatefulDataLoader.from_storage`` over the stream benchmark data of
  ``benchmarks/stream_read.py`` (50 M int32 tokens plus uint32 document ids, 8 shards),
  shuffled 2048-token windows in batches of 8.

Run from the repository root::

    python3 benchmarks/loader.py                   # 2048 experiments, 50 M tokens, ~40 s
    python3 benchmarks/loader.py --only stream --tokens 5e6 --workdir /tmp/gl-bench

The data is generated under ``--workdir`` (a temporary directory by default) and reused when
the directory already holds it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import guideloom
from guideloom import StatefulDataLoader

BATCH = 256
FORCE_POINTS = 1000


def resample_and_emit(record: dict[str, Any]) -> dict[str, Any]:
    """Resample the force table to a fixed (1000, 8) and derive small targets."""
    force = np.asarray(record["force"], dtype=np.float64)
    t_old = np.linspace(0.0, 1.0, force.shape[0])
    t_new = np.linspace(0.0, 1.0, FORCE_POINTS)
    resampled = np.stack([np.interp(t_new, t_old, force[:, c]) for c in range(force.shape[1])], 1)
    return {
        "force": resampled.astype(np.float32),
        "max_total_force": np.float32(force[:, 7].max()),
        "blankholder_force": np.float32(record["blankholder_force"]),
        "label_geometry": np.int8(0 if record["geometry"] == "concave" else 1),
    }


def build_export(workdir: Path, experiments: int) -> Path:
    """Write demo data and its ``force-signals`` export (once)."""
    from guideloom.streaming import export_to_numpy

    export_dir = workdir / f"force-signals-{experiments}"
    if (export_dir / "sim_ids.npy").exists():
        return export_dir
    data_dir = workdir / f"demo-{experiments}"
    started = time.perf_counter()
    guideloom.make_demo_data(data_dir, n=experiments, scan_shape=(4, 4), layout="loose", seed=0)
    ds = guideloom.load(data_dir)
    guideloom.add_view(
        ds,
        "force-signals",
        fields={
            "force": "force_data",
            "geometry": "process-parameters/geometry",
            "blankholder_force": "process-parameters/blankholder_force",
        },
    )
    export_to_numpy(
        "force-signals",
        export_dir,
        data_dir=data_dir,
        dataset=ds,
        record_transform=resample_and_emit,
    )
    print(f"built {experiments}-experiment export in {time.perf_counter() - started:.1f} s")
    return export_dir


def build_stream(workdir: Path, tokens: int) -> Any:
    """Write the stream benchmark data of ``benchmarks/stream_read.py`` (once).

    ``tokens`` int32 tokens with a uint32 document-id field, documents of 1..4095 tokens, spread
    over 8 shards.
    """
    from benchmarks.stream_read import DTYPE, make_documents, write

    directory = workdir / f"stream-{tokens}"
    if not directory.exists():
        write(directory, *make_documents(tokens, seed=0), shards=8)
    return guideloom.StreamStorage(directory, guideloom.StreamNumpyFormat(DTYPE))


def rate(batches: Callable[[], Iterable[Any]], seconds: float) -> tuple[float, int]:
    """Return (batches per second, batches) over whole passes lasting at least ``seconds``.

    One warm-up pass is not counted; every pass is a fresh ``iter()`` (worker start-up included,
    as in a training loop's epochs).
    """
    for _ in batches():
        pass
    count = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        for _ in batches():
            count += 1
    return count / (time.perf_counter() - started), count


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--experiments", type=int, default=2048)
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--tokens", type=float, default=50e6)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--only", choices=("export", "stream"), default=None)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)

    with tempfile.TemporaryDirectory() as scratch:
        workdir = args.workdir or Path(scratch)
        workdir.mkdir(parents=True, exist_ok=True)
        if args.only != "stream":
            bench_export(workdir, args.experiments, args.seconds)
        if args.only != "export":
            bench_stream(workdir, int(args.tokens), args.seconds)


def bench_export(workdir: Path, experiments: int, seconds: float) -> None:
    """Print batches/s of from_export against torch's DataLoader over the same export."""
    from guideloom.streaming import load_export

    export = load_export(build_export(workdir, experiments))
    print(f"export: {len(export)} samples, fields {export.fields}, batch {BATCH}")
    results: dict[str, float] = {}
    for workers in (0, 2):
        plain = torch.utils.data.DataLoader(
            export, batch_size=BATCH, shuffle=True, num_workers=workers
        )
        results[f"DataLoader(workers={workers})"], _ = rate(lambda p=plain: p, seconds)
    for workers in (0, 2):
        with StatefulDataLoader.from_export(
            export,
            device="cpu",
            local_batch_size=BATCH,
            shuffle=True,
            shuffle_seed=0,
            drop_last=False,
            num_workers=workers,
            prefetch=4,
        ) as loader:
            results[f"from_export(workers={workers})"], _ = rate(lambda lo=loader: lo, seconds)
    baseline = max(v for k, v in results.items() if k.startswith("DataLoader"))
    for key, value in results.items():
        print(f"{key:28s} {value:9.1f} batches/s  ({value / baseline:5.2f}x best DataLoader)")


def bench_stream(workdir: Path, tokens: int, seconds: float) -> None:
    """Print windows/s of from_storage over a token stream."""
    storage = build_stream(workdir, tokens)
    for workers in (0, 2):
        with StatefulDataLoader.from_storage(
            storage,
            sequence_length=2048,
            device="cpu",
            local_batch_size=8,
            shuffle=True,
            shuffle_seed=0,
            num_workers=workers,
            prefetch=4,
        ) as loader:
            per_second, _ = rate(lambda lo=loader: lo, seconds)
        print(
            f"from_storage(workers={workers})      {per_second * 8:9.0f} windows/s "
            f"(2048-token windows, {tokens} tokens)"
        )


if __name__ == "__main__":
    main()
