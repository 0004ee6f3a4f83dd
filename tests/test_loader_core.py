"""StatefulDataLoader core: global order, ranks, drop_last, prefetch and exact resume.

These tests read from a small in-memory source (a class of this test module implementing the
loader's two-method sample-source protocol); storage- and export-backed loaders are tested in
their own modules.
"""

from __future__ import annotations

import json
import multiprocessing
import subprocess
import sys
import threading
import warnings
from itertools import chain

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

torch = pytest.importorskip("torch")

from guideloom.loader import StatefulDataLoader, default_collate  # noqa: E402
from guideloom.shuffle import FeistelShuffler  # noqa: E402


class RangeSource:
    """Samples are their own indices; records every fetch (thread-safe)."""

    def __init__(self, n: int, fail_at: int | None = None) -> None:
        self.n = n
        self.fail_at = fail_at
        self.fetched: list[list[int]] = []
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return self.n

    def fetch(self, indices: np.ndarray) -> list[int]:
        if self.fail_at is not None and self.fail_at in indices:
            raise OSError(f"cannot read sample {self.fail_at}")
        with self._lock:
            self.fetched.append([int(i) for i in indices])
        return [int(i) for i in indices]

    def __getstate__(self) -> dict:
        return {"n": self.n, "fail_at": self.fail_at}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["n"], state["fail_at"])


def ids(batch: list[int]) -> list[int]:
    """Collate that keeps the sample ids (a plain list passes the device move unchanged)."""
    return list(batch)


def make(n: int = 23, **kwargs) -> StatefulDataLoader:
    options = {"device": "cpu", "local_batch_size": 3, "shuffle": True, "shuffle_seed": 7}
    options.update(kwargs)
    return StatefulDataLoader(RangeSource(n), ids, **options)


def epoch_batches(loader: StatefulDataLoader) -> list[list[int]]:
    return list(loader)


def test_one_epoch_follows_the_seeded_order() -> None:
    loader = make(23, local_batch_size=4, drop_last=True)
    batches = epoch_batches(loader)
    order = FeistelShuffler.for_epoch(23, seed=7, epoch=0)(np.arange(23)).tolist()
    assert batches == [order[i : i + 4] for i in range(0, 20, 4)]
    assert len(loader) == 5
    assert loader.epoch == 1
    second = epoch_batches(loader)
    assert second != batches
    flat = list(chain.from_iterable(second))
    assert sorted(flat) != flat  # shuffled, not sorted
    assert loader.epoch == 2


def test_unshuffled_order_is_identity() -> None:
    loader = make(7, shuffle=False, local_batch_size=2, drop_last=False)
    assert epoch_batches(loader) == [[0, 1], [2, 3], [4, 5], [6]]


@pytest.mark.parametrize("drop_last", [True, False])
def test_drop_last(drop_last: bool) -> None:
    loader = make(10, local_batch_size=3, drop_last=drop_last)
    batches = epoch_batches(loader)
    flat = list(chain.from_iterable(batches))
    if drop_last:
        assert [len(b) for b in batches] == [3, 3, 3]
        assert len(set(flat)) == 9
    else:
        assert [len(b) for b in batches] == [3, 3, 3, 1]
        assert sorted(flat) == list(range(10))
    assert len(loader) == len(batches)


@pytest.mark.parametrize("drop_last", [True, False])
def test_ranks_see_each_sample_once(drop_last: bool) -> None:
    n, world = 29, 2
    per_rank = [
        epoch_batches(make(n, local_batch_size=4, rank=r, world_size=world, drop_last=drop_last))
        for r in range(world)
    ]
    assert len(per_rank[0]) == len(per_rank[1])  # ranks stay in lockstep
    flat = list(chain.from_iterable(per_rank[0])) + list(chain.from_iterable(per_rank[1]))
    assert len(flat) == len(set(flat))
    assert len(flat) == (24 if drop_last else n)
    # rank r reads the strided positions of each global batch
    order = FeistelShuffler.for_epoch(n, seed=7, epoch=0)(np.arange(n)).tolist()
    assert per_rank[0][0] == order[0:8:2]
    assert per_rank[1][0] == order[1:8:2]


def test_empty_final_batch_reaches_collate() -> None:
    seen: list[list[int]] = []

    def collate(batch: list[int]) -> list[int]:
        seen.append(batch)
        return batch

    world = 4  # 10 samples, global batch 4: the last step has 2 samples for 4 ranks
    last = []
    for rank in range(world):
        loader = StatefulDataLoader(
            RangeSource(10),
            collate,
            device="cpu",
            local_batch_size=1,
            rank=rank,
            world_size=world,
            drop_last=False,
        )
        last.append(epoch_batches(loader)[-1])
    assert last == [[8], [9], [], []]
    assert seen.count([]) == 2


