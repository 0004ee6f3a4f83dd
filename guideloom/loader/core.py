"""StatefulDataLoader: shuffled, rank-strided, prefetching and exactly resumable batches."""

from __future__ import annotations

import collections
import concurrent.futures as cf
import dataclasses
import multiprocessing
import operator
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Generic, TypeVar

import numpy as np

from guideloom.errors import LoaderArgumentError, warn
from guideloom.loader.block_order import BlockOrder
from guideloom.loader.generations import (
    GENERATION_CHANGES,
    CarriedEpoch,
    ExportIdentity,
    carried_epoch,
    check_resume,
    identity_of,
    sim_ids_digest,
    state_entries,
)
from guideloom.loader.sample_sources import (
    ExportSource,
    ExportWindows,
    ReaderSource,
    SampleSource,
)
from guideloom.loader.torch_adapter import (
    default_collate,
    move_to_device,
    non_blocking_transfer,
    pin,
    require_torch,
)
from guideloom.shuffle import FeistelShuffler

__all__ = ["StatefulDataLoader", "global_positions"]

_STATE_KEYS = ("epoch", "observation_offset", "shuffle", "shuffle_seed", "drop_last")


def global_positions(
    base: int, *, local_batch_size: int, world_size: int, rank: int, end: int
) -> np.ndarray:
    """Positions of the global order that ``rank`` reads in the global step starting at ``base``.

    The step covers ``[base, base + local_batch_size * world_size)``; rank ``r`` takes
    ``base + r + k * world_size`` for ``k < local_batch_size``, clipped to ``end``.
    """
    positions = base + rank + world_size * np.arange(local_batch_size, dtype=np.int64)
    return positions[positions < end]


@dataclasses.dataclass(eq=False)
class LoaderState:
    """Where a loader is in its order (GuideLoom 1.1 keeps the same as ``loader._state``).

    Attributes:
        epoch: The epoch the next batch belongs to.
        observation_offset: Positions of the epoch's global order delivered so far.
        held: The loader's newest iterator, weakly (a dropped iterator is not active).
        basis: While an epoch begun on another generation of an export is finished: the
            ``sim_ids`` its order permutes (``observation_offset`` counts positions of that
            order); ``None`` otherwise (:mod:`guideloom.loader.generations`).
    """

    epoch: int = 0
    observation_offset: int = 0
    held: weakref.ReferenceType[_LoaderIterator] | None = None
    basis: list[Any] | None = None

    def iterator(self) -> _LoaderIterator | None:
        """The iterator still delivering this epoch, if any."""
        iterator = self.held() if self.held is not None else None
        return iterator if iterator is not None and not iterator.finished else None

    @property
    def active(self) -> bool:
        """Whether an iterator of the loader is still delivering (not drained or closed)."""
        return self.iterator() is not None


SourceT = TypeVar("SourceT")
BatchT = TypeVar("BatchT")


