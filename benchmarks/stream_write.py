"""Benchmark: ``StreamStorage`` write throughput next to GuideLoom 1.1 on the same data.

Writes ``--tokens`` int32 tokens with a uint32 document-id field as one record per document
(1..4095 tokens, or exactly ``--append-tokens`` each) over ``--shards`` shards, with this
package and with GuideLoom 1.1 (``guideloom==1.1.0``, which needs Python 3.13: its side runs in
a subprocess of ``--gl11-python``, default ``/work/venv-gl11/bin/python``). Both write to the
same file system, in turn (A B, then B A), ``--repeats`` times, each run starting on a quiet
disk (``os.sync()`` before it, not timed: what the run before left to write back is not
charged to the next); the best tokens/s of each are printed, the median of the per-repeat
ratios is the figure (issue 42's goal: >= 1.2 with 8192-token appends), with the load average.
Both are timed until the data is durable: ours fsyncs each shard when it commits it (a group
commit: one fsync per shard, never per append; the shard's whole blocks were written with
direct I/O while it grew, ``guideloom/storage/append_file.py``) and renames it into place; 1.1
never fsyncs, so its side fsyncs every file it wrote and the directories after its writer
closes, inside its timing. Ours also writes what 1.1 does not: record offsets and the footer.
The GuideLoom 1.1 interpreter is found or made by ``benchmarks/venvs.py``.

Run from the repository root::

    python3 benchmarks/stream_write.py                          # 20 M tokens
    python3 benchmarks/stream_write.py --tokens 5e6             # quicker
    python3 benchmarks/stream_write.py --append-tokens 8192     # 8192-token appends
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from venvs import anchor_run, gl11_python

from guideloom import StreamNumpyFormat, StreamStorage

GOAL = 1.2  # issue 42: durable stream writes >= 1.2x GuideLoom 1.1 (8192-token appends)

DTYPE = np.dtype([("tokens", "<i4"), ("document_ids", "<u4")])

# Run by GuideLoom 1.1's Python: the same loop through its StreamStorage, tokens/s as JSON.
GL11_SIDE = """
import json, pathlib, sys, time
import numpy as np
from guideloom import StreamNumpyFormat, StreamStorage
tokens = np.load(sys.argv[2]); bounds = np.load(sys.argv[3]); shards = int(sys.argv[4])
dtype = np.dtype([("tokens", "<i4"), ("document_ids", "<u4")])
storage = StreamStorage(pathlib.Path(sys.argv[1]), StreamNumpyFormat(dtype))
documents = len(bounds) - 1
per_shard = -(-documents // shards)
started = time.perf_counter()
with storage.sync_writer() as writer:
    for doc in range(documents):
        begin, end = bounds[doc], bounds[doc + 1]
        writer.append(doc // per_shard, {"tokens": tokens[begin:end],
                                         "document_ids": np.full(end - begin, doc, dtype="<u4")})
