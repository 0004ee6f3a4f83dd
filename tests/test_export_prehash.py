"""The row files of an in-process export are hashed for croissant.json while the partitions run
(guideloom.export.prehash), and the digests are those of the published bytes whatever happens:
skipped rows (compacted files), a resumed run, a crashed one."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading

import numpy as np
import pytest

import guideloom
from guideloom.errors import InjectedFault
from guideloom.export import publish
from guideloom.export.prehash import PrefixHashes
from guideloom.export.publish import CROISSANT_NAME
from guideloom.runtime.faults import crash_at


def crop_force(force):
    """The first 1000 rows (the demo's force curves vary in length)."""
    return np.asarray(force)[:1000]


def hashed_at_finalize(monkeypatch) -> list[str]:
    """The names of the files describe_export reads to hash them, from now on."""
    names: list[str] = []
    real = publish._sha256

    def spy(path):
        names.append(path.name)
        return real(path)

    monkeypatch.setattr(publish, "_sha256", spy)
    return names


def assert_digests_match_the_files(out) -> dict[str, str]:
    doc = json.loads((out / CROISSANT_NAME).read_text())
    hashed = {d["name"]: d["sha256"] for d in doc["distribution"] if "sha256" in d}
    assert "force_data.npy" in hashed
    assert "sim_ids.npy" in hashed
    for name, digest in hashed.items():
        assert digest == hashlib.sha256((out / name).read_bytes()).hexdigest(), name
    return hashed


def test_in_process_rows_are_hashed_while_partitions_run(demo_zip, tmp_path, monkeypatch):
    finalize_reads = hashed_at_finalize(monkeypatch)
    out = tmp_path / "e"
    guideloom.export_to_numpy("force-curve", out, data_dir=demo_zip, client="sync",
                              partition_size=5, transforms={"force_data": crop_force})
    assert_digests_match_the_files(out)
    # the rows were hashed as their partitions finished: finalize reads only sim_ids.npy
    assert finalize_reads == ["sim_ids.npy"]
    assert not [t for t in threading.enumerate() if t.name.startswith("guideloom-hash")]


def test_compacted_rows_are_hashed_again(demo_loose, tmp_path, monkeypatch):
    import h5py

    data = tmp_path / "data"
    shutil.copytree(demo_loose, data)
    with h5py.File(data / "h5" / "0004.h5", "a") as f:  # its row is left out, the rest moved up
        del f["force/data"]
    finalize_reads = hashed_at_finalize(monkeypatch)
    out = tmp_path / "e"
    with pytest.warns(guideloom.SkippedDataWarning, match="experiment 4"):
        guideloom.export_to_numpy("force-curve", out, data_dir=data, client="sync",
                                  partition_size=5, transforms={"force_data": crop_force},
                                  on_error="skip")
    manifest = json.loads((out / "export.json").read_text())
    assert [s["sim_id"] for s in manifest["skipped"]] == [4]
    assert_digests_match_the_files(out)
    assert "force_data.npy" in finalize_reads  # a compacted copy: not the bytes hashed before


def test_a_resumed_run_hashes_the_rows_of_the_earlier_one(demo_zip, tmp_path, monkeypatch):
    out = tmp_path / "e"
    common = {"data_dir": demo_zip, "client": "sync", "partition_size": 5,
              "transforms": {"force_data": crop_force}}
    with crash_at("partition-marked"), pytest.raises(InjectedFault):
        guideloom.export_to_numpy("force-curve", out, **common)
    assert not [t for t in threading.enumerate() if t.name.startswith("guideloom-hash")]
    finalize_reads = hashed_at_finalize(monkeypatch)
    guideloom.export_to_numpy("force-curve", out, **common)
    assert finalize_reads == ["sim_ids.npy"]
    first = assert_digests_match_the_files(out)
    again = tmp_path / "again"
    guideloom.export_to_numpy("force-curve", again, **common)
    assert assert_digests_match_the_files(again) == first


def test_prefix_hashes_take_partitions_in_any_order(tmp_path):
    data = np.random.default_rng(0).integers(0, 255, 4096 + 10 * 300, dtype=np.uint8)
    path = tmp_path / "rows.npy"
    path.write_bytes(data.tobytes())
    hashes = PrefixHashes({"rows.npy": (str(path), 4096, 300)})
    for start, count in [(6, 4), (0, 3), (3, 3)]:
        hashes.rows_final(start, count)
    published = tmp_path / "data"
    published.mkdir()
    os.replace(path, published / "rows.npy")  # finalize renames the rows into data/
    digests = hashes.finish(str(published))
    assert digests == {str(published / "rows.npy"): hashlib.sha256(data.tobytes()).hexdigest()}


def test_prefix_hashes_give_nothing_for_a_replaced_file(tmp_path):
    path = tmp_path / "rows.npy"
    path.write_bytes(b"\0" * 5000)
    hashes = PrefixHashes({"rows.npy": (str(path), 4096, 100)})
    hashes.rows_final(0, 9)
    published = tmp_path / "data"
    published.mkdir()
    (published / "rows.npy").write_bytes(b"\1" * 5000)  # another file under the name
    assert hashes.finish(str(published)) == {}
