"""User code from local modules reaches the Dask workers by value, and only for that job."""

from __future__ import annotations

import importlib

import cloudpickle
import numpy as np

import guideloom
from guideloom.cluster.shipping import shipped_by_value

LOCAL_MODULE = '''
import numpy as np


def first_rows(rec):
    return {"force": np.asarray(rec["force_data"])[:50], "sim": np.int64(rec["_sim_id"])}
'''


def _local_module(tmp_path, monkeypatch, name: str):
    folder = tmp_path / "code"
    folder.mkdir()
    (folder / f"{name}.py").write_text(LOCAL_MODULE)
    monkeypatch.syspath_prepend(str(folder))
    return importlib.import_module(name)


def test_a_local_module_travels_by_value_and_is_unregistered_after(demo_zip, tmp_path,
                                                                  monkeypatch, dask_client):
    module = _local_module(tmp_path, monkeypatch, "i24_shipped_transforms")
    paths = guideloom.export_to_numpy("force-curve", tmp_path / "o", data_dir=demo_zip,
                                      record_transform=module.first_rows, partition_size=12,
                                      client=dask_client)
    # the workers cannot import the module (it is on this process's path only): it went by value
    assert np.load(paths["force"]).shape[1] == 50
    assert "i24_shipped_transforms" not in cloudpickle.list_registry_pickle_by_value()
    local = guideloom.export_to_numpy("force-curve", tmp_path / "s", data_dir=demo_zip,
                                      record_transform=module.first_rows, client="sync")
    for alias in ("force", "sim", "sim_ids"):
        assert np.array_equal(np.load(paths[alias]), np.load(local[alias]))


def test_the_registry_is_restored_even_when_the_block_fails(tmp_path, monkeypatch):
    module = _local_module(tmp_path, monkeypatch, "i24_shipped_block")
    try:
        with shipped_by_value([module.first_rows]) as names:
            assert names == ["i24_shipped_block"]
            assert "i24_shipped_block" in cloudpickle.list_registry_pickle_by_value()
            raise KeyError("the job did not pack")
    except KeyError:
        pass
    assert "i24_shipped_block" not in cloudpickle.list_registry_pickle_by_value()


def test_a_module_registered_before_stays_registered(tmp_path, monkeypatch):
    module = _local_module(tmp_path, monkeypatch, "i24_registered_before")
    cloudpickle.register_pickle_by_value(module)
    try:
        with shipped_by_value([module.first_rows]):
            pass
        assert "i24_registered_before" in cloudpickle.list_registry_pickle_by_value()
    finally:
        cloudpickle.unregister_pickle_by_value(module)
