"""A release uploaded to S3 (SeaweedFS's ``weed server -s3`` on 127.0.0.1) read as
``data_dir="s3://bucket/prefix"``, credentials and endpoint passed as a user would: the
``AWS_*`` environment variables botocore reads, or fsspec's ``FSSPEC_S3`` JSON of storage
options. Exports must equal the local ones exactly, in this process and in a fresh
``python -m guideloom`` process. (SeaweedFS started without an identity file accepts any
key, so wrong credentials cannot be tested here.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import numpy as np
import pytest

import guideloom
from guideloom.h5native.stats import native_stats
from guideloom.read.byte_source import clear_source_cache
from tests.remote_helpers import assert_same as _assert_same
from tests.remote_helpers import records as _records

pytest.importorskip("s3fs")

REPO = Path(__file__).resolve().parents[1]
BUCKET = "guideloom-release"


@pytest.fixture
def s3_release(seaweedfs_server, demo_zip, tmp_path, monkeypatch):
    """The demo release under ``s3://guideloom-release/<unique prefix>`` and the env a user
    sets to reach it (endpoint and credentials)."""
    import s3fs

    env = {"AWS_ACCESS_KEY_ID": "guideloom", "AWS_SECRET_ACCESS_KEY": "guideloom-secret",
           "AWS_ENDPOINT_URL": seaweedfs_server.url, "AWS_DEFAULT_REGION": "us-east-1"}
    fs = s3fs.S3FileSystem(key=env["AWS_ACCESS_KEY_ID"], secret=env["AWS_SECRET_ACCESS_KEY"],
                           client_kwargs={"endpoint_url": seaweedfs_server.url})
    if not fs.exists(BUCKET):
        fs.mkdir(BUCKET)
    prefix = f"{BUCKET}/{uuid.uuid4().hex[:8]}/release"
    for path in sorted(demo_zip.rglob("*")):
        if path.is_file():
            fs.pipe(f"{prefix}/{path.relative_to(demo_zip).as_posix()}", path.read_bytes())
    monkeypatch.setenv("GUIDELOOM_CACHE_DIR", str(tmp_path / "cache"))
    clear_source_cache()
    yield f"s3://{prefix}", env
    clear_source_cache()


def _complete(row) -> bool:
    return row["has_pointcloud"] and row["has_oil"]


def test_s3_release_with_aws_environment_equals_local(s3_release, demo_zip, monkeypatch,
                                                      tmp_path):
    url, env = s3_release
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    before = native_stats()
    for view in ("force-curve", "pointcloud-op10"):
        _assert_same(_records(view, data_dir=url, where=_complete),
                     _records(view, data_dir=demo_zip, where=_complete))
    assert native_stats()["native"] > before["native"]  # the native reader, over S3 ranges
    for name, data_dir in (("local", demo_zip), ("s3", url)):
        assert guideloom.export_to_zarr("pointcloud-op10", tmp_path / f"{name}.zarr",
                                        data_dir=data_dir, where=_complete, client="sync",
                                        show_progress=False)
    ref, got = (guideloom.load_export(tmp_path / f"{n}.zarr") for n in ("local", "s3"))
    assert list(got.sim_ids) == list(ref.sim_ids)
    assert len(ref) > 10
    for i in range(len(ref)):
        for key in ref[i]:
            np.testing.assert_array_equal(np.asarray(got[i][key]), np.asarray(ref[i][key]))


@pytest.mark.slow  # a second interpreter, ~3 s; fast: the same release read in-process
def test_s3_release_with_fsspec_storage_options_in_a_fresh_process(s3_release, demo_zip,
                                                                   tmp_path):
    url, env = s3_release
    options = {"key": env["AWS_ACCESS_KEY_ID"], "secret": env["AWS_SECRET_ACCESS_KEY"],
               "client_kwargs": {"endpoint_url": env["AWS_ENDPOINT_URL"],
                                 "region_name": "us-east-1"}}
    child = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    child.update({"FSSPEC_S3": json.dumps(options), "PYTHONPATH": str(REPO),
                  "GUIDELOOM_CACHE_DIR": str(tmp_path / "child-cache")})
    for name, data_dir in (("local", str(demo_zip)), ("s3", url)):
        proc = subprocess.run([sys.executable, "-m", "guideloom", "run", "force_signals",
                               "--data-dir", data_dir, "--output", str(tmp_path / name)],
                              cwd=tmp_path, env=child, capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr
    ref, got = (guideloom.load_export(tmp_path / n) for n in ("local", "s3"))
    assert list(got.sim_ids) == list(ref.sim_ids)
    assert len(ref) > 10
    for i in range(len(ref)):
        for key, value in ref[i].items():
            np.testing.assert_array_equal(np.asarray(got[i][key]), np.asarray(value))


def test_an_s3_prefix_without_a_release_names_the_url(s3_release, tmp_path):
    url, env = s3_release
    gone = url.replace("/release", "/no-such-release")
    child = {**os.environ, **env, "PYTHONPATH": str(REPO),
             "GUIDELOOM_CACHE_DIR": str(tmp_path / "c")}
    proc = subprocess.run([sys.executable, "-m", "guideloom", "run", "force_signals",
                           "--data-dir", gone, "--output", str(tmp_path / "x")], cwd=tmp_path,
                          env=child, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert gone in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "x").exists()


def test_credentials_set_after_a_refused_read_count_once_the_caches_are_cleared(
        s3_release, demo_zip, monkeypatch, tmp_path):
    """guideloom keeps its fsspec filesystems in its own caches (not fsspec's instance cache),
    so credentials given after a refused read reach the next read after clear_caches()."""
    from tests.remote_servers import S3_ENV_NAMES

    url, env = s3_release
    for name in S3_ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", env["AWS_ENDPOINT_URL"])  # the keys forgotten
    with pytest.raises(FileNotFoundError, match="credentials"):
        guideloom.load(url)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    guideloom.clear_caches()
    _assert_same(_records("force-curve", data_dir=url, where=_complete),
                 _records("force-curve", data_dir=demo_zip, where=_complete))


def test_an_update_from_an_s3_release_reads_only_the_new_experiments(s3_release, demo_zip,
                                                                      monkeypatch, tmp_path):
    """Issue 32, item 5: ``update=True`` against an object store, as against a folder."""
    from tests.export_helpers import COUNT_FILE_ENV, COUNTED_CODE_VERSION, counted_first_rows

    url, env = s3_release
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    log = tmp_path / "decoded.txt"
    monkeypatch.setenv(COUNT_FILE_ENV, str(log))
    out, full = tmp_path / "out", tmp_path / "full"
    options = {"kind": "npy", "record_transform": counted_first_rows, "client": "sync",
               "show_progress": False, "code_version": COUNTED_CODE_VERSION}
    guideloom.export.export("force-curve", out, data_dir=url, sim_ids=range(30), **options)
    log.unlink()
    result = guideloom.export.export("force-curve", out, data_dir=url, update=True, **options)
    assert sorted(int(x) for x in log.read_text().split()) == list(range(30, 36))
    assert result.update == {"added": 6, "removed": 0, "changed": 0, "carried": 30}
    guideloom.export.export("force-curve", full, data_dir=demo_zip, **options)
    assert (out / "force.npy").read_bytes() == (full / "force.npy").read_bytes()
    assert (out / "checksums.json").read_bytes() == (full / "checksums.json").read_bytes()
