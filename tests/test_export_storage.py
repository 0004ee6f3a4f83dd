"""Exports into GuideLoom storages: one shard per Dask partition."""

from __future__ import annotations

import json

import numpy as np
import pytest

import guideloom
from guideloom import DocumentPickleFormat, DocumentStorage, StreamNumpyFormat, StreamStorage
from tests import storage_helpers as helpers

TOKEN_DTYPE = np.dtype([("force", "<f4"), ("document_ids", "<u4")])


def test_stream_export_one_shard_per_partition(demo_zip, tmp_path, dask_client):
    storage = StreamStorage(tmp_path / "stream", StreamNumpyFormat(TOKEN_DTYPE))
    out = guideloom.export_to_storage("force-curve", storage, data_dir=demo_zip,
                                      record_transform=helpers.total_force_tokens,
                                      client=dask_client, partition_size=5)
    assert out == tmp_path / "stream"
    shards = sorted(p.name for p in out.glob("shard-*.gls"))
    assert shards == [f"shard-{i:06d}.gls" for i in range(8)]  # 36 experiments / 5 per task
    expected = []
    for rec in guideloom.streaming.iter_view("force-curve", data_dir=demo_zip):
        expected.append(helpers.total_force_tokens(rec))
    with storage.sync_reader() as reader:
        total = sum(len(e["force"]) for e in expected)
        assert len(reader) == total
        window = reader.read(0, total)
    np.testing.assert_array_equal(window["force"], np.concatenate([e["force"] for e in expected]))
    np.testing.assert_array_equal(window["document_ids"],
                                  np.concatenate([e["document_ids"] for e in expected]))
    export = guideloom.load_export(out)
    assert len(export) == 36
    assert export.fields == ("document_ids", "force")
    np.testing.assert_array_equal(export[7]["force"], expected[7]["force"])
    assert set(export.by_sim_id(9)["document_ids"].tolist()) == {9}
    with guideloom.StreamDataset(storage, sequence_length=512).sync_reader() as windows:
        assert len(windows) == total // 512
    assert json.loads((out / "export.json").read_text())["storage"]["class"] == "StreamStorage"


def test_document_export_with_skip_has_no_gaps(demo_zip, tmp_path):
    storage = DocumentStorage(tmp_path / "docs", DocumentPickleFormat())
    with pytest.warns(guideloom.export.SkippedDataWarning, match="3 experiment"):
        guideloom.export_to_storage("force-signals-doc", storage,
                                    dataset=helpers.doc_dataset(demo_zip),
                                    record_transform=helpers.document_or_fail,
                                    client="sync", partition_size=2, on_error="skip",
                                    sim_ids=[0, 1, 2, 3, 4, 5, 6, 7])
    shards = sorted(p.name for p in storage.directory.glob("shard-*.gls"))
    assert shards == [f"shard-{i:06d}.gls" for i in range(4)]  # shard 1 is empty, not missing
    export = guideloom.load_export(storage.directory, trust=True)  # pickled: we wrote it
    assert export.sim_ids.tolist() == [0, 1, 4, 5, 7]
    doc = export.by_sim_id(4)
    assert doc["geometry"] == "concave"
    assert doc["n"].shape == ()
    with guideloom.DocumentDataset(storage).sync_reader() as reader:
        assert len(reader) == 5
        assert reader[2]["sim"] == 4


def test_unpackable_record_names_the_experiment(demo_zip, tmp_path):
    storage = StreamStorage(tmp_path / "bad", StreamNumpyFormat(TOKEN_DTYPE))
    with pytest.raises(ValueError, match="experiment 0: the storage format cannot pack"):
        guideloom.export_to_storage("force-curve", storage, data_dir=demo_zip, sim_ids=[0, 1],
                                    record_transform=lambda r: {"force": r["force_data"][:, 0]},
                                    client="sync")
    assert not storage.directory.exists()