def run_all(loader: StatefulDataLoader, epochs: int) -> list[list[int]]:
    out = []
    for _ in range(epochs):
        out.extend(loader)
    return out


@pytest.mark.parametrize("cut", [0, 1, 3, 6, 7, 9])
def test_resume_equals_uninterrupted_run(cut: int) -> None:
    options = {"local_batch_size": 3, "num_workers": 2, "prefetch": 2}
    reference = run_all(make(23, **options), epochs=2)  # 7 batches per epoch
    assert len(reference) == 14

    loader = make(23, **options)
    delivered: list[list[int]] = []
    while len(delivered) < cut:  # may cross into the second epoch
        iterator = iter(loader)
        for batch in iterator:
            delivered.append(batch)
            if len(delivered) == cut:
                break
        iterator.close()
    state = json.loads(json.dumps(loader.state_dict()))  # as a checkpoint would store it

    resumed = make(23, num_workers=1, prefetch=3, local_batch_size=3)  # other workers: same
    resumed.load_state_dict(state)
    epochs_left = 2 - state["epoch"]
    assert delivered + run_all(resumed, epochs_left) == reference


def test_state_is_plain_json_and_counts_only_delivered_batches() -> None:
    loader = make(40, local_batch_size=2, world_size=2, num_workers=2, prefetch=4)
    assert loader.state_dict() == {
        "epoch": 0,
        "observation_offset": 0,
        "shuffle": True,
        "shuffle_seed": 7,
        "drop_last": True,
    }
    iterator = iter(loader)
    next(iterator)
    next(iterator)
    state = loader.state_dict()
    assert json.loads(json.dumps(state)) == state
    assert state["observation_offset"] == 8  # 2 batches x global batch 4
    for _, future in iterator._pending:  # let the read-ahead finish (white-box)
        future.result()
    assert len(loader.source.fetched) == 2 + 4  # 4 batches read ahead ...
    assert loader.state_dict() == state  # ... and not counted
    iterator.close()


def test_epoch_end_state_resumes_in_next_epoch() -> None:
    loader = make(9, local_batch_size=3)
    batches = list(loader)
    assert loader.state_dict()["epoch"] == 1
    assert loader.state_dict()["observation_offset"] == 0
    fresh = make(9, local_batch_size=3)
    fresh.load_state_dict(loader.state_dict())
    assert list(fresh) == list(loader) != batches


def test_unseeded_shuffle_is_recorded_and_restored() -> None:
    loader = make(30, shuffle_seed=None)
    first = list(loader)
    other = make(30, shuffle_seed=None)
    state = {**loader.state_dict(), "epoch": 0, "observation_offset": 0}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        other.load_state_dict(state)  # adopts the checkpoint's seed without a warning
    assert list(other) == first


def global_stream(batches_per_rank: list[list[list[int]]]) -> list[int]:
    """Interleave rank batches back into global positions (rank r holds r, r+W, ...)."""
    world = len(batches_per_rank)
    out = []
    for step in zip(*batches_per_rank, strict=True):
        width = max(len(b) for b in step)
        for k in range(width):
            out.extend(step[r][k] for r in range(world) if k < len(step[r]))
    return out


def test_resume_with_new_world_and_batch_size_keeps_global_order() -> None:
    n = 50
    order = FeistelShuffler.for_epoch(n, seed=7, epoch=0)(np.arange(n)).tolist()
    old = [make(n, local_batch_size=3, rank=r, world_size=2, drop_last=False) for r in range(2)]
    iterators = [iter(loader) for loader in old]
    first = [[next(it) for _ in range(3)] for it in iterators]  # 3 steps of 6 samples
    states = [loader.state_dict() for loader in old]
    assert states[0] == states[1]
    assert states[0]["observation_offset"] == 18
    for it in iterators:
        it.close()

    new = [make(n, local_batch_size=2, rank=r, world_size=3, drop_last=False) for r in range(3)]
    for loader in new:
        loader.load_state_dict(states[0])
    rest = [list(loader) for loader in new]
    assert global_stream(first) == order[:18]
    assert global_stream(rest) == order[18:]
    assert all(loader.epoch == 1 for loader in new)


