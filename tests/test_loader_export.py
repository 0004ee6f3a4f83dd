"""StatefulDataLoader.from_export over a load_export reader of the demo data."""

from __future__ import annotations

import json
import pickle
from itertools import chain
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import guideloom  # noqa: E402
from guideloom import StatefulDataLoader, streaming  # noqa: E402
from guideloom.shuffle import FeistelShuffler  # noqa: E402

N = 14


def fixed_length(record: dict) -> dict:
    force = np.asarray(record["force"], dtype=np.float64)
    grid = np.linspace(0.0, 1.0, 16)
    old = np.linspace(0.0, 1.0, force.shape[0])
    return {
        "force": np.stack([np.interp(grid, old, force[:, c]) for c in range(8)], 1).astype(
            np.float32
        ),
        "blankholder_force": np.float32(record["blankholder_force"]),
        "sim": np.int64(record["_sim_id"]),
    }


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("export")
    guideloom.make_demo_data(root / "data", n=N, scan_shape=(4, 4), layout="loose", seed=2)
    ds = guideloom.load(root / "data")
    guideloom.add_view(
        ds,
        "force-signals",
        fields={"force": "force_data", "blankholder_force": "process-parameters/blankholder_force"},
    )
    streaming.export_to_numpy(
        "force-signals",
        root / "out",
        data_dir=root / "data",
        dataset=ds,
        record_transform=fixed_length,
        client="sync",
    )
    return root / "out"


def test_batches_are_tensors_of_the_shuffled_rows(export_dir: Path) -> None:
    export = streaming.load_export(export_dir)
    with StatefulDataLoader.from_export(
        export, device="cpu", local_batch_size=4, shuffle=True, shuffle_seed=9, drop_last=False
    ) as loader:
        batches = list(loader)
    assert [len(b["sim"]) for b in batches] == [4, 4, 4, 2]
    order = FeistelShuffler.for_epoch(N, seed=9, epoch=0)(np.arange(N))
    rows = torch.cat([b["sim"] for b in batches]).numpy()
    assert np.array_equal(rows, np.asarray(export.sim_ids)[order])
    first = export[int(order[0])]
    assert batches[0]["force"].dtype == torch.float32
    assert tuple(batches[0]["force"].shape) == (4, 16, 8)
    assert np.array_equal(batches[0]["force"][0].numpy(), first["force"])


def test_from_path_resume_and_ranks(export_dir: Path) -> None:
    options = {"device": "cpu", "local_batch_size": 2, "shuffle": True, "shuffle_seed": 1}
    with StatefulDataLoader.from_export(export_dir, num_workers=2, **options) as loader:
        reference = [b["sim"].tolist() for b in loader]
    with StatefulDataLoader.from_export(export_dir, fields=["sim"], **options) as loader:
        it = iter(loader)
        head = [next(it)["sim"].tolist() for _ in range(3)]
        fourth = next(iter(loader))  # a new iterator closes the old one and goes on
        assert set(fourth) == {"sim"}
        head.append(fourth["sim"].tolist())
        state = json.loads(json.dumps(loader.state_dict()))
    assert head == reference[:4]
    assert state["observation_offset"] == 8
    halves = []
    for rank in range(2):  # resume on two ranks taking one sample each per step
        export = pickle.loads(pickle.dumps(streaming.load_export(export_dir)))
        with StatefulDataLoader.from_export(
            export, **{**options, "local_batch_size": 1, "rank": rank, "world_size": 2}
        ) as loader:
            loader.load_state_dict(state)
            halves.append([b["sim"].tolist() for b in loader])
    rest = [a + b for a, b in zip(*halves, strict=True)]
    assert list(chain.from_iterable(rest)) == list(chain.from_iterable(reference[4:]))


def test_an_epoch_without_batches_warns_once_with_the_numbers(export_dir: Path) -> None:
    import warnings

    # 14 samples, a global batch of 2 x 8 = 16: drop_last leaves nothing in any epoch
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with StatefulDataLoader.from_export(
            export_dir, device="cpu", local_batch_size=8, world_size=2, rank=1, shuffle=True,
            shuffle_seed=3, drop_last=True,
        ) as loader:
            epochs = [list(loader) for _ in range(3)]
            assert loader.epoch == 3  # the empty epochs still end
    assert epochs == [[], [], []]
    empty = [w for w in caught if "yields no batch" in str(w.message)]
    assert len(empty) == 1, [str(w.message) for w in caught]
    message = str(empty[0].message)
    assert f"{N} samples are fewer than one global batch of 16" in message
    assert "local_batch_size=8 x world_size=2" in message
    assert "drop_last=False" in message
    assert empty[0].filename == __file__  # points at the user's loop, not at guideloom
    # the same data with drop_last=False yields the short batch on both ranks and no warning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sims = []
        for rank in range(2):
            with StatefulDataLoader.from_export(
                export_dir, device="cpu", local_batch_size=8, world_size=2, rank=rank,
                drop_last=False,
            ) as loader:
                batches = list(loader)
            assert len(batches) == 1
            sims += batches[0]["sim"].tolist()
    assert sorted(sims) == list(range(N))
    assert not [w for w in caught if "yields no batch" in str(w.message)]


