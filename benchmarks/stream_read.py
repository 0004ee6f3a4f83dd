"""Benchmark: write a token stream over shards, then read fixed windows.

Writes ``--tokens`` int32 tokens with a uint32 document-id field over ``--shards`` shards (one
record per document), then measures random and sequential ``--window``-token window reads per
second through ``StreamDataset`` with each I/O backend, on 1 and 2 threads, next to the floor of
slicing (and copying) one ``np.memmap`` of the same elements. Then it serves the same shards from
a local HTTP server process (``tests/http_server.py``, Range support, 127.0.0.1) and reports
remote windows/s through ``HTTPIO`` (sync with read-ahead, and asyncio with 64 reads in flight)
next to the local figures.

Run from the repository root::

    python3 benchmarks/stream_read.py              # 50 M tokens, about a minute
    python3 benchmarks/stream_read.py --tokens 5e6 # quicker
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from guideloom import StreamDataset, StreamNumpyFormat, StreamStorage
from guideloom.storage.http import HTTPIO
from guideloom.storage.io import MmapIO, PosixPreadIO, SeekIO

REPO = Path(__file__).resolve().parent.parent

DTYPE = np.dtype([("tokens", "<i4"), ("document_ids", "<u4")])


def make_documents(tokens: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Return (tokens, document boundaries) with documents of 1..4095 tokens."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(1, 4096, size=tokens // 1024 + 16)
    bounds = np.concatenate(([0], np.cumsum(lengths)))
    bounds = bounds[bounds < tokens]
    bounds = np.append(bounds, tokens)
    return rng.integers(0, 50_000, size=tokens, dtype=np.int32), bounds


def write(directory: Path, tokens: np.ndarray, bounds: np.ndarray, shards: int) -> float:
    """Write the documents as records spread evenly over shards; return tokens/s."""
    storage = StreamStorage(directory, StreamNumpyFormat(DTYPE))
    documents = len(bounds) - 1
    per_shard = -(-documents // shards)
    started = time.perf_counter()
    with storage.sync_writer() as writer:
        for doc in range(documents):
            begin, end = bounds[doc], bounds[doc + 1]
            writer.append(
                doc // per_shard,
                {
                    "tokens": tokens[begin:end],
                    "document_ids": np.full(end - begin, doc, dtype="<u4"),
                },
            )
    return len(tokens) / (time.perf_counter() - started)


def rate(read: Callable[[int], object], indices: list[int], threads: int, seconds: float) -> float:
    """Return windows/s of ``read`` over ``indices`` on ``threads`` threads for ~``seconds``."""
    counts = [0] * threads
    stop = time.perf_counter() + seconds

    def work(slot: int) -> None:
        n = 0
        offset = slot * 7919
        size = len(indices)
        while True:
            for k in range(256):
                read(indices[(offset + n + k) % size])
            n += 256
            if time.perf_counter() >= stop:
                break
        counts[slot] = n

    started = time.perf_counter()
    pool = [threading.Thread(target=work, args=(slot,)) for slot in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return sum(counts) / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=float, default=50e6)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--window", type=int, default=2048)
    parser.add_argument("--seconds", type=float, default=1.5, help="per measurement")
    parser.add_argument("--directory", type=Path, default=None, help="default: a temp dir")
    args = parser.parse_args()
    total = int(args.tokens)
    window = args.window

    with tempfile.TemporaryDirectory(dir=args.directory) as tmp:
        root = Path(tmp)
        tokens, bounds = make_documents(total, seed=0)
        write_rate = write(root / "stream", tokens, bounds, args.shards)
        print(f"write: {total:,} tokens over {args.shards} shards, "
              f"{len(bounds) - 1:,} records: {write_rate / 1e6:.1f} M tokens/s")

        flat = np.empty(total, dtype=DTYPE)
        flat["tokens"] = tokens
        flat["document_ids"] = np.repeat(np.arange(len(bounds) - 1), np.diff(bounds))
        flat.tofile(root / "flat.bin")
        tokens.tofile(root / "tokens.bin")
        del flat

        windows = total // window
        rng = np.random.default_rng(1)
        random_indices = rng.integers(0, windows, size=200_000).tolist()
        sequential_indices = list(range(windows))
        print(f"reads: {windows:,} windows of {window} tokens; windows/s "
              f"(random | sequential), 1 thread and 2 threads")
        header = f"{'reader':<34}{'random 1T':>12}{'random 2T':>12}{'seq 1T':>12}{'seq 2T':>12}"
        print(header)

        def report(name: str, read: Callable[[int], object]) -> float:
            figures = [
                rate(read, indices, threads, args.seconds)
                for indices in (random_indices, sequential_indices)
                for threads in (1, 2)
            ]
            print(f"{name:<34}" + "".join(f"{f:>12,.0f}" for f in figures))
            return figures[0]

        same_bytes = np.memmap(root / "flat.bin", dtype=np.uint8, mode="r")
        step = window * DTYPE.itemsize
        floor = report(
            "floor: memmap, same elements",
            lambda i: same_bytes[i * step : (i + 1) * step].copy().view(DTYPE),
        )
        tokens_only = np.memmap(root / "tokens.bin", dtype="<i4", mode="r")
        tokens_floor = report(
            "floor: memmap, tokens only",
            lambda i: tokens_only[i * window : (i + 1) * window].copy(),
        )

        for backend in (SeekIO, MmapIO, PosixPreadIO):
            if not backend.is_supported():
                print(f"{backend.__name__}: not supported here")
                continue
            storage = StreamStorage(root / "stream", StreamNumpyFormat(DTYPE), backend())
            with StreamDataset(storage, sequence_length=window).sync_reader() as reader:
                assert len(reader) == windows
                probe = reader[windows // 2]
                assert probe["tokens"].tolist() == tokens[
                    windows // 2 * window : (windows // 2 + 1) * window
                ].tolist()
                got = report(f"StreamDataset + {backend.__name__}", reader.__getitem__)
                print(
                    f"{'':<34}random 1T: {floor / got:.2f}x slower than the same-elements floor, "
                    f"{tokens_floor / got:.2f}x slower than the tokens-only floor"
                )
        storage = StreamStorage(root / "stream", StreamNumpyFormat(DTYPE), PosixPreadIO())
        with StreamDataset(storage, sequence_length=window).sync_reader() as reader:
            numpy_indices = [np.int64(i) for i in random_indices]
            got = rate(reader.__getitem__, numpy_indices, 1, args.seconds)
            print(f"PosixPreadIO, np.int64 indices, random 1T: {got:,.0f} windows/s")
        local = {}
        for backend in (SeekIO, PosixPreadIO):
            storage = StreamStorage(root / "stream", StreamNumpyFormat(DTYPE), backend())
            with StreamDataset(storage, sequence_length=window).sync_reader() as reader:
                local[backend.__name__] = [
                    rate(reader.__getitem__, indices, 1, args.seconds)
                    for indices in (random_indices, sequential_indices)
                ]
        remote_figures(root, window, windows, tokens, random_indices, sequential_indices,
                       args.seconds, local)


def remote_figures(
    root: Path, window: int, windows: int, tokens: np.ndarray, random_indices: list[int],
    sequential_indices: list[int], seconds: float, local: dict[str, list[float]],
) -> None:
    """Serve ``root`` over HTTP on 127.0.0.1 and print remote windows/s next to ``local``."""
    if not HTTPIO.is_supported():
        print('remote (HTTPIO): skipped, aiohttp is not installed (pip install ".[http]")')
        return
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.http_server", str(root)],
        cwd=REPO, stdout=subprocess.PIPE, text=True,
    )
    try:
        base = f"http://127.0.0.1:{int(server.stdout.readline())}"
        print(f"remote: the same shards served by tests/http_server.py at {base} "
              "(stdlib http.server + Range, separate process); windows/s, 1 thread")
        print(f"{'reader':<42}{'random':>12}{'sequential':>12}")
        for name, (random_rate, sequential_rate) in local.items():
            print(f"{'local StreamDataset + ' + name:<42}{random_rate:>12,.0f}"
                  f"{sequential_rate:>12,.0f}")
        storage = StreamStorage(f"{base}/stream", StreamNumpyFormat(DTYPE), HTTPIO())
        with StreamDataset(storage, sequence_length=window).sync_reader() as reader:
            middle = windows // 2
            expected = tokens[middle * window : (middle + 1) * window]
            assert reader[middle]["tokens"].tolist() == expected.tolist()
            remote = [rate(reader.__getitem__, indices, 1, seconds)
                      for indices in (random_indices, sequential_indices)]
        print(f"{'remote StreamDataset + HTTPIO (read-ahead)':<42}{remote[0]:>12,.0f}"
              f"{remote[1]:>12,.0f}")
        in_flight = asyncio.run(async_rate(storage, window, random_indices, seconds))
        print(f"{'remote async, 64 reads in flight':<42}{in_flight:>12,.0f}{'':>12}")
        best = local["PosixPreadIO"]
        print(f"remote/local (PosixPreadIO): random {remote[0] / best[0]:.3f}x, "
              f"sequential {remote[1] / best[1]:.3f}x, async random {in_flight / best[0]:.3f}x")
    finally:
        server.terminate()
        server.wait()


async def async_rate(storage: StreamStorage, window: int, indices: list[int],
                     seconds: float) -> float:
    """Return windows/s of an async window reader with 64 reads awaited at once."""
    async with StreamDataset(storage, sequence_length=window).async_reader() as reader:
        done = 0
        started = time.perf_counter()
        while time.perf_counter() - started < seconds:
            batch = indices[done % len(indices) :][:64]
            await reader.get_many(batch)
            done += len(batch)
        return done / (time.perf_counter() - started)


if __name__ == "__main__":
    main()
