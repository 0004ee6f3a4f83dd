"""The entry points besides iter_view and the exports, given a remote ``data_dir``:
``open_h5`` and ``guideloom views`` read the release by byte ranges; ``extract``, which writes
next to the archives, refuses with a message naming the URL and what to do instead.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import guideloom
from guideloom.read.byte_source import clear_source_cache
from tests.dataverse_server import serve

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    monkeypatch.setenv("GUIDELOOM_CACHE_DIR", str(tmp_path / "cache"))
    clear_source_cache()
    yield
    clear_source_cache()


def _tree(f) -> dict[str, np.ndarray]:
    """Every dataset of an open HDF5 file, by path."""
    out: dict[str, np.ndarray] = {}
    f.visititems(lambda name, obj: out.__setitem__(name, obj[()]) if hasattr(obj, "dtype")
                 else None)
    assert out
    return out


@pytest.mark.parametrize("layout", ["demo_zip", "demo_loose"])
def test_open_h5_reads_a_remote_release_like_the_local_one(layout, request, fresh):
    local = request.getfixturevalue(layout)
    with serve(static=local) as server:
        for sim_id in (0, 7):
            with guideloom.open_h5(sim_id, data_dir=server.url) as remote, \
                    guideloom.open_h5(sim_id, data_dir=local) as ref:
                got, want = _tree(remote), _tree(ref)
                assert got.keys() == want.keys()
                for name in want:
                    np.testing.assert_array_equal(got[name], want[name], strict=True)
                assert dict(remote.attrs) == dict(ref.attrs)
        with pytest.raises(guideloom.errors.ExperimentNotFoundError, match=server.url):
            guideloom.open_h5(999, data_dir=server.url)


def test_extract_refuses_a_remote_release_naming_the_url_and_what_to_do(demo_zip, tmp_path):
    with serve(static=demo_zip) as server:
        with pytest.raises(ValueError, match="guideloom download") as info:
            guideloom.extract_zips(server.url)
        assert server.url in str(info.value)
        ds = guideloom.load(server.url)
        with pytest.raises(ValueError, match="local copy"):
            guideloom.extract_zips(tmp_path, dataset=ds)
        env = {**os.environ, "PYTHONPATH": str(REPO),
               "GUIDELOOM_CACHE_DIR": str(tmp_path / "cache")}
        proc = subprocess.run([sys.executable, "-m", "guideloom", "extract", server.url],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, proc.stderr
        assert server.url in proc.stderr
        assert "guideloom download" in proc.stderr
        assert "Traceback" not in proc.stderr
        views = subprocess.run([sys.executable, "-m", "guideloom", "views", server.url],
                               cwd=tmp_path, env=env, capture_output=True, text=True,
                               timeout=120)
        local = subprocess.run([sys.executable, "-m", "guideloom", "views", str(demo_zip)],
                               cwd=tmp_path, env=env, capture_output=True, text=True,
                               timeout=120)
    assert views.returncode == 0, views.stderr + local.stderr
    assert local.returncode == 0, views.stderr + local.stderr
    assert "36 with data in the remote release" in views.stdout.splitlines()[0]
    assert views.stdout.splitlines()[1:] == local.stdout.splitlines()[1:]