def test_resume_with_drop_last_and_new_batch_size() -> None:
    n = 20
    order = FeistelShuffler.for_epoch(n, seed=7, epoch=0)(np.arange(n)).tolist()
    loader = make(n, local_batch_size=3)
    it = iter(loader)
    got = [next(it), next(it)]
    it.close()
    resumed = make(n, local_batch_size=4)
    resumed.load_state_dict(loader.state_dict())
    rest = list(resumed)
    assert got == [order[0:3], order[3:6]]
    assert rest == [order[6:10], order[10:14], order[14:18]]  # 18..19 do not fill a batch


def test_load_while_iterating_is_an_error_and_mismatch_warns() -> None:
    loader = make(12)
    it = iter(loader)
    next(it)
    with pytest.raises(RuntimeError, match="active"):
        loader.load_state_dict(loader.state_dict())
    it.close()
    loader.load_state_dict(loader.state_dict())

    state = {**loader.state_dict(), "drop_last": False}
    with pytest.warns(UserWarning, match="drop_last"):
        make(12).load_state_dict(state)
    with pytest.warns(UserWarning, match="shuffle_seed"):
        make(12).load_state_dict({**loader.state_dict(), "shuffle_seed": 8})
    with pytest.raises(ValueError):
        make(12).load_state_dict({**loader.state_dict(), "observation_offset": 13})
    with pytest.raises(ValueError, match="lacks"):
        make(12).load_state_dict({"epoch": 0})


def loader_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("guideloom-loader")]


def test_no_threads_left_behind() -> None:
    assert loader_threads() == []
    with make(60, local_batch_size=2, num_workers=2, prefetch=3) as loader:
        for i, _ in enumerate(loader):
            if i == 0:
                assert loader_threads()  # workers run while iterating
            if i == 4:
                break  # abandoning the iterator releases its workers
        assert loader_threads() == []
        list(loader)  # a full pass shuts its workers down too
        assert loader_threads() == []
        iter(loader)  # left open: the context exit closes it
    assert loader_threads() == []


def test_worker_error_reaches_consumer_and_stops_workers() -> None:
    loader = StatefulDataLoader(
        RangeSource(30, fail_at=13), ids, device="cpu", local_batch_size=2, num_workers=2
    )
    with pytest.raises(OSError, match="sample 13"):
        list(loader)
    assert loader_threads() == []
    assert loader.state_dict()["observation_offset"] == 12  # batches before the failure


@pytest.mark.parametrize(("stored", "given"), [
    ("<u2", torch.int32), ("<u4", torch.int64), ("<u8", torch.int64), (">u4", torch.int64),
    (">i4", torch.int32), ("<u1", torch.uint8), ("<i4", torch.int32), ("<f4", torch.float32)])
def test_default_collate_gives_dtypes_torch_trains_with(stored: str, given) -> None:
    """uint16/32/64 (no add, compare or embedding in torch) are widened to signed dtypes that
    hold every value; non-native byte order is made native; the rest is kept."""
    high = min(np.iinfo(stored).max if np.dtype(stored).kind in "iu" else 1000, 2**62)
    values = np.array([[0, 1, high], [2, 3, 4]], dtype=stored)
    tensor = default_collate({"x": values})["x"]
    assert tensor.dtype == given
    np.testing.assert_array_equal(tensor.numpy(), values.astype(np.float64 if
                                  values.dtype.kind == "f" else np.int64))
    assert (tensor + tensor).dtype == given
    assert bool((tensor >= 0).all())
    if tensor.dtype in (torch.int32, torch.int64):
        assert torch.nn.Embedding(8, 2)(tensor % 8).shape == (2, 3, 2)  # indices: int only


def test_default_collate_refuses_uint64_values_beyond_int64() -> None:
    with pytest.raises(OverflowError, match="does not fit in int64"):
        default_collate({"x": np.array([2**63], dtype=np.uint64)})


def test_default_collate_and_device_move() -> None:
    class ArraySource:
        def __init__(self) -> None:
            self.x = np.arange(20, dtype=np.float32).reshape(10, 2)

        def __len__(self) -> int:
            return 10

        def fetch(self, indices: np.ndarray) -> dict[str, np.ndarray]:
            return {"x": self.x[indices], "y": indices * 2}

    loader = StatefulDataLoader(ArraySource(), device="meta", local_batch_size=4, drop_last=False)
    batches = list(loader)
    assert [b["x"].shape for b in batches] == [(4, 2), (4, 2), (2, 2)]
    assert all(b["x"].device.type == "meta" and b["y"].device.type == "meta" for b in batches)

    collated = default_collate([{"a": np.ones(3), "b": 1}, {"a": np.zeros(3), "b": 2}])
    assert torch.equal(collated["a"], torch.tensor([[1.0] * 3, [0.0] * 3], dtype=torch.float64))
    assert collated["b"].tolist() == [1, 2]
    assert default_collate([]) == {}


