"""A loader state knows the export generation it was taken on (issue 38, item 7).

A real export, a loader run half an epoch, its state saved (through JSON, as a checkpoint
stores it), the export updated for real (experiments added, removed and one changed), and the
state resumed on the new generation: the rest of the epoch is exactly the recorded order's
remaining experiments (removed ones skipped, the changed one with its new values), the next
epoch holds every experiment of the new generation; or, asked to refuse, one line.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from itertools import chain
from pathlib import Path

import h5py
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import guideloom  # noqa: E402
from guideloom import StatefulDataLoader  # noqa: E402
from guideloom.errors import GenerationChangedError  # noqa: E402
from tests.export_helpers import first_rows  # noqa: E402

BEFORE = list(range(16))
REMOVED = (8, 9, 13)  # with seed 3: 9 delivered before the checkpoint, 8 and 13 after it
AFTER = [i for i in range(20) if i not in REMOVED]  # 16..19 added
OPTIONS = {"device": "cpu", "shuffle": True, "shuffle_seed": 3, "drop_last": False}
HALF = 8  # samples delivered before the checkpoint


@dataclass
class Generations:
    out: Path  # the export, now at generation 2
    order: list[int]  # generation 1's epoch 0, as an uninterrupted loader delivered it
    state: dict  # taken after HALF samples of that epoch on generation 1
    changed: int  # the experiment whose file changed before the update


def _export(data: Path, out: Path, ids: list[int], update: bool = False):
    return guideloom.export.export(
        "force-curve", out, kind="npy", data_dir=data, sim_ids=ids, sim_ids_order="sim_ids",
        record_transform=first_rows, client="sync", partition_size=4, update=update)


def _sims(batches) -> list[int]:
    return [int(s) for b in batches for s in b.get("sim", [])]  # {}: a rank's empty batch


@pytest.fixture(scope="module")
def generations(small_loose, tmp_path_factory) -> Generations:
    root = tmp_path_factory.mktemp("generations")
    data, out = root / "data", root / "out"
    shutil.copytree(small_loose, data)
    _export(data, out, BEFORE)
    with StatefulDataLoader.from_export(out, local_batch_size=2, **OPTIONS) as loader:
        order = _sims(loader)
    with StatefulDataLoader.from_export(out, local_batch_size=2, **OPTIONS) as loader:
        it = iter(loader)
        head = _sims(next(it) for _ in range(HALF // 2))
        state = json.loads(json.dumps(loader.state_dict()))
        it.close()
    assert head == order[:HALF]
    assert 9 in order[:HALF]
    assert {8, 13} <= set(order[HALF:])
    changed = next(s for s in order[HALF:] if s not in REMOVED)
    with h5py.File(data / "h5" / f"{changed:04d}.h5", "r+") as f:
        f["force/data"][...] = f["force/data"][...] * 2.0
    result = _export(data, out, AFTER, update=True)
    assert result.update == {"added": 4, "removed": 3, "changed": 1, "carried": 12}
    return Generations(out, order, state, changed)


def test_a_state_records_the_generation_and_the_sim_ids_it_permutes(generations):
    state = generations.state
    assert state["export"]["generation"] == 1
    assert state["export"]["rows"] == len(BEFORE)
    assert state["sim_ids"] == BEFORE
    assert state["observation_offset"] == HALF
    with guideloom.load_export(generations.out) as export:
        assert export.generation == 2
        assert export.export_id != state["export"]["export_id"]
        assert export.sim_ids.tolist() == AFTER


def test_resumed_on_the_next_generation_the_epoch_continues_by_sim_id(generations):
    expected = [s for s in generations.order[HALF:] if s not in REMOVED]
    with guideloom.load_export(generations.out) as export, StatefulDataLoader.from_export(
            export, local_batch_size=2, **OPTIONS) as loader:
        loader.load_state_dict(generations.state)
        batches = list(loader)
        assert _sims(batches) == expected  # the recorded order, removed ones skipped
        assert loader.epoch == 1
        assert loader.state_dict()["sim_ids"] == AFTER
        served = {int(s): f for b in batches for s, f in zip(b["sim"], b["force"], strict=True)}
        new = export.by_sim_id(generations.changed)["force"]
        np.testing.assert_array_equal(served[generations.changed].numpy(), new)
        next_epoch = _sims(loader)
    assert sorted(next_epoch) == AFTER  # added experiments from the next epoch on, each once


def test_a_state_taken_while_continuing_resumes_there_again(generations):
    """A checkpoint in the middle of the carried-over rest: its order is still the recorded
    one, so the resume goes on from there."""
    expected = [s for s in generations.order[HALF:] if s not in REMOVED]
    with StatefulDataLoader.from_export(generations.out, local_batch_size=2,
                                        **OPTIONS) as loader:
        loader.load_state_dict(generations.state)
        it = iter(loader)
        head = _sims([next(it), next(it)])
        state = json.loads(json.dumps(loader.state_dict()))
        it.close()
    assert head == expected[:4]
    assert state["sim_ids"] == BEFORE
    assert state["export"]["generation"] == 2
    with StatefulDataLoader.from_export(generations.out, local_batch_size=3,
                                        **OPTIONS) as loader:
        loader.load_state_dict(state)
        assert _sims(loader) == expected[4:]


def test_ranks_share_the_carried_epoch_disjointly(generations):
    expected = [s for s in generations.order[HALF:] if s not in REMOVED]
    per_rank = []
    for rank in range(2):
        with StatefulDataLoader.from_export(generations.out, local_batch_size=1, rank=rank,
                                            world_size=2, **OPTIONS) as loader:
            loader.load_state_dict(generations.state)
            per_rank.append([_sims([b]) for b in loader])
    assert set(chain.from_iterable(per_rank[0])).isdisjoint(chain.from_iterable(per_rank[1]))
    interleaved = [s for a, b in zip(*per_rank, strict=True) for s in a + b]
    assert interleaved == expected


def test_refuse_mode_gives_one_line(generations):
    with StatefulDataLoader.from_export(generations.out, local_batch_size=2,
                                        on_generation_change="refuse", **OPTIONS) as loader:
        with pytest.raises(GenerationChangedError) as info:
            loader.load_state_dict(generations.state)
    text = str(info.value)
    assert "\n" not in text
    assert "generation 1" in text
    assert "generation 2" in text
    assert str(generations.out) in text
    assert "on_generation_change" in text
    with pytest.raises(ValueError, match="on_generation_change"):
        StatefulDataLoader.from_export(generations.out, on_generation_change="guess", **OPTIONS)


def test_a_state_without_sim_ids_refuses_and_an_earlier_state_loads_as_before(generations):
    """Without ``sim_ids`` there is nothing to continue by: one line. A state without
    ``export`` (guideloom before issue 38, or made by hand) is positions in the rows as they
    are, as it always was."""
    trimmed = {k: v for k, v in generations.state.items() if k != "sim_ids"}
    earlier = {k: v for k, v in generations.state.items() if k not in ("sim_ids", "export")}
    with StatefulDataLoader.from_export(generations.out, local_batch_size=2,
                                        **OPTIONS) as loader:
        with pytest.raises(GenerationChangedError, match="holds no sim_ids to continue by"):
            loader.load_state_dict(trimmed)
        whole = _sims(loader)  # generation 2's epoch 0, uninterrupted
        loader.set_epoch(0)
        loader.load_state_dict(earlier)
        assert _sims(loader) == whole[HALF:]


def test_windows_of_a_stream_export_are_refused_on_another_generation(small_loose, tmp_path):
    """A stream storage export served as windows (``sequence_length``): its samples are not
    rows, so a state records the generation without ``sim_ids`` and resumes only on it."""
    from guideloom import StreamNumpyFormat, StreamStorage
    from guideloom.testing.transforms import total_force_stream

    data, out = tmp_path / "data", tmp_path / "stream"
    shutil.copytree(small_loose, data)

    def stream_export(ids: list[int], update: bool) -> None:
        storage = StreamStorage(out, StreamNumpyFormat(
            np.dtype([("force", "<f4"), ("doc", "<u4")])))
        guideloom.export.export(
            "force-curve", out, kind="storage", format_options={"storage": storage},
            record_transform=total_force_stream, data_dir=data, sim_ids=ids,
            sim_ids_order="sim_ids", client="sync", partition_size=4, update=update)

    stream_export(list(range(6)), update=False)
    options = {"sequence_length": 16, "collate_fn": list, "local_batch_size": 2, **OPTIONS}
    with StatefulDataLoader.from_export(out, **options) as loader:
        whole = [np.asarray(w["force"]).tolist() for b in loader for w in b]
    with StatefulDataLoader.from_export(out, **options) as loader:
        it = iter(loader)
        next(it)
        state = json.loads(json.dumps(loader.state_dict()))
        it.close()
    assert state["export"]["generation"] == 1
    assert "sim_ids" not in state
    with StatefulDataLoader.from_export(out, **options) as loader:
        loader.load_state_dict(state)  # the same generation: exactly the rest
        assert [np.asarray(w["force"]).tolist() for b in loader for w in b] == whole[2:]
    stream_export(list(range(8)), update=True)
    with StatefulDataLoader.from_export(out, **options) as loader:
        with pytest.raises(GenerationChangedError, match="windows of a stream do not carry"):
            loader.load_state_dict(state)
