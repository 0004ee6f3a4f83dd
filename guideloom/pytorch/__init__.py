"""PyTorch: rddac's datasets that need no export (:class:`ViewDataset` over ``iter_view``,
``RDDACDataset``, ``DDACSDataset``) and GuideLoom 1.1's package of the loader.

A package, as in GuideLoom 1.1: :mod:`guideloom.pytorch.stateful_dataloader` holds
:class:`StatefulDataLoader` (defined in :mod:`guideloom.loader.core`) and
:mod:`guideloom.pytorch._move_data_to_device` 1.1's device transfer helper.

This package imports torch; without it, importing raises an ``ImportError`` that names the
``guideloom[torch]`` extra.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from guideloom.loader.torch_adapter import INSTALL_HINT

try:
    import torch
    from torch.utils.data import IterableDataset, get_worker_info
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without torch
    raise ImportError(INSTALL_HINT) from exc

from guideloom.loader.core import StatefulDataLoader  # GuideLoom 1.1's import path
from guideloom.select.presets import DDACS_SPEC, RDDAC_SPEC, DatasetSpec  # rddac's / ddacs' names
from guideloom.shuffle import FeistelShuffler

VIEW_SHUFFLE_NETWORK = "mix"  # see ViewDataset.share

__all__ = ["DDACS_SPEC", "DEFAULT_DATA_DIR", "RDDAC_SPEC", "DDACSDataset", "DatasetSpec",
           "RDDACDataset", "StatefulDataLoader", "ViewDataset"]

#: The data directory rddac and ddacs default to.
DEFAULT_DATA_DIR = "./data"


class ViewDataset(IterableDataset):
    """Records of a view, split across ``DataLoader`` workers and ranks without duplicates.

    The experiments are selected once, when the dataset is built (``sim_ids``, ``where`` and the
    local files, as in :func:`guideloom.streaming.iter_view`). Each iteration reads this
    worker's share: with ``W`` DataLoader workers and ``R`` ranks, worker ``w`` of rank ``r``
    takes every ``(R*W)``-th experiment starting at ``r*W + w``, so one pass over all ranks and
    workers yields every selected experiment exactly once. Shares differ by at most one record.

    Args:
        view: A view name (published or added with :func:`guideloom.add_view`) or a View.
        data_dir: Directory with the files (default: the dataset's).
        dataset: A loaded dataset (needed for views added in memory).
        source: The manifest path when ``dataset`` is not given.
        sim_ids: Allowlist of experiment ids, read in the index table's order (or the
            allowlist's own with ``sim_ids_order="sim_ids"``).
        where: Row filter on the typed index row.
        rank: This process's rank; default from ``torch.distributed`` when it is initialised,
            else 0.
        world_size: Number of ranks; default as for ``rank``.
        shuffle: Read the experiments in a seeded order that changes with :meth:`set_epoch`.
        seed: Seed of that order (the same on every rank).
        transform: Applied to each record before it is yielded.
        verify_crc: Check each stored zip member's CRC-32 before its data is used (once per
            member in each worker process; see docs/input-integrity.md).
        spec: A ``DatasetSpec`` for loading the manifest (ignored with ``dataset``).
        sim_ids_order: ``"index"`` (default) or ``"sim_ids"``, see ``sim_ids``.
        storage_options: fsspec options for a remote ``data_dir`` (credentials, endpoint).
    """

    def __init__(
        self,
        view: Any,
        *,
        data_dir: str | Path | None = None,
        dataset: Any = None,
        source: str | Path | None = None,
        sim_ids: Iterable[Any] | None = None,
        where: Callable[[Any], bool] | None = None,
        rank: int | None = None,
        world_size: int | None = None,
        shuffle: bool = False,
        seed: int = 0,
        transform: Callable[[dict[str, Any]], Any] | None = None,
        verify_crc: bool = False,
        spec: Any = None,
        sim_ids_order: str = "index",
        storage_options: Any = None,
    ) -> None:
        super().__init__()
        from guideloom.select.selection import resolve_dataset, select

        ds, root = resolve_dataset(data_dir, dataset, source, spec, storage_options)
        if isinstance(view, str):
            ds.view(view)  # an unknown view fails here, not in the workers
        self.view = view
        self.dataset = ds
        self.root = root  # the DataRoot the records are read from (shipped to the workers)
        folder = root.local_folder()
        #: As before: the absolute folder, or the remote root of a release read by URL.
        self.data_dir = root if folder is None else folder
        self.sim_ids: list[Any] = select(ds, root, sim_ids=sim_ids, where=where,
                                         order=sim_ids_order).ids  # type: ignore[arg-type]
        if (rank is None) != (world_size is None):
            raise ValueError("give both rank and world_size, or neither")
        if world_size is not None and rank is not None and not 0 <= rank < world_size:
            raise ValueError(f"need 0 <= rank < world_size, got {rank=}, {world_size=}")
        self.rank = rank
        self.world_size = world_size
        self.shuffle = shuffle
        self.seed = int(seed)
        self.epoch = 0
        self.transform = transform
        self.verify_crc = verify_crc

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose order the next iteration reads (with ``shuffle``)."""
        self.epoch = int(epoch)

    def _ranks(self) -> tuple[int, int]:
        if self.world_size is not None and self.rank is not None:  # given together
            return int(self.rank), int(self.world_size)
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
        return 0, 1

    def share(self, worker: int = 0, num_workers: int = 1) -> list[Any]:
        """The experiment ids that ``worker`` of ``num_workers`` on this rank reads."""
        rank, world = self._ranks()
        order = np.arange(len(self.sim_ids))
        if self.shuffle:
            # guideloom's own network: the order ViewDataset has always read (GuideLoom 1.1's,
            # the loader's default, is for its StatefulDataLoader checkpoints)
            order = FeistelShuffler.for_epoch(len(order), self.seed, self.epoch,
                                              network=VIEW_SHUFFLE_NETWORK)(order)
        slot, stride = rank * num_workers + worker, world * num_workers
        return [self.sim_ids[i] for i in order[slot::stride]]

    def __iter__(self) -> Iterator[Any]:
        from guideloom.select.stream import iter_view

        info = get_worker_info()
        ids = self.share(info.id, info.num_workers) if info is not None else self.share()
        if not ids:
            return
        for record in iter_view(
            self.view, data_dir=self.root, dataset=self.dataset, sim_ids=ids,
            sim_ids_order="sim_ids",  # this worker's share, in its (shuffled) order
            verify_crc=self.verify_crc,
        ):
            yield self.transform(record) if self.transform is not None else record