import os
for path in sorted(pathlib.Path(sys.argv[1]).rglob("*"), reverse=True):  # durable, as ours
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
fd = os.open(sys.argv[1], os.O_RDONLY)
os.fsync(fd)
os.close(fd)
print(json.dumps({"tokens_per_s": len(tokens) / (time.perf_counter() - started)}))
"""


def make_documents(tokens: int, seed: int, append_tokens: int = 0) -> tuple[np.ndarray,
                                                                            np.ndarray]:
    """Return (tokens, document boundaries) with documents of 1..4095 tokens, or of exactly
    ``append_tokens`` each (the last one shorter)."""
    rng = np.random.default_rng(seed)
    lengths = (np.full(tokens // append_tokens + 1, append_tokens) if append_tokens
               else rng.integers(1, 4096, size=tokens // 1024 + 16))
    bounds = np.concatenate(([0], np.cumsum(lengths)))
    bounds = bounds[bounds < tokens]
    bounds = np.append(bounds, tokens)
    return rng.integers(0, 50_000, size=tokens, dtype=np.int32), bounds


def write_ours(directory: Path, tokens: np.ndarray, bounds: np.ndarray, shards: int) -> float:
    """Write the documents with this package; return tokens/s."""
    storage = StreamStorage(directory, StreamNumpyFormat(DTYPE))
    documents = len(bounds) - 1
    per_shard = -(-documents // shards)
    started = time.perf_counter()
    with storage.sync_writer() as writer:
        for doc in range(documents):
            begin, end = bounds[doc], bounds[doc + 1]
            ids = np.full(end - begin, doc, dtype="<u4")
            writer.append(doc // per_shard, {"tokens": tokens[begin:end], "document_ids": ids})
    return len(tokens) / (time.perf_counter() - started)


def write_gl11(python: Path, directory: Path, inputs: tuple[Path, Path], shards: int) -> float:
    """Write the same documents with GuideLoom 1.1 in a subprocess; return tokens/s."""
    done = anchor_run([str(python), "-c", GL11_SIDE, str(directory), str(inputs[0]),
                       str(inputs[1]), str(shards)], check=True)
    return float(json.loads(done.stdout.strip().splitlines()[-1])["tokens_per_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tokens", type=float, default=20e6)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--append-tokens", type=int, default=0,
                        help="tokens per append (0: documents of 1..4095 tokens)")
    parser.add_argument("--gl11-python", default=None,
                        help="a Python with GuideLoom 1.1 (default: benchmarks/venvs.py)")
    parser.add_argument("--dir", type=Path, default=None,
                        help="where to write (default: the temporary directory)")
    args = parser.parse_args()
    tokens, bounds = make_documents(int(args.tokens), seed=0,
                                    append_tokens=args.append_tokens)
    python = gl11_python(args.gl11_python)
    ours, theirs = [], []
    load = "load average {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        inputs = (root / "tokens.npy", root / "bounds.npy")
        np.save(inputs[0], tokens)
        np.save(inputs[1], bounds)

        def run_ours() -> None:
            os.sync()  # a quiet disk: nothing of the run before is left to write back
            ours.append(write_ours(root / "ours", tokens, bounds, args.shards))
            shutil.rmtree(root / "ours")

        def run_theirs() -> None:
            if python is None:
                return
            os.sync()
            theirs.append(write_gl11(python, root / "gl11", inputs, args.shards))
            shutil.rmtree(root / "gl11")

        for repeat in range(args.repeats):
            for run in ((run_ours, run_theirs) if repeat % 2 == 0 else (run_theirs, run_ours)):
                run()
    where = args.dir or tempfile.gettempdir()
    print(f"StreamStorage write: {len(tokens) / 1e6:.0f} M tokens, {len(bounds) - 1} documents, "
          f"{args.shards} shards, {args.repeats} repeats (A B, B A, ...), under {where}; "
          f"appends of {args.append_tokens or '1..4095'} tokens; both timed until durable; "
          f"{load} on {os.cpu_count()} CPUs")
    print(f"{'writer':22s} {'best M tokens/s':>16s} {'median':>8s}")
    print(f"{'guideloom (this)':22s} {max(ours) / 1e6:16.1f} {statistics.median(ours) / 1e6:8.1f}")
    if not theirs:
        print("GuideLoom 1.1 side skipped: no Python with GuideLoom 1.1 (benchmarks/venvs.py)")
        return
    print(f"{'GuideLoom 1.1':22s} {max(theirs) / 1e6:16.1f} "
          f"{statistics.median(theirs) / 1e6:8.1f}")
    ratios = [o / t for o, t in zip(ours, theirs, strict=True)]
    ratio = statistics.median(ratios)
    print(f"ours/1.1 per repeat: {', '.join(f'{r:.2f}' for r in ratios)}; "
          f"best/best {max(ours) / max(theirs):.2f}")
    print(f"goal: durable writes >= {GOAL:g}x GuideLoom 1.1: median ours/1.1 = {ratio:.2f} -> "
          f"{'met' if ratio >= GOAL else 'NOT met'}")


if __name__ == "__main__":
    main()