@dataclasses.dataclass(init=False, eq=False, repr=False)
class StatefulDataLoader(Generic[SourceT, BatchT]):
    """Batches from a sample source in a seeded global order, resumable from ``state_dict()``.

    Use :meth:`from_storage` or :meth:`from_export`; the constructor takes any
    :class:`~guideloom.loader.sample_sources.SampleSource`, or (as GuideLoom 1.1's does) any
    dataset whose ``sync_reader()`` is a sequence of samples, such as a
    :class:`~guideloom.StreamDataset`. The loader is a context manager: leaving it stops the
    workers and closes the source's readers. It is a dataclass of its constructor arguments, so
    ``dataclasses.replace(loader, local_batch_size=8)`` makes a changed copy.

    Args:
        dataset: ``len(dataset)`` samples read with ``dataset.fetch(indices)`` (a sample
            source), or a dataset with ``sync_reader()``. ``source=`` is another name for it.
        collate_fn: Turns a fetched batch (or ``[]`` for an empty batch) into the batch object;
            defaults to :func:`~guideloom.loader.default_collate`.
        device: Where the tensors of each batch are moved (``"cpu"``, ``"cuda:0"``, ...); by
            default the current CUDA device when there is one, else the CPU
            (:meth:`get_default_device`).
        local_batch_size: Samples per batch on this rank (default 1, as in GuideLoom 1.1).
        batch_size: The same setting under ``torch.utils.data.DataLoader``'s name: samples per
            batch on this rank (per process), not the global batch. Pass one of the two (both
            only if equal).
        rank: This process's rank in ``range(world_size)``.
        world_size: Number of ranks; a global batch holds ``local_batch_size * world_size``.
        shuffle: Use a seeded :class:`~guideloom.shuffle.FeistelShuffler` order per epoch.
        shuffle_seed: Non-negative seed of the shuffle; ``None`` draws one when shuffling (it
            is kept in ``state_dict()``).
        drop_last: Drop the trailing incomplete global batch. With ``False`` every sample is
            delivered and a rank may receive an empty final batch.
        num_workers: Reader threads (or processes); ``0`` reads in the consumer's thread.
        parallel_method: ``"thread"`` or ``"process"``. Processes are spawned: the source must
            be picklable and the calling script needs an ``if __name__ == "__main__":`` guard;
            they only read, collation then runs in the consumer's process.
        prefetch: Batches kept in flight ahead of the consumer (with ``num_workers > 0``);
            ``0`` (the default, as in GuideLoom 1.1) keeps one batch per worker in flight.
        pin_memory: Pin batches in the workers before the device move (accelerators only).
        stats_summary: Print one line to stderr at the end of each epoch: time the consumer
            waited for data against time it spent between batches, and each worker's reads
            (the same counters as :meth:`stats`, which are kept either way).
        on_generation_change: What :meth:`load_state_dict` does with the state of an export
            taken on another generation (an update published since): ``"continue"`` (the
            default) finishes its epoch by ``sim_id`` (experiments removed since are skipped,
            added ones come from the next epoch), ``"refuse"`` raises
            :class:`~guideloom.errors.GenerationChangedError` (see ``docs/loader.md``).
    """

    # the constructor's arguments, for dataclasses.fields() and dataclasses.replace()
    dataset: Any
    collate_fn: Callable[[Any], Any]
    device: Any
    local_batch_size: int
    rank: int
    world_size: int
    num_workers: int
    parallel_method: str
    shuffle: bool
    shuffle_seed: int | None
    pin_memory: bool
    drop_last: bool
    prefetch: int
    stats_summary: bool
    on_generation_change: str

    def __init__(
        self,
        dataset: Any = None,
        collate_fn: Callable[[Any], Any] | None = None,
        *,
        device: Any = None,
        local_batch_size: int | None = None,
        batch_size: int | None = None,
        rank: int = 0,
        world_size: int = 1,
        shuffle: bool = False,
        shuffle_seed: int | None = None,
        drop_last: bool = True,
        num_workers: int = 0,
        parallel_method: str = "thread",
        prefetch: int = 0,
        pin_memory: bool = False,
        source: SampleSource | None = None,
        stats_summary: bool = False,
        on_generation_change: str = "continue",
    ) -> None:
        torch = require_torch()
        if (dataset is None) == (source is None):
            raise TypeError("StatefulDataLoader() takes one dataset (or source=)")
        given = dataset if source is None else source
        source = _as_source(given)
        local_batch_size = _per_rank_batch_size(local_batch_size, batch_size)
        if local_batch_size < 1:
            raise ValueError(f"local_batch_size must be >= 1, got {local_batch_size}")
        if world_size < 1:
            raise ValueError(f"world_size ({world_size}) cannot be less than 1")
        if rank < 0:
            raise ValueError(f"rank ({rank}) cannot be less than 0")
        if rank >= world_size:
            raise ValueError(f"need 0 <= rank < world_size, got rank={rank}, {world_size=}")
        if num_workers < 0 or prefetch < 0:
            raise ValueError(
                f"need num_workers >= 0 and prefetch >= 0, got {num_workers}, {prefetch}"
            )
        if 0 < prefetch < num_workers:
            warn(
                f"prefetch={prefetch} batches in flight for num_workers={num_workers}: not all "
                "workers will be utilized; raise prefetch (or pass 0: one batch per worker)"
            )
        if parallel_method not in ("thread", "process"):
            raise ValueError(
                f"parallel_method must be 'thread' or 'process', got {parallel_method!r}"
            )
        if on_generation_change not in GENERATION_CHANGES:
            raise ValueError(f"on_generation_change must be one of {GENERATION_CHANGES}, got "
                             f"{on_generation_change!r}")
        if pin_memory and not torch.cuda.is_available():
            warn("pin_memory=True but no CUDA device: not pinning")
            pin_memory = False
        self.dataset = given
        self.source = source
        self.collate_fn = default_collate if collate_fn is None else collate_fn
        self.device = self.get_default_device() if device is None else torch.device(device)
        self.local_batch_size = int(local_batch_size)
        self.rank = int(rank)
        self.world_size = int(world_size)
        self.shuffle = bool(shuffle)
        if shuffle_seed is not None and int(shuffle_seed) < 0:
            raise ValueError(f"shuffle_seed must be a non-negative int, got {shuffle_seed}")
        self._seed_given = shuffle_seed is not None
        if shuffle_seed is None and self.shuffle:  # draw one, kept in state_dict()
            shuffle_seed = int(np.random.SeedSequence().generate_state(1, np.uint32)[0])
        self.shuffle_seed = None if shuffle_seed is None else int(shuffle_seed)
        self.drop_last = bool(drop_last)
        self.num_workers = int(num_workers)
        self.parallel_method = parallel_method
        self.prefetch = int(prefetch)
        self.pin_memory = pin_memory
        self._num_samples = len(source)
        self._state = LoaderState()
        self._process_pool: cf.ProcessPoolExecutor | None = None
        self._closed = False
        self._warned_empty = False
        self.stats_summary = bool(stats_summary)
        self.on_generation_change = on_generation_change
        self._stats = LoaderStats()

    @staticmethod
    def get_default_device() -> Any:
        """Return the current CUDA device when CUDA is available, else the CPU."""
        torch = require_torch()
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")

    @property
    def dataset_size(self) -> int:
        """Number of samples (GuideLoom 1.1's name)."""
        return self._num_samples

    def open(self) -> None:
        """Make a closed loader usable again (GuideLoom 1.1 calls this before iterating).

        Raises:
            ValueError: The dataset has fewer samples than one global batch (as in 1.1).
        """
        self._closed = False
        if self._num_samples < self.global_batch_size:
            raise ValueError(
                f"the dataset has fewer elements ({self._num_samples}), fewer than one global "
                f"batch of {self.global_batch_size} (local_batch_size={self.local_batch_size} x "
                f"world_size={self.world_size}); lower the batch size"
            )

    def _depth(self) -> int:
        """Batches in flight with workers: ``prefetch``, or one per worker when it is 0."""
        return self.prefetch or max(self.num_workers, 1)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_storage(
        cls,
        storage: Any,
        collate_fn: Callable[[Any], Any] | None = None,
        *,
        sequence_length: int | None = None,
        **kwargs: Any,
    ) -> StatefulDataLoader:
        """Load from a GuideLoom storage.

        Stream storages (``StreamStorage``, ``StreamWithMetaStorage``) need
        ``sequence_length`` (elements per sample); document storages refuse it. A dataset that
        already has ``sync_reader()`` (e.g. a ``StreamDataset``) is served as is. The other
        keyword arguments are those of :class:`StatefulDataLoader`.
        """
        require_torch()
        dataset = _dataset_for(storage, sequence_length)
        return cls(dataset, collate_fn, **kwargs)  # loader.dataset is the dataset, as in 1.1

    @classmethod
    def from_export(
        cls,
        export_or_path: Any,
        collate_fn: Callable[[Any], Any] | None = None,
        *,
        fields: list[str] | None = None,
        trust: bool = False,
        sequence_length: int | None = None,
        **kwargs: Any,
    ) -> StatefulDataLoader:
        """Load from an export (a ``load_export`` reader, or its directory).

        Each batch is one vectorised ``export.batch(indices)`` read; the default collate turns
        its dict of arrays into a dict of tensors. ``trust`` is passed to ``load_export`` for a
        path: needed for pickled exports, whose reading runs code chosen by their author.

        With ``sequence_length``, a stream storage export (kind ``storage``, e.g. the shipped
        ``force_stream`` workflow's) is served as windows of that many elements, as
        :meth:`from_storage` serves the storage: the storage class and its format's dtype come
        from the export's ``export.json``, checked when the export is opened.

        Raises:
            ValueError: ``sequence_length`` with an export that is not a stream storage.
        """
        require_torch()
        export = export_or_path
        if isinstance(export_or_path, (str, os.PathLike)):
            from guideloom.reader import load_export

            export = load_export(Path(export_or_path), fields=fields, trust=trust)
        elif fields is not None:
            raise ValueError("fields= applies only when a path is given")
        if sequence_length is not None:
            dataset = _dataset_for(_stream_storage_of(export, trust), sequence_length)
            identity = ExportIdentity(
                root=str(export.root), generation=export.generation,
                export_id=export.export_id, sim_ids=None,
                digest=sim_ids_digest(np.asarray(export.sim_ids).tolist()))
            return cls(ExportWindows(dataset, identity), collate_fn, **kwargs)
        return cls(ExportSource(export), collate_fn, **kwargs)

    # ------------------------------------------------------------------ order and sizes
    @property
    def epoch(self) -> int:
        """The epoch the next batch belongs to."""
        return self._state.epoch

    @property
    def batch_size(self) -> int:
        """``local_batch_size`` (``DataLoader``'s name): samples per batch on this rank."""
        return self.local_batch_size

    @property
    def global_batch_size(self) -> int:
        """``local_batch_size * world_size``."""
        return self.local_batch_size * self.world_size

    def __len__(self) -> int:
        """Batches per rank in a full epoch."""
        n, g = self._num_samples, self.global_batch_size
        return n // g if self.drop_last else -(-n // g)

    def _epoch_end(self) -> int:
        """Exclusive end of the positions a full run of this epoch delivers from the offset."""
        n, g = self._num_samples, self.global_batch_size
        if not self.drop_last:
            return n
        return self._state.observation_offset + (n - self._state.observation_offset) // g * g

    def order(self, epoch: int) -> Callable[[np.ndarray], np.ndarray]:
        """Return the map from global positions to sample indices for ``epoch``."""
        return self._order_of(self._num_samples, epoch)

    def _order_of(self, n: int, epoch: int) -> Callable[[np.ndarray], np.ndarray]:
        """The map from positions to indices of ``epoch``'s order of ``n`` samples."""
        if not self.shuffle:
            return lambda positions: np.asarray(positions, dtype=np.int64)
        return FeistelShuffler.for_epoch(n, self.shuffle_seed, epoch)

    def _carried(self) -> CarriedEpoch | None:
        """The rest of the current epoch when it began on another generation of the export
        (its recorded order mapped to this generation's rows by ``sim_id``), else ``None``."""
        state = self._state
        identity = identity_of(self.source)
        if state.basis is None or identity is None or identity.sim_ids is None:
            return None
        return carried_epoch(state.basis, self._order_of(len(state.basis), state.epoch),
                             state.observation_offset, identity.sim_ids)

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration deliver epoch ``epoch``, as ``DistributedSampler.set_epoch``.

        The epoch keys the shuffle, so every rank with the same ``shuffle_seed`` and ``epoch``
        reads its share of the same global order. A new epoch starts at its first batch; the
        current epoch (``epoch == loader.epoch``) keeps its position, so a loop calling
        ``set_epoch(epoch)`` after ``load_state_dict`` resumes mid-epoch. Calling it is optional:
        iterating to the end of an epoch already advances to the next.

        Raises:
            RuntimeError: An iterator of this loader is active.
            ValueError: ``epoch`` is negative.
        """
        epoch = operator.index(epoch)
        if epoch < 0:
            raise ValueError(f"epoch must be >= 0, got {epoch}")
        if self._active_iterator() is not None:
            raise RuntimeError("cannot set the epoch while an iterator of this loader is active")
        if epoch != self._state.epoch:
            self._state.epoch, self._state.observation_offset = epoch, 0
            self._state.basis = None

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        """Return the resume point as plain JSON-serialisable data.

        ``observation_offset`` is the number of positions of the epoch's global order delivered
        to the consumers of all ranks; batches prefetched but not yet delivered do not count.
        A loader of an export adds ``export`` (the generation read: number, ``export_id``,
        rows, a SHA-256 of its ``sim_ids``) and ``sim_ids`` (those the epoch's order
        permutes), so that a resume on another generation continues by ``sim_id`` or refuses
        (:mod:`guideloom.loader.generations`).
        """
        return {
            "epoch": self._state.epoch,
            "observation_offset": self._state.observation_offset,
            "shuffle": self.shuffle,
            "shuffle_seed": self.shuffle_seed,
            "drop_last": self.drop_last,
            **state_entries(identity_of(self.source), self._state.basis),
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Resume at ``state``: the next batch is the one an uninterrupted run delivers next.

        A state of an export taken on another generation (its ``sim_ids`` differ) continues
        by ``sim_id`` or refuses, as ``on_generation_change`` says; a state without ``export``
        (an earlier guideloom's, or made by hand) is positions in the rows as they are.

        Raises:
            RuntimeError: An iterator of this loader is active.
            ValueError: The state is malformed or lies beyond this dataset.
            GenerationChangedError: The state is of another generation of the export and the
                loader refuses those, or it holds no ``sim_ids`` to continue by.
        """
        state = state_dict
        if self._active_iterator() is not None:
            raise RuntimeError("cannot load state while an iterator of this loader is active")
        missing = [key for key in _STATE_KEYS if key not in state]
        if missing:
            raise ValueError(f"state_dict lacks {missing}")
        epoch, offset = int(state["epoch"]), int(state["observation_offset"])
        basis = check_resume(state, identity_of(self.source), self.on_generation_change)
        samples = self._num_samples if basis is None else len(basis)
        if epoch < 0 or not 0 <= offset <= samples:
            raise ValueError(
                f"state epoch={epoch}, observation_offset={offset} does not fit "
                f"{samples} samples"
            )
        if bool(state["shuffle"]) != self.shuffle or bool(state["drop_last"]) != self.drop_last:
            warn(
                f"state has shuffle={state['shuffle']}, drop_last={state['drop_last']} but the "
                f"loader uses shuffle={self.shuffle}, drop_last={self.drop_last}: the remaining "
                "order differs from the checkpointed run",
            )
        seed = state["shuffle_seed"]
        if self.shuffle and seed is not None and seed != self.shuffle_seed:
            if self._seed_given:
                warn(
                    f"state has shuffle_seed={seed} but the loader uses {self.shuffle_seed}: "
                    "the remaining order differs from the checkpointed run",
                )
            else:  # no explicit seed: continue the checkpointed order
                self.shuffle_seed = int(seed)
        self._state.epoch, self._state.observation_offset = epoch, offset
        self._state.basis = basis

    # ------------------------------------------------------------------ stall counters
    def stats(self, reset: bool = False) -> dict[str, Any]:
        """Where the time went since the loader was made (or the last ``reset``).

        Returns:
            ``batches`` delivered; ``wait_s``, seconds the consumer spent inside ``next()``
            waiting for a batch (read, collate and device move when ``num_workers=0``);
            ``between_s``, seconds from handing out a batch to asking for the next (the
            training step); ``wait_fraction``, ``wait_s / (wait_s + between_s)`` (near 1: the
            loop is starved of data; near 0: data is ready before it is asked for); and
            ``workers``, per worker thread or process: ``{"batches", "read_s"}``, the seconds
            it spent fetching and collating.
        """
        return self._stats.snapshot(reset)

    def _summarize(self, epoch: int, counters: dict[str, Any]) -> None:
        """Print the one-line summary of an epoch (``stats_summary=True``)."""
        print(f"guideloom loader: epoch {epoch}: {summary_line(counters)}", file=sys.stderr,
              flush=True)

    # ------------------------------------------------------------------ iteration
    def _active_iterator(self) -> _LoaderIterator | None:
        return self._state.iterator()

    def __iter__(self) -> Iterator[Any]:
        if self._closed:
            raise RuntimeError("the loader is closed")
        previous = self._active_iterator()
        if previous is not None:
            previous.close()
        self._warn_if_epochs_are_empty()
        iterator = _LoaderIterator(self)
        self._state.held = weakref.ref(iterator)
        return iterator

    def _warn_if_epochs_are_empty(self) -> None:
        """Warn once when a full epoch yields no batch (too few samples for one)."""
        if self._warned_empty or len(self) > 0:
            return
        self._warned_empty = True
        n, g = self._num_samples, self.global_batch_size
        if n == 0:
            why = "the source has 0 samples"
        else:
            why = (f"{n} sample{'s' * (n != 1)} {'are' if n != 1 else 'is'} fewer than one "
                   f"global batch of {g} (local_batch_size={self.local_batch_size} x "
                   f"world_size={self.world_size}) and drop_last=True drops them; lower the "
                   "batch size or pass drop_last=False")
        warn(f"every epoch of this loader yields no batch: {why}")

    def _load(self, indices: np.ndarray, epoch_stats: LoaderStats | None = None) -> Any:
        """Fetch and collate one batch (runs in a worker thread or the consumer)."""
        t0 = time.perf_counter()
        batch = self.collate_fn(self.source.fetch(indices) if len(indices) else [])
        batch = pin(batch) if self.pin_memory else batch
        name, seconds = threading.current_thread().name, time.perf_counter() - t0
        self._stats.worker_read(name, seconds)
        if epoch_stats is not None:
            epoch_stats.worker_read(name, seconds)
        return batch

    def _executor(self) -> tuple[cf.Executor, bool]:
        """Return ``(executor, owned_by_iterator)`` for the configured parallel method."""
        if self.parallel_method == "thread":
            pool = cf.ThreadPoolExecutor(self.num_workers, thread_name_prefix="guideloom-loader")
            return pool, True
        if self._process_pool is None:
            self._process_pool = cf.ProcessPoolExecutor(
                self.num_workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_process_init,
                initargs=(self.source,),
            )
        return self._process_pool, False

    def close(self) -> None:
        """Stop the active iterator and the workers, and close the source's readers."""
        iterator = self._active_iterator()
        if iterator is not None:
            iterator.close()
        if self._process_pool is not None:
            self._process_pool.shutdown(wait=True, cancel_futures=True)
            self._process_pool = None
        closer = getattr(self.source, "close", None)
        if closer is not None:
            closer()
        self._closed = True

    def __enter__(self) -> StatefulDataLoader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class _LoaderIterator:
    """One pass over the rest of the current epoch, delivering batches in order."""

    def __init__(self, loader: StatefulDataLoader) -> None:
        self._loader = loader
        self.finished = False
        self._pending: collections.deque[tuple[int, Any]] = collections.deque()
        self._pool: cf.Executor | None = None
        self._owns_pool = False
        self._epoch = loader._state.epoch
        self._carried = loader._carried()
        if self._carried is None:
            self._order = loader.order(loader._state.epoch)
            if loader.shuffle:  # the shuffle mapped a block of positions per call
                self._order = BlockOrder(self._order, loader._num_samples)
            self._next_base = loader._state.observation_offset
            self._end = loader._epoch_end()
        else:  # the rest of an epoch begun on another generation: positions in its rows
            rows, g = self._carried.rows, loader.global_batch_size
            self._order = lambda positions: rows[positions]
            self._next_base = 0
            self._end = len(rows) // g * g if loader.drop_last else len(rows)
        self._advanced = False
        self._handed_out: float | None = None  # when the last batch left next()
        self._epoch_stats = LoaderStats()
        if loader.num_workers > 0:
            self._pool, self._owns_pool = loader._executor()

    def _indices(self, base: int) -> np.ndarray:
        loader = self._loader
        positions = global_positions(
            base,
            local_batch_size=loader.local_batch_size,
            world_size=loader.world_size,
            rank=loader.rank,
            end=self._end,
        )
        return self._order(positions) if len(positions) else positions

    def _fill(self) -> None:
        loader = self._loader
        depth = loader._depth() if self._pool is not None else 1
        while len(self._pending) < depth and self._next_base < self._end:
            base = self._next_base
            self._next_base += loader.global_batch_size
            indices = self._indices(base)
            if self._pool is None:
                work: Any = indices  # read lazily in __next__
            elif loader.parallel_method == "thread":
                work = self._pool.submit(loader._load, indices, self._epoch_stats)
            else:
                work = self._pool.submit(_process_fetch, indices)
            self._pending.append((base, work))

    def __iter__(self) -> _LoaderIterator:
        return self

    def open(self) -> None:
        """Nothing to do (GuideLoom 1.1's iterators have it); the iterator is ready."""

    def __enter__(self) -> _LoaderIterator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __next__(self) -> Any:
        if self.finished:
            raise StopIteration
        loader = self._loader
        entered = time.perf_counter()
        if self._handed_out is not None:
            between = entered - self._handed_out
            loader._stats.between(between)
            self._epoch_stats.between(between)
            self._handed_out = None
        try:
            self._fill()
            if not self._pending:
                if not self._advanced:  # an epoch without batches still ends
                    loader._state.epoch, loader._state.observation_offset = self._epoch + 1, 0
                    loader._state.basis = None  # the next epoch permutes this generation
                ended = self._next_base >= self._end and self._epoch_stats.batches
                self.close()
                if ended and loader.stats_summary:
                    loader._summarize(self._epoch, self._epoch_stats.snapshot())
                raise StopIteration
            base, work = self._pending.popleft()
            if self._pool is None:
                batch = loader._load(work, self._epoch_stats)
            elif loader.parallel_method == "thread":
                batch = work.result()
            else:
                fetched, worker, read_s = work.result()
                loader._stats.worker_read(worker, read_s)
                self._epoch_stats.worker_read(worker, read_s)
                batch = loader.collate_fn(fetched)
                batch = pin(batch) if loader.pin_memory else batch
            self._fill()  # keep the workers busy while the consumer trains
            batch = move_to_device(batch, loader.device,
                                   non_blocking=non_blocking_transfer(loader.device))
        except BaseException:
            self.close()
            raise
        # the epoch ends when the iterator is exhausted (as in GuideLoom 1.1): a checkpoint
        # taken after the last batch but before that resumes with an empty rest of the epoch
        state = loader._state
        if self._carried is None:
            state.observation_offset = min(base + loader.global_batch_size, loader._num_samples)
        else:  # the position in the recorded order just after the last row delivered
            last = min(base + loader.global_batch_size, len(self._carried)) - 1
            state.observation_offset = int(self._carried.reached[last])
        self._handed_out = time.perf_counter()
        waited = self._handed_out - entered
        loader._stats.waited(waited)
        self._epoch_stats.waited(waited)
        return batch

    def close(self) -> None:
        """Cancel read-ahead and stop this iterator's worker threads."""
        if self.finished:
            return
        self.finished = True
        pending, self._pending = self._pending, collections.deque()
        for _, work in pending:
            if isinstance(work, cf.Future):
                work.cancel()
        if self._pool is not None and self._owns_pool:
            self._pool.shutdown(wait=True, cancel_futures=True)
        self._pool = None

    def __del__(self) -> None:
        self.close()