class _WithoutSimId:
    """Drop the ``_sim_id`` key (rddac's datasets yield the view's fields only), then apply the
    user's transform; a class, not a closure, so DataLoader workers can receive it."""

    def __init__(self, transform: Callable[[dict[str, Any]], Any] | None) -> None:
        self.transform = transform

    def __call__(self, record: dict[str, Any]) -> Any:
        record.pop("_sim_id", None)
        return record if self.transform is None else self.transform(record)


class RDDACDataset(ViewDataset):
    """rddac 2.0's ``RDDACDataset``: a :class:`ViewDataset` taking rddac's arguments in their
    order, whose records hold the view's fields only (no ``_sim_id``).

    Args:
        view: The view name.
        source: The manifest path when ``dataset`` is not given.
        data_dir: Directory with the files (default ``./data``, or the dataset's).
        dataset: A loaded dataset (needed for views added in memory).
        sim_ids: Allowlist of experiment ids, read in the index table's order.
        where: Row filter on the index row.
        shuffle: Read in a seeded order that changes with :meth:`set_epoch`.
        seed: Seed of that order.
        **options: Any other :class:`ViewDataset` keyword (``spec``, ``transform``,
            ``rank``, ``world_size``, ``verify_crc``, ``sim_ids_order``).
    """

    def __init__(
        self,
        view: Any,
        source: str | Path | None = None,
        data_dir: str | Path | None = None,
        dataset: Any = None,
        sim_ids: Iterable[Any] | None = None,
        where: Callable[[Any], bool] | None = None,
        shuffle: bool = False,
        seed: int = 0,
        **options: Any,
    ) -> None:
        transform = _WithoutSimId(options.pop("transform", None))
        if dataset is None and data_dir is None and source is None:
            data_dir = DEFAULT_DATA_DIR
        super().__init__(view, data_dir=data_dir, dataset=dataset, source=source,
                         sim_ids=sim_ids, where=where, shuffle=shuffle, seed=seed,
                         transform=transform, **options)


class DDACSDataset(RDDACDataset):
    """ddacs 3.2's ``DDACSDataset``: the same as :class:`RDDACDataset` (``spec=`` names the
    dataset's layout, as in ddacs)."""