@pytest.mark.cluster
def test_process_workers_give_the_same_batches() -> None:
    reference = run_all(make(23), epochs=1)
    others = set(multiprocessing.active_children())  # e.g. a LocalCluster of another test
    with make(23, num_workers=2, parallel_method="process") as loader:
        assert run_all(loader, epochs=1) == reference
        assert set(multiprocessing.active_children()) - others
    assert set(multiprocessing.active_children()) - others == set()


@pytest.mark.skipif(torch.cuda.is_available(), reason="pinning works with CUDA")
def test_pin_memory_without_cuda_warns_and_still_loads() -> None:
    with pytest.warns(UserWarning, match="pin_memory"):
        loader = make(6, pin_memory=True)
    assert list(chain.from_iterable(list(loader))) != []


def test_import_without_torch() -> None:
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import guideloom, guideloom.shuffle, guideloom.loader\n"
        "cls = guideloom.StatefulDataLoader\n"
        "try:\n"
        "    cls(None, device='cpu', local_batch_size=1)\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert 'pip install "guideloom[torch]"' in result.stdout


@settings(max_examples=40, deadline=None)
@pytest.mark.filterwarnings("ignore:every epoch of this loader yields no batch")  # n < one batch
@given(
    n=st.integers(0, 60),
    batch=st.integers(1, 5),
    world=st.integers(1, 4),
    new_batch=st.integers(1, 5),
    new_world=st.integers(1, 4),
    drop_last=st.booleans(),
    shuffle=st.booleans(),
    data=st.data(),
)
def test_resume_anywhere_with_any_layout_keeps_the_global_order(
    n: int,
    batch: int,
    world: int,
    new_batch: int,
    new_world: int,
    drop_last: bool,
    shuffle: bool,
    data: st.DataObject,
) -> None:
    def ranks(b: int, w: int) -> list[StatefulDataLoader]:
        return [
            make(n, local_batch_size=b, rank=r, world_size=w, drop_last=drop_last, shuffle=shuffle)
            for r in range(w)
        ]

    old = ranks(batch, world)
    steps = len(old[0])
    cut = data.draw(st.integers(0, max(steps - 1, 0)))
    iterators = [iter(loader) for loader in old]
    head = [[next(it) for _ in range(cut)] for it in iterators]
    for it in iterators:
        it.close()
    state = old[0].state_dict()
    assert all(loader.state_dict() == state for loader in old)
    assert state["observation_offset"] == cut * batch * world

    new = ranks(new_batch, new_world)
    for loader in new:
        loader.load_state_dict(state)
    rest = [list(loader) for loader in new]
    order = make(n, shuffle=shuffle).order(0)(np.arange(n)).tolist()
    offset = state["observation_offset"]
    g = new_batch * new_world
    end = offset + (n - offset) // g * g if drop_last else n
    assert global_stream(head) == order[:offset]
    assert global_stream(rest) == order[offset:end]
    assert all(loader.state_dict()["epoch"] == 1 for loader in new)


# --- PyTorch's names: batch_size and set_epoch ------------------------------------------------


def test_batch_size_is_dataloaders_per_rank_name_for_local_batch_size() -> None:
    def loader(rank: int, **size: int) -> StatefulDataLoader:
        return StatefulDataLoader(RangeSource(23), ids, device="cpu", rank=rank, world_size=2,
                                  shuffle=True, shuffle_seed=7, **size)

    for rank in range(2):
        by_alias = loader(rank, batch_size=4)
        assert (by_alias.batch_size, by_alias.local_batch_size) == (4, 4)
        assert by_alias.global_batch_size == 8
        assert len(by_alias) == 2
        batches = list(by_alias)
        assert [len(b) for b in batches] == [4, 4]  # per rank, as DataLoader's batch_size
        assert batches == list(loader(rank, local_batch_size=4))
        assert batches == list(loader(rank, local_batch_size=4, batch_size=4))  # agreeing: fine
    with pytest.raises(ValueError, match="batch_size=16 and local_batch_size=8 disagree"):
        loader(0, local_batch_size=8, batch_size=16)
    # neither given: GuideLoom 1.1's default of 1 sample per batch (issue 20, item 9)
    assert loader(0).local_batch_size == 1


