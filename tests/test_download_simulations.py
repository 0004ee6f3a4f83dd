"""``guideloom download`` brings DDACS's simulations into ``OUT/simulation/`` as ``rddac
download`` does (a full download; ``--no-sim`` skips them), with the measurements' checks,
resume and record; served by the test Dataverse server beside the RDDAC release."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import guideloom
from guideloom.errors import DownloadError
from guideloom.releases.release import SIM_FILES, wants_simulations
from tests import pointcloud_helpers as ph
from tests.dataverse_server import Faults, Release, make_release, serve, sim_release

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def release(tmp_path_factory: pytest.TempPathFactory) -> Release:
    base = tmp_path_factory.mktemp("release")
    rddac = make_release(base, n=4)
    ph.write_simulations(base / "ddacs")
    rddac.also = [sim_release(base / "ddacs")]
    return rddac


def _sims_of(release: Release) -> dict[str, bytes]:
    return {f.name: f.data for f in release.also[0].files}


def test_when_the_simulations_come() -> None:
    assert wants_simulations(None, small=False, no_sim=False)
    assert not wants_simulations(None, small=False, no_sim=True)
    assert not wants_simulations(None, small=True, no_sim=False)
    assert not wants_simulations(["concave.zip"], small=False, no_sim=False)
    assert not wants_simulations(None, small=False, no_sim=False, doi="doi:10.1/OTHER")


def test_full_download_brings_them_verified_and_once(tmp_path: Path, release: Release) -> None:
    with serve(release) as server:
        report = guideloom.download(tmp_path / "out", server=server.url, show_progress=False)
        sims = tmp_path / "out" / "simulation"
        assert sorted(report.simulations.downloaded) == sorted(SIM_FILES)
        for name, data in _sims_of(release).items():
            assert (sims / name).read_bytes() == data
        assert any("persistentId=doi:10.18419/DARUS-4801" in e.path for e in server.log)
        before = len(server.access_log())
        again = guideloom.download(tmp_path / "out", server=server.url, show_progress=False)
        assert len(server.access_log()) == before  # all present and verified: nothing fetched
        assert sorted(again.simulations.present) == sorted(SIM_FILES)
    # the folder is a DDACS data folder the pointcloud stage reads
    from guideloom.preprocess.pointcloud.simulations import Simulations

    table = Simulations(str(sims)).table()
    assert [int(r["index"]) for r in table] == [r["index"] for r in ph.sim_rows() if r["rddac"]]


def test_no_sim_and_small_skip_them(tmp_path: Path, release: Release) -> None:
    with serve(release) as server:
        report = guideloom.download(tmp_path / "a", server=server.url, show_progress=False,
                                    no_sim=True)
        assert report.simulations is None
        assert not (tmp_path / "a" / "simulation").exists()
        guideloom.download(tmp_path / "b", small=True, server=server.url, show_progress=False)
        assert not (tmp_path / "b" / "simulation").exists()
        assert not any("persistentId=doi:10.18419/DARUS-4801" in e.path for e in server.log)


def test_a_damaged_simulation_archive_is_never_left_under_its_name(tmp_path: Path,
                                                                 release: Release) -> None:
    with serve(release, Faults(damaged={"rddac.zip"})) as server:
        with pytest.raises(DownloadError, match=r"rddac.zip"):
            guideloom.download(tmp_path / "out", server=server.url, show_progress=False,
                               retries=1)
    sims = tmp_path / "out" / "simulation"
    assert not (sims / "rddac.zip").exists()
    assert not (sims / "rddac.zip.part").exists()
    assert (tmp_path / "out" / "h5" / "concave.zip").is_file()  # the measurements are there


def test_cli_no_sim(tmp_path: Path, release: Release) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with serve(release) as server:
        skipped = subprocess.run([sys.executable, "-m", "guideloom", "download", "--yes",
                                  "--no-sim", "--out", "a", "--server", server.url],
                                 cwd=tmp_path, env=env, capture_output=True, text=True,
                                 timeout=300)
        full = subprocess.run([sys.executable, "-m", "guideloom", "download", "--yes",
                               "--out", "b", "--server", server.url], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
    assert skipped.returncode == 0, skipped.stderr
    assert not (tmp_path / "a" / "simulation").exists()
    assert (tmp_path / "a" / "h5").is_dir()
    assert full.returncode == 0, full.stderr
    assert "skip them with --no-sim" in full.stdout
    for name, data in _sims_of(release).items():
        assert (tmp_path / "b" / "simulation" / name).read_bytes() == data
