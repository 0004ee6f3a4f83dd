"""No path named by data, a transform or a manifest leaves its directory (docs/security.md)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

import guideloom
from guideloom import DocumentPickleFormat, DocumentStorage
from guideloom.errors import UnsafeNameError

EXPORTERS = {
    "npy": guideloom.export_to_numpy,
    "npz": guideloom.export_to_numpy_per_sim,
    "zarr": guideloom.export_to_zarr,
}


def _tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _rows(rec):
    return {"force": np.asarray(rec["force_data"])[:10]}


@pytest.mark.parametrize("kind", sorted(EXPORTERS))
@pytest.mark.parametrize("key", ["../../B/force", "sub/force", "..", ".hidden", "a\\b",
                                 "nul\0x", "sim_ids", "export.json", "checksums.json",
                                 "croissant.json", ""])
def test_record_key_that_is_not_a_plain_name_writes_nothing(demo_zip, tmp_path, kind, key):
    victim = tmp_path / "B"
    EXPORTERS[kind]("force-curve", victim, data_dir=demo_zip, sim_ids=[0, 1, 2],
                    record_transform=_rows, client="sync")
    before = _tree_digest(victim)

    def evil(rec):
        return {key: np.asarray(rec["force_data"])[:10] * 0}

    with pytest.raises(UnsafeNameError) as info:
        EXPORTERS[kind]("force-curve", tmp_path / "A", data_dir=demo_zip, sim_ids=[0, 1, 2],
                        record_transform=evil, client="sync", on_error="skip")
    assert "experiment 0" in str(info.value) and repr(key) in str(info.value)
    assert _tree_digest(victim) == before  # the other export is untouched
    assert not (tmp_path / "A").exists()  # and nothing was published
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == ["B"]


def test_storage_record_key_is_checked_too(demo_zip, tmp_path):
    storage = DocumentStorage(tmp_path / "docs", DocumentPickleFormat())
    with pytest.raises(UnsafeNameError, match=r"experiment 0 .*'\.\./x'"):
        guideloom.export_to_storage(
            "force-curve", storage, data_dir=demo_zip, sim_ids=[0, 1], client="sync",
            record_transform=lambda r: {"../x": np.asarray(r["force_data"])[:2]})
    assert not storage.directory.exists()


def test_plain_names_still_export(demo_zip, tmp_path):
    out = tmp_path / "o"
    guideloom.export_to_numpy(
        "force-curve", out, data_dir=demo_zip, sim_ids=[0, 1], client="sync",
        record_transform=lambda r: {"force-1": np.asarray(r["force_data"])[:3],
                                    "export": np.int64(1), "Sim ids": np.int64(2)})
    assert sorted(p.name for p in out.glob("*.npy")) == [
        "Sim ids.npy", "export.npy", "force-1.npy", "sim_ids.npy"]
