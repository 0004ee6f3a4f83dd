"""StatefulDataLoader.from_storage over stream and document storages."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
storage_api = pytest.importorskip("guideloom.storage")

from guideloom import StatefulDataLoader  # noqa: E402
from guideloom.shuffle import FeistelShuffler  # noqa: E402

DocumentPickleFormat = storage_api.DocumentPickleFormat
DocumentStorage = storage_api.DocumentStorage
StreamNumpyFormat = storage_api.StreamNumpyFormat
StreamStorage = storage_api.StreamStorage


def token_storage(directory: Path, n_tokens: int = 16) -> StreamStorage:
    storage = StreamStorage(directory, StreamNumpyFormat("<i4"))
    half = n_tokens // 2
    with storage.sync_writer() as writer:
        writer.append(0, np.arange(half, dtype="<i4"))  # windows cross the shard boundary
        writer.append(1, np.arange(half, n_tokens, dtype="<i4"))
    return storage


def test_quick_start(tmp_path: Path) -> None:
    """16 tokens, 4-token windows, batches of 2, shuffled."""
    storage = token_storage(tmp_path)
    with StatefulDataLoader.from_storage(
        storage,
        collate_fn=lambda windows: torch.from_numpy(np.stack(windows)),
        sequence_length=4,
        device="cpu",
        local_batch_size=2,
        shuffle=True,
        shuffle_seed=0,
    ) as loader:
        batches = list(loader)
    assert [tuple(b.shape) for b in batches] == [(2, 4), (2, 4)]
    windows = torch.cat(batches)
    starts = windows[:, 0].tolist()
    assert sorted(starts) == [0, 4, 8, 12]  # every window exactly once
    order = FeistelShuffler.for_epoch(4, seed=0, epoch=0)(np.arange(4))
    assert starts == (order * 4).tolist()
    assert torch.equal(windows, windows[:, :1] + torch.arange(4))  # token order kept


def test_stream_needs_sequence_length_and_documents_refuse_it(tmp_path: Path) -> None:
    storage = token_storage(tmp_path / "stream")
    with pytest.raises(ValueError, match="sequence_length"):
        StatefulDataLoader.from_storage(storage, device="cpu", local_batch_size=2)
    documents = DocumentStorage(tmp_path / "docs", DocumentPickleFormat())
    with documents.sync_writer() as writer:
        writer.append(0, {"x": 1})
    with pytest.raises(ValueError, match="sequence_length"):
        StatefulDataLoader.from_storage(
            documents, sequence_length=4, device="cpu", local_batch_size=2
        )


def test_stream_resume_with_workers(tmp_path: Path) -> None:
    storage = token_storage(tmp_path, n_tokens=4 * 37)
    options = {
        "sequence_length": 4,
        "device": "cpu",
        "local_batch_size": 3,
        "shuffle": True,
        "shuffle_seed": 5,
        "num_workers": 2,
        "prefetch": 2,
    }

    def starts(batch: torch.Tensor) -> list[int]:
        return batch[:, 0].tolist()

    with StatefulDataLoader.from_storage(storage, **options) as loader:
        reference = [starts(b) for b in loader]
    assert len(reference) == 12
    for cut in (1, 5, 11):
        with StatefulDataLoader.from_storage(storage, **options) as loader:
            it = iter(loader)
            head = [starts(next(it)) for _ in range(cut)]
            state = json.loads(json.dumps(loader.state_dict()))
        with StatefulDataLoader.from_storage(storage, **{**options, "num_workers": 0}) as loader:
            loader.load_state_dict(state)
            assert head + [starts(b) for b in loader] == reference


def pad_collate(documents: list[dict]) -> dict[str, torch.Tensor]:
    """Pad variable-length token lists to the longest document of the batch."""
    longest = max((len(d["tokens"]) for d in documents), default=0)
    tokens = torch.zeros((len(documents), longest), dtype=torch.int64)
    mask = torch.zeros((len(documents), longest), dtype=torch.bool)
    for row, document in enumerate(documents):
        tokens[row, : len(document["tokens"])] = torch.as_tensor(document["tokens"])
        mask[row, : len(document["tokens"])] = True
    ids = torch.tensor([d["id"] for d in documents], dtype=torch.int64)
    return {"tokens": tokens, "mask": mask, "id": ids}


def test_documents_with_padding_collate_and_two_ranks(tmp_path: Path) -> None:
    documents = DocumentStorage(tmp_path, DocumentPickleFormat())
    with documents.sync_writer() as writer:
        for i in range(11):
            writer.append(i % 2, {"id": i, "tokens": list(range(i + 1))})
    seen = []
    for rank in range(2):
        with StatefulDataLoader.from_storage(
            documents,
            pad_collate,
            device="cpu",
            local_batch_size=2,
            rank=rank,
            world_size=2,
            shuffle=True,
            shuffle_seed=3,
            drop_last=False,
            num_workers=2,
        ) as loader:
            for batch in loader:
                lengths = batch["mask"].sum(dim=1)
                assert batch["tokens"].shape[1] == (int(lengths.max()) if len(lengths) else 0)
                for doc_id, length in zip(batch["id"].tolist(), lengths.tolist(), strict=True):
                    assert length == doc_id + 1
                    assert batch["tokens"][batch["id"] == doc_id, :length].tolist() == [
                        list(range(length))
                    ]
                seen.extend(batch["id"].tolist())
    assert sorted(seen) == list(range(11))


def test_from_storage_takes_dataloaders_batch_size(tmp_path: Path) -> None:
    storage = token_storage(tmp_path, n_tokens=32)  # 8 windows of 4 tokens
    options = {"sequence_length": 4, "device": "cpu", "shuffle": True, "shuffle_seed": 2}
    stack = lambda windows: torch.from_numpy(np.stack(windows))  # noqa: E731
    with StatefulDataLoader.from_storage(storage, stack, batch_size=3, **options) as loader:
        assert loader.batch_size == loader.local_batch_size == 3
        loader.set_epoch(1)
        by_alias = [b[:, 0].tolist() for b in loader]
    with StatefulDataLoader.from_storage(storage, stack, local_batch_size=3, **options) as loader:
        loader.set_epoch(1)
        assert [b[:, 0].tolist() for b in loader] == by_alias
    order = FeistelShuffler.for_epoch(8, seed=2, epoch=1)(np.arange(8)) * 4
    assert by_alias == [order[0:3].tolist(), order[3:6].tolist()]  # drop_last: 2 of 8 dropped