# ---------------------------------------------------------------------- process workers
_WORKER_SOURCE: Any = None


def _process_init(source: Any) -> None:
    global _WORKER_SOURCE
    _WORKER_SOURCE = source


def _process_fetch(indices: np.ndarray) -> tuple[Any, str, float]:
    """One batch read in a worker process, with the worker's name and the seconds it took."""
    t0 = time.perf_counter()
    fetched = _WORKER_SOURCE.fetch(indices) if len(indices) else []
    return fetched, f"process-{os.getpid()}", time.perf_counter() - t0


class LoaderStats:
    """Cheap, thread-safe counters of where a loader's time goes (see
    :meth:`StatefulDataLoader.stats`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._reset()

    def _reset(self) -> None:
        self.batches = 0
        self.wait_s = 0.0
        self.between_s = 0.0
        self.workers: dict[str, list[float]] = {}  # name -> [batches, read seconds]

    def waited(self, seconds: float) -> None:
        """The consumer got a batch after waiting ``seconds`` in ``next()``."""
        with self._lock:
            self.batches += 1
            self.wait_s += seconds

    def between(self, seconds: float) -> None:
        """The consumer asked for the next batch ``seconds`` after the last one."""
        with self._lock:
            self.between_s += seconds

    def worker_read(self, worker: str, seconds: float) -> None:
        """Worker ``worker`` fetched (and collated) one batch in ``seconds``."""
        with self._lock:
            entry = self.workers.setdefault(worker, [0, 0.0])
            entry[0] += 1
            entry[1] += seconds

    def snapshot(self, reset: bool = False) -> dict[str, Any]:
        """The counters as plain data (see :meth:`StatefulDataLoader.stats`)."""
        with self._lock:
            total = self.wait_s + self.between_s
            doc = {
                "batches": self.batches,
                "wait_s": self.wait_s,
                "between_s": self.between_s,
                "wait_fraction": self.wait_s / total if total > 0 else 0.0,
                "workers": {name: {"batches": int(n), "read_s": t}
                            for name, (n, t) in sorted(self.workers.items())},
            }
            if reset:
                self._reset()
        return doc


def summary_line(counters: dict[str, Any]) -> str:
    """One line of :meth:`StatefulDataLoader.stats` counters, for the end of an epoch."""
    workers = ", ".join(f"{name} {w['batches']} batches in {w['read_s']:.2f} s"
                        for name, w in counters["workers"].items())
    verdict = ("the loop waited for data" if counters["wait_fraction"] >= 0.5 else
               "data was ready ahead of the loop")
    return (f"{counters['batches']} batches; waited {counters['wait_s']:.2f} s for data, "
            f"{counters['between_s']:.2f} s between batches ({counters['wait_fraction']:.0%} "
            f"waiting: {verdict}); reads: {workers or 'none'}")


def _as_source(dataset: Any) -> SampleSource:
    """A sample source as is; a dataset with ``sync_reader()`` served by a ReaderSource."""
    if isinstance(dataset, SampleSource):
        return dataset
    if hasattr(dataset, "sync_reader"):
        return ReaderSource(dataset)
    raise TypeError(
        f"cannot load from {type(dataset).__name__}: expected a dataset with sync_reader() (for "
        "example guideloom.StreamDataset) or a sample source with __len__ and fetch(indices)"
    )


def _per_rank_batch_size(local_batch_size: int | None, batch_size: int | None) -> int:
    """The per-rank batch size from ``local_batch_size`` or its alias ``batch_size``."""
    if local_batch_size is None:
        return 1 if batch_size is None else batch_size  # 1: GuideLoom 1.1's default
    if batch_size is not None and int(batch_size) != int(local_batch_size):
        raise ValueError(f"batch_size={batch_size} and local_batch_size={local_batch_size} "
                         "disagree: both name the samples per batch on this rank; pass one")
    return local_batch_size


def _stream_storage_of(export: Any, trust: bool) -> Any:
    """The stream storage a ``storage`` export holds, reopened from its ``export.json``.

    Raises:
        ValueError: The export is of another kind, or holds a document storage.
    """
    from guideloom.formats.storage import reopen_storage

    kind = getattr(export, "kind", None)
    described = export.manifest.get("storage") if kind == "storage" else None
    if not described or described.get("class") == "DocumentStorage":
        what = (f"a {described.get('class')} export" if described
                else f"a {kind!r} export" if kind else f"a {type(export).__name__}")
        raise ValueError(
            f"sequence_length= windows a stream storage export (kind 'storage', class "
            f"StreamStorage or StreamWithMetaStorage); {getattr(export, 'root', 'this')} is "
            f"{what}, whose "
            "samples are its rows: leave sequence_length out")
    return reopen_storage(str(export.root), described, trust)


def _dataset_for(storage: Any, sequence_length: int | None) -> Any:
    """Wrap a storage in its dataset, checking ``sequence_length`` against its kind.

    ``StreamDataset`` serves both stream kinds (with metadata, a window carries its metadata).
    """
    from guideloom import storage as st

    stream_kinds = tuple(
        getattr(st, name)
        for name in ("StreamStorage", "StreamWithMetaStorage")
        if hasattr(st, name)
    )
    if isinstance(storage, stream_kinds):
        if sequence_length is None:
            raise ValueError("stream storages need sequence_length= (elements per sample)")
        return st.StreamDataset(storage, sequence_length=sequence_length)
    if isinstance(storage, st.DocumentStorage):
        if sequence_length is not None:
            raise LoaderArgumentError(
                "document storages take no sequence_length (a sample is a document)")
        return st.DocumentDataset(storage)
    if hasattr(storage, "sync_reader"):
        if sequence_length is not None:
            raise LoaderArgumentError(
                "sequence_length applies to storages, not to an opened dataset")
        return storage
    raise TypeError(
        f"unsupported storage type {type(storage).__name__}: expected a GuideLoom storage"
    )
