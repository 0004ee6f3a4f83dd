"""``guideloom serve-release DIR``: the "From DaRUS" steps rehearsed offline, on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import guideloom
from guideloom.net.dataverse import RDDAC_DOI, dataset_versions
from guideloom.releases.server import (
    PUBLISHED_SAMPLE_IDS,
    make_demo_release,
    release_files,
    serve_release,
)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def demo_release(tmp_path_factory) -> Path:
    return make_demo_release(tmp_path_factory.mktemp("served") / "rel", n=6)


def cli(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "guideloom", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


def test_a_served_folder_lists_and_downloads_as_darus_does(tmp_path, demo_release):
    with serve_release(demo_release) as server:
        assert server.url.startswith("http://127.0.0.1:")
        versions = dataset_versions(server=server.url, doi=RDDAC_DOI)
        report = guideloom.download(tmp_path / "data", small=True, server=server.url,
                                    show_progress=False)
        again = guideloom.download(tmp_path / "data", small=True, server=server.url,
                                   show_progress=False)
    assert [(v["versionNumber"], len(v["files"])) for v in versions] == [(2, 5)]
    assert sorted(report.downloaded) == ["h5/sample.zip", "metadata.json",
                                         "process_parameters.csv"]
    assert again.downloaded == []
    assert len(again.present) == 3
    for name in ("metadata.json", "process_parameters.csv"):
        assert (tmp_path / "data" / name).read_bytes() == (demo_release / name).read_bytes()
    assert (tmp_path / "data" / "h5" / "sample.zip").read_bytes() == \
        (demo_release / "sample.zip").read_bytes()


def test_the_served_files_are_the_folders_with_zips_in_h5(demo_release):
    files = release_files(demo_release)
    assert sorted((f.directory, f.name) for f in files) == [
        ("", "metadata.json"), ("", "process_parameters.csv"), ("h5", "concave.zip"),
        ("h5", "convex.zip"), ("h5", "sample.zip")]
    with pytest.raises(FileNotFoundError, match="no such release folder"):
        release_files(demo_release / "nope")


@pytest.mark.slow  # fast sibling: test_a_served_folder_lists_and_downloads_as_darus_does
def test_the_readme_rehearsal_info_download_resume_and_a_doi_run(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "guideloom", "serve-release", "rel",
                             "--demo", "--rate", "300000"], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = proc.stdout.readline()
        assert "(127.0.0.1 only)" in first, first + proc.stderr.read()
        url = first.split(" at ")[1].split()[0]
        for _ in range(3):
            proc.stdout.readline()
        info = cli(tmp_path, "info", "--server", url)
        assert info.returncode == 0, info.stderr
        assert "2.0" in info.stdout
        assert "first version" in info.stdout
        # a download stopped halfway (SIGKILL) and resumed
        part = tmp_path / "data" / "h5" / "concave.zip.part"
        dl = subprocess.Popen([sys.executable, "-m", "guideloom", "download", "--quiet",
                               "--files", "concave.zip", "--server", url], cwd=tmp_path,
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while not (part.exists() and part.stat().st_size > 100_000):
            assert dl.poll() is None
            assert time.monotonic() < deadline
            time.sleep(0.01)
        dl.send_signal(signal.SIGKILL)
        dl.wait(timeout=30)
        had = part.stat().st_size
        version = json.loads((tmp_path / "data" / "h5" / "concave.zip.part.json").read_text())
        assert version["if_range"].startswith('"')  # the ETag the part is of
        resumed = cli(tmp_path, "download", "--yes", "--files", "concave.zip", "--server", url)
        assert resumed.returncode == 0, resumed.stderr
        full = (tmp_path / "rel" / "concave.zip").read_bytes()
        assert (tmp_path / "data" / "h5" / "concave.zip").read_bytes() == full
        assert 0 < had < len(full)
        assert not part.exists()
        small = cli(tmp_path, "download", "--small", "--yes", "--server", url)
        assert small.returncode == 0, small.stderr
        run = cli(tmp_path, "run", "force_signals", "--data-dir", RDDAC_DOI, "--server", url,
                  "--output", "exports/fs", "--scheduler", "sync")
        assert run.returncode == 0, run.stderr
        # the demo's experiments 0..11 and the published sample's 18 ids (issue 41)
        assert guideloom.load_export(tmp_path / "exports" / "fs").sim_ids.tolist() == \
            sorted(set(range(12)) | set(PUBLISHED_SAMPLE_IDS))
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0
    assert out.strip().endswith("stopped")