def test_set_epoch_gives_that_epochs_order_on_every_rank() -> None:
    n, world = 23, 3  # global batch 2 x 3 = 6: 3 full steps
    order = FeistelShuffler.for_epoch(n, seed=7, epoch=5)(np.arange(n)).tolist()
    per_rank = []
    for rank in range(world):
        loader = make(n, local_batch_size=2, rank=rank, world_size=world)
        loader.set_epoch(np.int64(5))  # any integer, as DistributedSampler takes
        assert loader.epoch == 5
        assert loader.state_dict()["observation_offset"] == 0
        per_rank.append(list(loader))
        assert loader.epoch == 6
    assert global_stream(per_rank) == order[:18]
    again = make(n, local_batch_size=2, rank=1, world_size=world)
    again.set_epoch(5)
    assert list(again) == per_rank[1]  # same seed and epoch: same batches
    again.set_epoch(5)  # replays epoch 5 after it ended
    assert list(again) == per_rank[1]
    other_seed = make(n, local_batch_size=2, rank=1, world_size=world, shuffle_seed=8)
    other_seed.set_epoch(5)
    assert list(other_seed) != per_rank[1]


def test_a_set_epoch_loop_delivers_what_the_automatic_advance_does() -> None:
    automatic = make(23)
    expected = [list(automatic) for _ in range(3)]
    looped = make(23)
    got = []
    for epoch in range(3):
        looped.set_epoch(epoch)
        got.append(list(looped))
    assert got == expected
    assert len({str(e) for e in expected}) == 3


def test_set_epoch_after_load_state_dict_resumes_mid_epoch_or_starts_another() -> None:
    reference = make(23)
    epochs = [list(reference) for _ in range(3)]  # 7 batches each
    loader = make(23)
    list(loader)
    it = iter(loader)
    done = [next(it), next(it)]  # two batches into epoch 1
    it.close()
    state = json.loads(json.dumps(loader.state_dict()))
    assert (state["epoch"], state["observation_offset"]) == (1, 6)

    resumed = make(23)
    resumed.load_state_dict(state)
    resumed.set_epoch(1)  # the usual `for epoch in ...: loader.set_epoch(epoch)` loop
    assert done + list(resumed) == epochs[1]
    assert resumed.epoch == 2

    skipped = make(23)
    skipped.load_state_dict(state)
    skipped.set_epoch(2)  # another epoch: from its first batch
    assert skipped.state_dict() == {**state, "epoch": 2, "observation_offset": 0}
    assert list(skipped) == epochs[2]


def test_set_epoch_refuses_negative_epochs_and_active_iterators() -> None:
    loader = make(12)
    with pytest.raises(ValueError, match="epoch must be >= 0"):
        loader.set_epoch(-1)
    with pytest.raises(TypeError):
        loader.set_epoch(1.5)  # type: ignore[arg-type]
    it = iter(loader)
    first = next(it)
    with pytest.raises(RuntimeError, match="cannot set the epoch while an iterator"):
        loader.set_epoch(3)
    assert [first, *it] == list(make(12))  # the running epoch went on undisturbed
    loader.set_epoch(3)
    assert loader.epoch == 3


@pytest.mark.parametrize("block", [1, 5, 7, 64])
def test_a_block_order_maps_every_step_as_the_shuffle_does(block: int) -> None:
    from guideloom.loader.block_order import BlockOrder

    n = 53
    shuffle = FeistelShuffler.for_epoch(n, seed=3, epoch=2)
    ordered = BlockOrder(shuffle, n, block=block)
    for batch, world, rank in ((4, 1, 0), (3, 2, 1), (6, 3, 0), (1, 1, 0)):
        for base in range(0, n, batch * world):  # crossing block ends, the short last step
            positions = base + rank + world * np.arange(batch, dtype=np.int64)
            positions = positions[positions < n]
            np.testing.assert_array_equal(ordered(positions), shuffle(positions))
    assert ordered(np.empty(0, dtype=np.int64)).size == 0


def test_a_loader_over_more_samples_than_a_block_follows_the_seeded_order() -> None:
    from guideloom.loader.block_order import BLOCK

    n, batch, world = 2 * BLOCK + 1001, 3000, 2
    order = FeistelShuffler.for_epoch(n, seed=7, epoch=0)(np.arange(n)).tolist()
    for rank in range(world):
        loader = make(n, local_batch_size=batch, rank=rank, world_size=world, drop_last=False)
        got = list(loader)
        step = batch * world
        want = [order[base + rank:min(base + step, n):world] for base in range(0, n, step)]
        assert got == want
