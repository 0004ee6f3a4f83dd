"""A release served as loose ``h5/<id>.h5`` files (no zip) over HTTP (the test Dataverse
server's static directory, Debian's nginx) and S3 (SeaweedFS): found without a listing over
HTTP, read by byte ranges through the native reader and its cache, and exported to exactly the
bytes of the local export.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import guideloom
from guideloom.h5native.stats import native_stats
from guideloom.read.byte_source import clear_source_cache
from tests.dataverse_server import serve
from tests.remote_helpers import assert_same as _assert_same
from tests.remote_helpers import records as _records
from tests.remote_helpers import s3_options as _options
from tests.remote_helpers import upload as _upload


def _complete(row) -> bool:
    return row["has_pointcloud"] and row["has_oil"]


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    monkeypatch.setenv("GUIDELOOM_CACHE_DIR", str(tmp_path / "cache"))
    clear_source_cache()
    yield
    clear_source_cache()


def _arrays(export: Path) -> dict[str, bytes]:
    found = {p.relative_to(export).as_posix(): p.read_bytes()
             for p in sorted(export.rglob("*.npy"))}
    assert found
    return found


def _export(data_dir, target: Path, client="sync", **kw) -> dict[str, bytes]:
    assert guideloom.export_to_numpy("pointcloud-op10", target, data_dir=data_dir,
                                     where=_complete, client=client, show_progress=False, **kw)
    return _arrays(target)


def test_loose_release_over_http_reads_ranges_and_exports_the_local_bytes(demo_loose, fresh,
                                                                          tmp_path):
    h5_bytes = sum(p.stat().st_size for p in (demo_loose / "h5").glob("*.h5"))
    local = _export(demo_loose, tmp_path / "local")
    with serve(static=demo_loose) as server:
        before = native_stats()
        _assert_same(_records("force-curve", data_dir=server.url),
                     _records("force-curve", data_dir=demo_loose))
        assert native_stats()["native"] - before["native"] >= 2 * 36  # remote and local
        sent = server.counts.snapshot()["bytes"]
        fetched = sum(n for path, n in sent.items() if path.startswith("/h5/"))
        assert 0 < fetched < h5_bytes / 2  # byte ranges, not whole files
        _assert_same(_records("pointcloud-op10", data_dir=server.url, where=_complete,
                              verify_crc=True),  # the h5py path over ranges (nothing to check)
                     _records("pointcloud-op10", data_dir=demo_loose, where=_complete))
        first = len(server.log)
        assert _export(server.url, tmp_path / "remote") == local  # byte for byte
        second = len(server.log)
        assert _export(server.url, tmp_path / "again") == local
        # (each export also fetches every file whole once, for its content digest: issue 38)
        whole = {f"/h5/{p.name}": f"bytes=0-{p.stat().st_size - 1}"
                 for p in (demo_loose / "h5").glob("*.h5")}
        metadata = [[e.path for e in server.log[a:b] if e.path.startswith("/h5/")
                     and (e.range or "").startswith("bytes=0-")  # superblock and headers
                     and e.range != whole.get(e.path)]
                    for a, b in ((first, second), (second, len(server.log)))]
        assert set(metadata[0]) == {f"/h5/{i:04d}.h5" for i in local_ids(local)}
        assert metadata[1] == []  # the second pass: HEADs and chunks only


def local_ids(arrays: dict[str, bytes]) -> list[int]:
    import io

    import numpy as np

    return list(np.load(io.BytesIO(arrays["sim_ids.npy"])))


def test_loose_release_over_nginx_exports_the_local_bytes(demo_loose, nginx_server, fresh,
                                                          tmp_path):
    site = nginx_server.root / "loose-release"
    shutil.copytree(demo_loose, site)
    assert _export(f"{nginx_server.url}/loose-release", tmp_path / "remote") == \
        _export(demo_loose, tmp_path / "local")


def test_a_loose_release_missing_some_files_warns_for_those_only(demo_loose, fresh, tmp_path):
    site = tmp_path / "site"
    shutil.copytree(demo_loose, site)
    (site / "h5" / "0003.h5").unlink()
    with serve(static=site) as server, pytest.warns(guideloom.errors.MissingDataWarning,
                                                    match="3"):
        got = list(guideloom.iter_view("force-curve", data_dir=server.url))
    assert [r["_sim_id"] for r in got] == [i for i in range(36) if i != 3]


def test_loose_release_on_s3_with_storage_options_on_a_local_cluster(demo_loose, tmp_path,
                                                                     dask_client, fresh,
                                                                     no_aws_env, private_s3):
    url = _upload(private_s3, demo_loose)
    options = _options(private_s3)
    _assert_same(_records("force-curve", data_dir=url, storage_options=options),
                 _records("force-curve", data_dir=demo_loose))
    assert _export(url, tmp_path / "remote", client=dask_client, storage_options=options) == \
        _export(demo_loose, tmp_path / "local")