@pytest.mark.skipif(torch.cuda.is_available(), reason="pinning works with CUDA")
def test_the_pin_memory_warning_of_from_export_names_the_users_line(export_dir: Path) -> None:
    import sys

    line = sys._getframe().f_lineno + 2  # the line of the call below
    with pytest.warns(UserWarning, match="pin_memory=True but no CUDA device") as caught:
        loader = StatefulDataLoader.from_export(export_dir, device="cpu", local_batch_size=4,
                                                pin_memory=True)
    loader.close()
    assert [(w.filename, w.lineno) for w in caught] == [(__file__, line)]


def test_from_export_takes_dataloaders_batch_size_and_set_epoch(export_dir: Path) -> None:
    options = {"device": "cpu", "shuffle": True, "shuffle_seed": 4, "drop_last": False}
    per_rank = []
    for rank in range(2):
        with StatefulDataLoader.from_export(export_dir, batch_size=4, rank=rank, world_size=2,
                                            **options) as loader:
            assert loader.batch_size == 4
            assert loader.global_batch_size == 8
            loader.set_epoch(3)
            per_rank.append([b["sim"].tolist() for b in loader])
            assert loader.epoch == 4
    assert [len(b) for b in per_rank[0]] == [4, 3]
    assert [len(b) for b in per_rank[1]] == [4, 3]
    sim_ids = np.asarray(streaming.load_export(export_dir).sim_ids)
    order = sim_ids[FeistelShuffler.for_epoch(N, seed=4, epoch=3)(np.arange(N))].tolist()
    assert per_rank[0][0] == order[0:8:2]
    assert per_rank[1][0] == order[1:8:2]
    with StatefulDataLoader.from_export(export_dir, local_batch_size=4, rank=1, world_size=2,
                                        **options) as loader:
        loader.set_epoch(3)
        assert [b["sim"].tolist() for b in loader] == per_rank[1]
    with pytest.raises(ValueError, match="disagree"):
        StatefulDataLoader.from_export(export_dir, batch_size=16, local_batch_size=4, **options)


def test_a_batch_still_referred_to_is_never_refilled(export_dir: Path) -> None:
    """The source refills the arrays of batches nothing refers to any more, and only those:
    a batch held, a tensor made from it or a view of one field keeps its rows; a dropped
    batch's arrays are filled again (no fresh memory, so no page faults, per batch)."""
    from guideloom.loader.sample_sources import ExportSource

    export = streaming.load_export(export_dir)
    source = ExportSource(export)
    first, second = np.array([3, 1, 4, 1]), np.array([5, 9, 2, 6])

    def address(batch: dict) -> int:
        return batch["force"].__array_interface__["data"][0]

    batch = source.fetch(first)
    for name in export.fields:
        np.testing.assert_array_equal(batch[name], export.batch(first)[name])
    where = address(batch)
    del batch
    again = source.fetch(second)  # the dropped batch's arrays, refilled
    assert address(again) == where
    np.testing.assert_array_equal(again["force"], export.batch(second)["force"])
    held = {
        "batch": again,
        "tensor": torch.from_numpy(source.fetch(first)["force"]),
        "view": source.fetch(second)["force"][1:3],
    }
    want = {"batch": export.batch(second)["force"], "tensor": export.batch(first)["force"],
            "view": export.batch(second)["force"][1:3]}
    for _ in range(3):  # later batches never land in memory still referred to
        later = source.fetch(np.array([0, 7, 8, 13]))
        assert address(later) not in {where, held["tensor"].data_ptr(),
                                      held["view"].__array_interface__["data"][0] - 8 * 16 * 4}
    np.testing.assert_array_equal(held["batch"]["force"], want["batch"])
    np.testing.assert_array_equal(held["tensor"].numpy(), want["tensor"])
    np.testing.assert_array_equal(held["view"], want["view"])


def test_an_epoch_read_through_reused_arrays_has_the_rows_of_export_batch(export_dir: Path
                                                                           ) -> None:
    export = streaming.load_export(export_dir)
    with StatefulDataLoader.from_export(
        export, device="cpu", local_batch_size=4, shuffle=True, shuffle_seed=3, drop_last=False
    ) as loader:
        order = loader.order(0)
        for step, batch in enumerate(loader):  # each batch dropped before the next
            positions = np.arange(4 * step, min(4 * step + 4, N))
            want = export.batch(order(positions))
            for name in export.fields:
                np.testing.assert_array_equal(batch[name].numpy(), want[name])
