"""The pointcloud stage's memory line by line: which line of ``guideloom/preprocess/pointcloud/``
reaches the peak, and which arrays are alive there.

Run: ``python3 benchmarks/pointcloud_lines.py [--id 7] [--shape 2000 3200] [--rf-trees 10]
[--top 25] [--cache DIR]``

One experiment of benchmarks/preprocess_pointcloud.py's data (the same cache, the same cached
forests: run that benchmark once first, with the same ``--rf-trees``) is processed once under
tracemalloc (numpy's buffers; scipy's k-d tree nodes are not seen) with a line tracer on the
stage's own modules. At every line event the traced peak since the previous event is charged to
the line each frame of the stage is executing (a call's line is charged with everything its
callee allocated), then the peak is reset. Printed: the lines with the highest peaks (MiB over
the traced size before the experiment, and as a multiple of the experiment's working set: raw
``z`` and ``luminescence`` of both operations plus the processed arrays written), and the
arrays alive at the highest point between two lines (a snapshot grouped by the line that
allocated them).
"""

from __future__ import annotations

import argparse
import linecache
import sys
import tracemalloc
from pathlib import Path
from types import FrameType
from typing import Any

import h5py

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks import preprocess_pointcloud as bench  # noqa: E402
from tests import pointcloud_helpers as ph  # noqa: E402

PACKAGE = str(REPO / "guideloom" / "preprocess" / "pointcloud")
MIB = 2**20
#: A snapshot is taken when the live traced size passes the best one by this much.
SNAPSHOT_STEP = 4 * MIB


class LineMemory:
    """A line tracer charging tracemalloc's peak between events to the executing lines."""

    def __init__(self) -> None:
        self.peaks: dict[tuple[str, int], int] = {}
        self.text: dict[tuple[str, int], str] = {}
        self.best_live = 0
        self.best_at: tuple[str, int] | None = None
        self.snapshot: tracemalloc.Snapshot | None = None
        self._last: dict[int, int] = {}

    def _charge(self, frame: FrameType | None, own_line: int | None) -> None:
        live, peak = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        first = True
        while frame is not None:
            name = frame.f_code.co_filename
            if name.startswith(PACKAGE):
                line = own_line if first and own_line is not None else frame.f_lineno
                key = (name, line)
                if key not in self.text:  # the source as run (the file may change later)
                    self.text[key] = linecache.getline(name, line).strip()[:70]
                if peak > self.peaks.get(key, 0):
                    self.peaks[key] = peak
            first = False
            frame = frame.f_back
        if live > self.best_live + SNAPSHOT_STEP:
            self.best_live = live
            self.snapshot = tracemalloc.take_snapshot()
            self.best_live = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()

    def trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        """``sys.settrace``'s function: trace the stage's frames only."""
        if not frame.f_code.co_filename.startswith(PACKAGE):
            return None
        return self._local

    def _local(self, frame: FrameType, event: str, arg: Any) -> Any:
        key = id(frame)
        if event == "call":
            self._charge(frame.f_back, None)
        elif event in ("line", "return"):
            previous = self._last.get(key)
            self._charge(frame, previous)
            if event == "return":
                self._last.pop(key, None)
                return self._local
        self._last[key] = frame.f_lineno
        return self._local


def run(data: Path, labels: Path, out_dir: Path, params: dict, exp_id: int
        ) -> tuple[LineMemory, int]:
    """Process one experiment under the tracer; the tracer and the traced size before it (the
    forests and the stage's modules loaded)."""
    from guideloom.preprocess import pointcloud as pc
    from guideloom.preprocess.pointcloud import stage  # noqa: F401 - imported before the measure

    prepared = pc.prepare(params, out_dir=str(out_dir), data_dir=str(data), labels=str(labels),
                          rebuild=False)
    geometry = ph.EXPERIMENTS[exp_id].geometry
    for op in ("op10", "op20"):  # the forests, loaded before the measure (an idle worker's)
        prepared.bundles()[f"{geometry}_{op}"]
    target = out_dir.parent / "lines"
    target.mkdir(exist_ok=True)

    def one() -> None:
        with h5py.File(data / "h5" / f"{exp_id:04d}.h5", "r") as raw, \
                h5py.File(target / f"{exp_id:04d}.h5", "w") as f:
            ph.processed_means(f, ph.EXPERIMENTS[exp_id])
            pc.process_experiment(raw, f, params=params, prepared=prepared)

    tracer = LineMemory()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        tracer.best_live = before
        tracemalloc.reset_peak()
        sys.settrace(tracer.trace)
        try:
            one()
        finally:
            sys.settrace(None)
    finally:
        tracemalloc.stop()
    return tracer, before


def report(tracer: LineMemory, before: int, working_set: int, top: int) -> list[str]:
    """The lines with the highest peaks, and the arrays alive at the highest point."""
    lines = [f"working set {working_set / MIB:.1f} MiB; traced peaks over the "
             f"{before / MIB:.1f} MiB traced before the experiment, by line (a call's line "
             "holds its callee's peak):"]
    ranked = sorted(tracer.peaks.items(), key=lambda item: -item[1])[:top]
    for (name, line), peak in ranked:
        over = peak - before
        text = tracer.text[(name, line)]
        lines.append(f"  {over / MIB:8.1f} MiB {over / working_set:5.2f}x  "
                     f"{Path(name).name}:{line:<4d} {text}")
    if tracer.snapshot is not None:
        lines.append(f"alive at the highest point between lines "
                     f"({(tracer.best_live - before) / MIB:.1f} MiB over the start), by the "
                     "line that allocated it:")
        for stat in tracer.snapshot.statistics("lineno")[:top]:
            frame = stat.traceback[0]
            if stat.size < MIB:
                break
            text = linecache.getline(frame.filename, frame.lineno).strip()[:60]
            lines.append(f"  {stat.size / MIB:8.1f} MiB  {Path(frame.filename).name}:"
                         f"{frame.lineno:<4d} {text}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--id", type=int, default=7, help="the experiment (default 7)")
    parser.add_argument("--shape", type=int, nargs=2, default=(2000, 3200))
    parser.add_argument("--rf-trees", type=int, default=None)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--cache", type=Path,
                        default=Path.home() / ".cache" / "guideloom-bench" / "pointcloud")
    args = parser.parse_args()
    shape = (args.shape[0], args.shape[1])
    data, labels = bench.dataset(args.cache, shape)
    params = bench.params_for(shape)
    if args.rf_trees is not None:
        params["rf_n_estimators"] = args.rf_trees
    out_dir = args.cache / f"run-{shape[0]}x{shape[1]}-{args.rf_trees or 150}" / "guideloom"
    tracer, before = run(data, labels, out_dir, params, args.id)
    working_set = bench.working_set(data, out_dir.parent / "lines", args.id)["total"]
    print("\n".join(report(tracer, before, working_set, args.top)))


if __name__ == "__main__":
    main()
