"""``storage_options=`` (fsspec options, as ``xr.open_zarr`` and ``pd.read_csv`` take them) for
a remote ``data_dir``, against a SeaweedFS S3 server on 127.0.0.1 that refuses any key but its
own: the credentials and the endpoint reach every reader, in this process and on the Dask
workers of a real LocalCluster, only through ``storage_options`` (no ``AWS_*`` or
``FSSPEC_S3`` anywhere), and the secret appears in no export file, log line or error message.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

import guideloom
from tests.remote_helpers import assert_same as _assert_same
from tests.remote_helpers import records as _records
from tests.remote_helpers import s3_options as _options
from tests.remote_helpers import upload as _upload
from tests.remote_servers import S3_ENV_NAMES as ENV_NAMES
from tests.remote_servers import S3_KEY as KEY
from tests.remote_servers import S3_SECRET as SECRET

s3fs = pytest.importorskip("s3fs")

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def zip_url(private_s3, demo_zip):
    return _upload(private_s3, demo_zip)


def _complete(row) -> bool:
    return row["has_pointcloud"] and row["has_oil"]


def _files_hold(folder: Path, text: str) -> list[str]:
    return [str(p) for p in folder.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


def _array_bytes(export: Path) -> dict[str, bytes]:
    """Every written array file of a numpy export, by name (export.json left out)."""
    found = {p.relative_to(export).as_posix(): p.read_bytes()
             for p in sorted(export.rglob("*.npy"))}
    assert found
    return found


def test_without_storage_options_the_private_server_refuses_and_the_url_is_named(
        private_s3, zip_url, no_aws_env):
    with pytest.raises(Exception) as info:
        guideloom.load(zip_url)
    assert zip_url in str(info.value)
    assert "storage_options" in str(info.value)
    with pytest.raises(Exception) as wrong:
        guideloom.load(zip_url, storage_options=_options(private_s3, secret="wrong-" + SECRET))
    assert zip_url in str(wrong.value)
    assert SECRET not in str(wrong.value)


def test_storage_options_alone_read_s3_in_process_equal_to_local(private_s3, zip_url,
                                                                  demo_zip, no_aws_env):
    options = _options(private_s3)
    for view in ("force-curve", "pointcloud-op10"):
        _assert_same(_records(view, data_dir=zip_url, storage_options=options, where=_complete),
                     _records(view, data_dir=demo_zip, where=_complete))
    ds = guideloom.load(zip_url, storage_options=options)  # kept with the dataset
    _assert_same(_records("force-curve", dataset=ds), _records("force-curve", data_dir=demo_zip))
    assert SECRET not in repr(ds)
    assert SECRET not in str(ds.data_dir)


def test_storage_options_reach_the_workers_of_a_local_cluster_and_no_file_or_log(
        private_s3, zip_url, demo_zip, no_aws_env, dask_client, tmp_path, caplog, capsys):
    def worker_env() -> list[str]:
        import os as _os

        return [n for n in ENV_NAMES if n in _os.environ]

    assert all(v == [] for v in dask_client.run(worker_env).values())
    caplog.set_level(logging.DEBUG)
    local, remote = tmp_path / "local", tmp_path / "s3"
    guideloom.export_to_numpy("pointcloud-op10", local, data_dir=demo_zip, client="sync",
                              where=_complete, show_progress=False)
    result = guideloom.export_to_numpy("pointcloud-op10", remote, data_dir=zip_url,
                                       where=_complete,
                                       storage_options=_options(private_s3),
                                       client=dask_client, partition_size=4,
                                       show_progress=True)
    assert result
    assert _array_bytes(remote) == _array_bytes(local)  # byte for byte
    doc = json.loads((remote / "export.json").read_text())
    assert doc["data_dir"] == zip_url  # the URL is recorded, the options are not
    assert _files_hold(remote, SECRET) == []
    assert _files_hold(remote, KEY) == []
    out = capsys.readouterr()
    assert SECRET not in out.out + out.err
    assert SECRET not in caplog.text
    assert caplog.records


def test_storage_options_for_a_local_data_dir_are_refused_without_the_secret(demo_zip):
    with pytest.raises(ValueError, match="remote data_dir") as info:
        list(guideloom.iter_view("force-curve", data_dir=demo_zip,
                                 storage_options={"secret": SECRET}))
    assert SECRET not in str(info.value)


def test_cli_storage_option_and_workflow_storage_options_in_a_clean_process(
        private_s3, zip_url, demo_zip, tmp_path):
    from guideloom.workflows import find_shipped

    shipped = find_shipped("force_signals").read_text()  # the same job, data on S3
    assert 'data_dir = "demo-data"' in shipped
    assert 'path = "exports/force-signals"' in shipped
    workflow = tmp_path / "wf.toml"
    workflow.write_text(shipped.replace('data_dir = "demo-data"', (
        f'data_dir = "{zip_url}"\n'
        "[dataset.storage_options]\n"
        f'client_kwargs = {{ endpoint_url = "{private_s3.url}", region_name = "us-east-1" }}\n'
    )).replace('path = "exports/force-signals"', 'path = "out"'))
    env = {k: v for k, v in os.environ.items() if k not in ENV_NAMES}
    env.update({"PYTHONPATH": str(REPO), "GUIDELOOM_CACHE_DIR": str(tmp_path / "cache"),
                "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
                "AWS_CONFIG_FILE": str(tmp_path / "none")})
    base = [sys.executable, "-m", "guideloom", "run"]
    ref = subprocess.run([*base, "force_signals", "--data-dir", str(demo_zip), "--output",
                          str(tmp_path / "local")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert ref.returncode == 0, ref.stderr
    refused = subprocess.run([*base, str(workflow), "--output", str(tmp_path / "refused")],
                             cwd=tmp_path, env=env, capture_output=True, text=True,
                             timeout=300)
    assert refused.returncode != 0, refused.stderr
    assert zip_url in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    assert not (tmp_path / "refused").exists()
    proc = subprocess.run([*base, str(workflow), "--storage-option", f"key={KEY}",
                           f"--storage-option=secret={SECRET}"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    assert _array_bytes(tmp_path / "out") == _array_bytes(tmp_path / "local")
    assert _files_hold(tmp_path / "out", SECRET) == []
    bad = subprocess.run([*base, str(workflow), "--storage-option", f"{SECRET}"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2
    assert "KEY=VALUE" in bad.stderr
    assert SECRET not in bad.stderr


def test_a_failed_cli_run_stores_and_prints_no_secret(private_s3, demo_copy, tmp_path):
    from tests.zip_helpers import corrupt_member

    corrupt_member(demo_copy / "concave.zip", "0003.h5", 0, b"\0" * 512)  # the superblock
    url = _upload(private_s3, demo_copy)
    env = {k: v for k, v in os.environ.items() if k not in ENV_NAMES}
    env.update({"PYTHONPATH": str(REPO), "GUIDELOOM_CACHE_DIR": str(tmp_path / "cache"),
                "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
                "AWS_CONFIG_FILE": str(tmp_path / "none")})
    proc = subprocess.run(
        [sys.executable, "-m", "guideloom", "run", "force_signals", "--data-dir", url,
         "--output", str(tmp_path / "out"), "--storage-option", f"key={KEY}",
         "--storage-option", f"secret={SECRET}",
         f"--storage-option=client_kwargs={json.dumps({'endpoint_url': private_s3.url})}"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0, proc.stderr
    assert "experiment 3" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert SECRET not in proc.stdout + proc.stderr
    assert not (tmp_path / "out" / "export.json").exists()
    assert _files_hold(tmp_path, SECRET) == []  # the staged job and its resume hint included
    status = subprocess.run([sys.executable, "-m", "guideloom", "status", str(tmp_path / "out")],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert SECRET not in status.stdout + status.stderr
    assert "--storage-option secret=..." in status.stdout + proc.stderr, status.stdout


def test_storage_options_for_an_https_root_go_through_fsspec_http(demo_zip, tmp_path,
                                                                  monkeypatch):
    from tests.dataverse_server import serve

    monkeypatch.setenv("GUIDELOOM_CACHE_DIR", str(tmp_path / "cache"))
    options = {"headers": {"X-Dataverse-key": "a-header-fsspec-sends"}}
    with serve(static=demo_zip) as server:
        _assert_same(_records("force-curve", data_dir=server.url, storage_options=options),
                     _records("force-curve", data_dir=demo_zip))
        log = server.log
    assert log
    assert all(e.token for e in log)
