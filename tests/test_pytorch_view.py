"""guideloom.pytorch.ViewDataset: iter_view records split across workers and ranks."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from itertools import chain
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import guideloom  # noqa: E402
from guideloom.pytorch import ViewDataset  # noqa: E402

N = 13


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("demo")
    guideloom.make_demo_data(root, n=N, scan_shape=(4, 4), layout="zip", seed=1)
    return root


def record_ids(records) -> list[int]:
    return [int(r["_sim_id"]) for r in records]


def test_single_process_reads_every_experiment_once(data_dir: Path) -> None:
    dataset = ViewDataset("force-curve", data_dir=data_dir)
    records = list(dataset)
    assert record_ids(records) == list(range(N))
    assert records[0]["force_data"].ndim == 2


def test_workers_and_ranks_split_without_duplicates(data_dir: Path) -> None:
    seen: Counter[int] = Counter()
    world = 2
    for rank in range(world):
        dataset = ViewDataset("force-curve", data_dir=data_dir, rank=rank, world_size=world)
        loader = torch.utils.data.DataLoader(
            dataset, batch_size=None, num_workers=2, collate_fn=lambda record: record["_sim_id"]
        )
        ids = [int(i) for i in loader]
        assert abs(len(ids) - N / world) <= 1
        seen.update(ids)
    assert sorted(seen) == list(range(N))
    assert set(seen.values()) == {1}


def test_where_and_shuffle(data_dir: Path) -> None:
    ds = guideloom.load(data_dir)
    train = [row["index"] for row in map(ds.index().row, range(N)) if row["split"] == "train"]
    dataset = ViewDataset(
        "force-curve",
        data_dir=data_dir,
        dataset=ds,
        where=lambda row: row["split"] == "train",
        shuffle=True,
        seed=4,
    )
    first = dataset.share()
    assert sorted(first) == sorted(train)
    assert record_ids(dataset) == first
    dataset.set_epoch(1)
    assert sorted(dataset.share()) == sorted(train)
    if len(train) > 2:
        assert dataset.share() != first


def test_shuffle_keeps_guideloom_s_own_order_across_the_guideloom11_default(data_dir: Path):
    """The loader's FeistelShuffler now defaults to GuideLoom 1.1's network; ViewDataset keeps
    the order it read before (guideloom's "mix" network), so a resumed run reads the same."""
    from guideloom.shuffle import FeistelShuffler

    dataset = ViewDataset("force-curve", data_dir=data_dir, shuffle=True, seed=42)
    ids = np.arange(N)
    orders = []
    for epoch in range(4):
        dataset.set_epoch(epoch)
        mix = FeistelShuffler.for_epoch(N, 42, epoch, network="mix")(ids)
        assert dataset.share() == [dataset.sim_ids[i] for i in mix]
        orders.append(tuple(dataset.share()))
    assert len(set(orders)) == 4  # every epoch its own order


def test_split_of_workers_covers_everything_once(data_dir: Path) -> None:
    dataset = ViewDataset("force-curve", data_dir=data_dir, rank=1, world_size=3)
    shares = [dataset.share(worker, 2) for worker in range(2)]
    others = [
        ViewDataset("force-curve", data_dir=data_dir, rank=r, world_size=3).share(w, 2)
        for r in (0, 2)
        for w in range(2)
    ]
    flat = list(chain.from_iterable(shares + others))
    assert sorted(flat) == list(range(N))


def test_unknown_view_fails_early(data_dir: Path) -> None:
    with pytest.raises(ValueError, match="unknown view"):
        ViewDataset("no-such-view", data_dir=data_dir)


def test_without_torch_the_module_names_the_extra() -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "try:\n"
        "    import guideloom.pytorch\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert 'pip install "guideloom[torch]"' in result.stdout
