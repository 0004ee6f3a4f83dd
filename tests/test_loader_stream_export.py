"""StatefulDataLoader.from_export(..., sequence_length=) on the shipped force_stream workflow's
export: one call serves the token stream as windows, as from_storage serves the storage the
user would otherwise rebuild by hand from the dtype export.json records."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import guideloom  # noqa: E402
from guideloom import StatefulDataLoader, StreamNumpyFormat, StreamStorage  # noqa: E402
from guideloom.storage.shards import dtype_from_json  # noqa: E402

WINDOW = 64


@pytest.fixture(scope="module")
def stream_export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped ``force_stream`` workflow run as a user runs it: ``guideloom run`` from a
    folder holding ``demo-data/``."""
    cwd = tmp_path_factory.mktemp("force-stream")
    guideloom.make_demo_data(cwd / "demo-data", n=8, scan_shape=(4, 4), seed=3)
    done = subprocess.run([sys.executable, "-m", "guideloom", "run", "force_stream",
                           "--scheduler", "sync"], cwd=cwd, capture_output=True, text=True,
                          timeout=240)
    assert done.returncode == 0, done.stderr
    return cwd / "exports" / "force-stream"


def _windows(loader: StatefulDataLoader) -> list[dict[str, np.ndarray]]:
    out = []
    for batch in loader:
        assert isinstance(batch, list)
        assert batch
        out.extend({k: np.asarray(v) for k, v in sample.items()} for sample in batch)
    return out


def test_one_call_serves_the_stream_as_the_hand_built_storage_does(stream_export: Path) -> None:
    described = json.loads((stream_export / "export.json").read_text())["storage"]
    assert described["class"] == "StreamStorage"
    by_hand = StreamStorage(stream_export,
                            StreamNumpyFormat(dtype_from_json(described["format"]["dtype"])))
    common = {"local_batch_size": 3, "shuffle": True, "shuffle_seed": 5, "drop_last": False,
              "collate_fn": list}
    with StatefulDataLoader.from_export(stream_export, sequence_length=WINDOW,
                                        **common) as loader:
        got = _windows(loader)
    with StatefulDataLoader.from_storage(by_hand, sequence_length=WINDOW, **common) as loader:
        want = _windows(loader)
    assert len(got) == len(want) > 3
    for a, b in zip(got, want, strict=True):
        assert a.keys() == b.keys() == {"force", "doc"}
        assert a["force"].dtype == np.float32
        assert a["force"].shape == (WINDOW,)
        np.testing.assert_array_equal(a["force"], b["force"])
        np.testing.assert_array_equal(a["doc"], b["doc"])
    # the windows are the stream: every element of the export's rows, in order
    export = guideloom.load_export(stream_export)
    stream = np.concatenate([export[i]["force"] for i in range(len(export))])
    with StatefulDataLoader.from_export(export, sequence_length=WINDOW, local_batch_size=1,
                                        collate_fn=list) as loader:
        seq = np.concatenate([w["force"] for w in _windows(loader)])
    np.testing.assert_array_equal(seq, stream[:len(seq)])
    assert len(stream) - len(seq) < WINDOW


def test_a_default_batch_of_the_stream_trains_an_embedding_and_does_arithmetic(
        stream_export: Path) -> None:
    """The stream's ``doc`` tokens are stored as uint32, which torch holds but cannot add,
    compare or embed: the default collate widens them to int64 (issue 41), values unchanged."""
    export = guideloom.load_export(stream_export)
    stored = np.concatenate([export[i]["doc"] for i in range(len(export))])
    assert stored.dtype == np.uint32  # what force_stream.toml declares
    with StatefulDataLoader.from_export(stream_export, sequence_length=WINDOW,
                                        local_batch_size=4, shuffle=False) as loader:
        batch = next(iter(loader))
    doc = batch["doc"]
    assert doc.dtype == torch.int64
    assert doc.shape == (4, WINDOW)
    np.testing.assert_array_equal(doc.numpy().ravel(), stored[:4 * WINDOW])
    embedding = torch.nn.Embedding(int(stored.max()) + 1, 3)
    vectors = embedding(doc)
    assert vectors.shape == (4, WINDOW, 3)
    vectors.sum().backward()  # a training step's gradient reaches the table
    assert embedding.weight.grad is not None
    assert embedding.weight.grad[doc.unique()].abs().sum() > 0
    shifted = doc - doc.min() + 1
    assert int(shifted.min()) == 1
    assert bool((shifted > 0).all())
    assert batch["force"].dtype == torch.float32


def test_sequence_length_is_refused_for_an_export_of_rows(demo_zip: Path,
                                                          tmp_path: Path) -> None:
    out = tmp_path / "rows"
    guideloom.export_to_numpy("force-curve", out, data_dir=demo_zip, client="sync",
                              sim_ids=[0, 1],
                              record_transform=lambda r: {"force": r["force_data"][:4]})
    with pytest.raises(ValueError, match=r"'npy' export.*leave sequence_length out"):
        StatefulDataLoader.from_export(out, sequence_length=WINDOW, local_batch_size=1)
