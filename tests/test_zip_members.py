"""Zip archives whose central directory lies: entries pointing at other members' bytes,
overlapping members, two members for one id (real archives patched in place)."""

from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np
import pytest

import guideloom
from guideloom import streaming
from guideloom.demo import make_demo_data
from guideloom.errors import CorruptDataError, ExtractError, ManifestError
from guideloom.export.extract import extract_zips
from tests import export_helpers as helpers
from tests.zip_helpers import (
    member_bytes,
    patch_central_entry,
    rebuild_archive,
    smuggle_member,
)


@pytest.fixture
def data(tmp_path) -> Path:
    make_demo_data(tmp_path / "data", n=6, layout="zip", seed=0)
    return tmp_path / "data"


def _infos(archive: Path) -> dict[str, zipfile.ZipInfo]:
    with zipfile.ZipFile(archive) as zf:
        return {i.filename: i for i in zf.infolist()}


def _export(data: Path, target: Path, **options):
    return guideloom.export_to_numpy("force-curve", target, data_dir=data, client="sync",
                                     record_transform=helpers.first_rows, **options)


def _reference(tmp_path: Path, data: Path, ids: list[int]) -> np.ndarray:
    clean = tmp_path / "clean"
    make_demo_data(clean, n=6, layout="zip", seed=0)
    _export(clean, tmp_path / "ref", sim_ids=ids)
    return guideloom.load_export(tmp_path / "ref").batch(np.arange(len(ids)))["force"]


def test_an_entry_pointing_at_another_members_header_is_refused(data, tmp_path):
    archive = data / "concave.zip"
    infos = _infos(archive)
    patch_central_entry(archive, "0003.h5", header_offset=infos["0004.h5"].header_offset,
                        compress_size=infos["0004.h5"].compress_size,
                        file_size=infos["0004.h5"].file_size)
    with pytest.raises(zipfile.BadZipFile):  # Python's zipfile refuses the archive too
        member_bytes(archive, "0003.h5")
    with pytest.raises(CorruptDataError) as info:
        _export(data, tmp_path / "o", sim_ids=[3, 4])
    assert info.value.sim_id == 3
    assert info.value.file == f"{archive}::0003.h5"
    assert "points at the local header of '0004.h5'" in str(info.value)
    assert not (tmp_path / "o").exists()
    with pytest.warns(guideloom.SkippedDataWarning, match="3"):
        _export(data, tmp_path / "skip", sim_ids=[3, 4], on_error="skip")
    export = guideloom.load_export(tmp_path / "skip")
    assert export.sim_ids.tolist() == [4]  # the genuine owner of those bytes is kept
    np.testing.assert_array_equal(export[0]["force"], _reference(tmp_path, data, [4])[0])


def test_members_whose_bytes_overlap_are_refused(data, tmp_path):
    archive = data / "concave.zip"
    infos = _infos(archive)
    grown = infos["0004.h5"].header_offset + 100 - infos["0003.h5"].header_offset
    patch_central_entry(archive, "0003.h5", compress_size=grown, file_size=grown)
    for sim_id in (3, 4):
        with pytest.raises(CorruptDataError, match="overlap") as info:
            _export(data, tmp_path / "o", sim_ids=[sim_id])
        assert info.value.sim_id == sim_id
        assert info.value.file == f"{archive}::{sim_id:04d}.h5"
    with pytest.warns(guideloom.SkippedDataWarning):
        _export(data, tmp_path / "skip", on_error="skip")
    assert guideloom.load_export(tmp_path / "skip").sim_ids.tolist() == [0, 1, 2, 5]


@pytest.fixture
def small(tmp_path) -> tuple[Path, Path]:
    """Two copies of a demo dataset whose members (about 60 KB) fit in one extra field: the
    one to damage and a clean one."""
    for name in ("data", "clean"):
        make_demo_data(tmp_path / name, n=6, layout="zip", scan_shape=(4, 4), seed=0)
    return tmp_path / "data", tmp_path / "clean"


def _records(data_dir: str | Path, ids: list[int], **options) -> dict[int, np.ndarray]:
    return {r["_sim_id"]: r["force_data"] for r in streaming.iter_view(
        "force-curve", data_dir=data_dir, sim_ids=ids, **options)}


@pytest.mark.parametrize("verify_crc", [False, True])
def test_a_local_header_whose_extra_field_reaches_over_the_next_member_is_refused(
        small, tmp_path, verify_crc):
    """Member 0003's local header has an extra field that covers 0004's local header, so its
    data starts where 0004's does, with 0004's size and CRC-32 in its directory entry; by the
    central directory (which has no local extra field) no two members overlap. Python's
    zipfile serves 0003 as 0004's bytes; so did guideloom, with verify_crc too (issue 38).
    Refused, naming the experiment, the archive::member and the member whose bytes it took."""
    data, clean = small
    archive = data / "concave.zip"
    smuggle_member(archive, "0003.h5", "0004.h5")
    assert member_bytes(archive, "0003.h5") == member_bytes(clean / "concave.zip", "0004.h5")
    from guideloom.read.zipdir import archive_members, overlapping_members
    assert overlapping_members(archive_members(archive)) == {}  # the directory alone is clean
    with pytest.raises(CorruptDataError) as info:
        _export(data, tmp_path / "o", sim_ids=[3, 4], verify_crc=verify_crc)
    assert info.value.sim_id == 3
    assert info.value.file == f"{archive}::0003.h5"
    assert "extra field" in str(info.value)
    assert "'0004.h5'" in str(info.value)
    assert not (tmp_path / "o").exists()
    with pytest.warns(guideloom.SkippedDataWarning, match="3"):
        _export(data, tmp_path / "skip", on_error="skip", verify_crc=verify_crc)
    assert guideloom.load_export(tmp_path / "skip").sim_ids.tolist() == [0, 1, 2, 4, 5]
    got, want = _records(data, [4], verify_crc=verify_crc), _records(clean, [4])
    np.testing.assert_array_equal(got[4], want[4])  # the owner of those bytes reads as itself


def test_the_smuggled_member_is_refused_over_http_and_by_extract(small):
    """The same archive read where it lives (HTTP range reads: the local header comes with
    the member's first bytes, another code path) and extracted to loose files."""
    from tests.http_server import serve

    data, clean = small
    archive = data / "concave.zip"
    smuggle_member(archive, "0003.h5", "0004.h5")
    with serve(data) as (url, _):
        with pytest.raises(CorruptDataError) as info:
            _records(url, [3])
        assert info.value.sim_id == 3
        assert info.value.file.endswith("concave.zip::0003.h5")
        assert "'0004.h5'" in str(info.value)
        got = _records(url, [4, 5])
    guideloom.clear_caches()  # the pooled connections to the stopped server
    want = _records(clean, [4, 5])
    for sim_id in (4, 5):
        np.testing.assert_array_equal(got[sim_id], want[sim_id])
    with pytest.raises(ExtractError) as failed:
        extract_zips(data, client="sync")
    assert [e.sim_id for e in failed.value.errors] == [3]
    assert "'0004.h5'" in str(failed.value.errors[0])
    assert not (data / "h5" / "0003.h5").exists()
    assert (data / "h5" / "0004.h5").is_file()


@pytest.mark.parametrize("where", ["same archive", "another archive"])
def test_two_members_for_one_id_are_refused(data, tmp_path, where):
    archive = data / "concave.zip"
    if where == "same archive":
        rebuild_archive(archive, {"3.h5": member_bytes(archive, "0004.h5")})
        other = f"{archive}::3.h5"
    else:
        rebuild_archive(data / "convex.zip", {"0003.h5": member_bytes(archive, "0004.h5")})
        other = f"{data / 'convex.zip'}::0003.h5"
    with pytest.raises(ManifestError) as info:
        _export(data, tmp_path / "o")
    text = str(info.value)
    assert "two zip members hold experiment 3" in text
    assert f"{archive}::0003.h5" in text
    assert other in text
    assert not (tmp_path / "o").exists()
    with pytest.raises(ManifestError, match="two zip members hold experiment 3"):
        extract_zips(data, client="sync")  # extracting picks neither
    assert not (data / "h5").exists()


# --- zip bombs ------------------------------------------------------------------------------
BOMB_BYTES = 3 << 29  # 1.5 GiB of zeros, about 7 MB deflated
LIMITED_RUN = """
import resource, sys
import guideloom
from tests import export_helpers
resource.setrlimit(resource.RLIMIT_DATA, (1 << 30, 1 << 30))  # this process: 1 GiB of data
try:
    guideloom.export_to_numpy("force-curve", sys.argv[1], data_dir=sys.argv[2], client="sync",
                              record_transform=export_helpers.first_rows, on_error=sys.argv[3])
except Exception as exc:
    print("error", type(exc).__name__, getattr(exc, "sim_id", None), getattr(exc, "file", None))
    print("message", exc)
    sys.exit(3)
print("ids", guideloom.load_export(sys.argv[1]).sim_ids.tolist())
"""


def _bomb_archive(archive: Path, member: str) -> None:
    with zipfile.ZipFile(archive) as zf:
        keep = {n: zf.read(n) for n in zf.namelist() if n != member}
    partial = archive.with_name(archive.name + ".partial")
    with zipfile.ZipFile(partial, "w") as zf:
        for name, blob in keep.items():
            zf.writestr(name, blob)
        info = zipfile.ZipInfo(member)
        info.compress_type = zipfile.ZIP_DEFLATED
        block = bytes(16 << 20)
        with zf.open(info, "w", force_zip64=True) as out:
            for _ in range(BOMB_BYTES // len(block)):
                out.write(block)
    partial.replace(archive)


def _limited_run(tmp_path: Path, data: Path, on_error: str) -> tuple[int, str]:
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", LIMITED_RUN, str(tmp_path / on_error),
                           str(data), on_error], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(root)})
    return done.returncode, done.stdout + done.stderr[-2000:]


@pytest.mark.slow
def test_a_zip_bomb_is_refused_naming_the_member_and_skipped_on_request(data, tmp_path):
    archive = data / "concave.zip"
    _bomb_archive(archive, "0003.h5")
    code, out = _limited_run(tmp_path, data, "raise")
    assert code == 3, out
    assert f"error CorruptDataError 3 {archive}::0003.h5" in out
    assert "inflates to 1.50 GiB, more than the" in out
    assert "MemoryError" not in out
    code, out = _limited_run(tmp_path, data, "skip")
    assert code == 0, out
    assert "ids [0, 1, 2, 4, 5]" in out


@pytest.mark.fast_case("larger")
@pytest.mark.parametrize("declared", ["smaller", "larger", "impossible"])
def test_a_deflated_member_that_lies_about_its_size_is_refused(data, tmp_path, declared):
    archive = data / "concave.zip"
    rebuild_archive(archive, compression=zipfile.ZIP_DEFLATED)
    real = _infos(archive)["0003.h5"]
    size = {"smaller": real.file_size // 2, "larger": real.file_size + 4096,
            "impossible": real.compress_size * 2000}[declared]
    patch_central_entry(archive, "0003.h5", file_size=size)
    with pytest.raises(CorruptDataError) as info:
        _export(data, tmp_path / "o", sim_ids=[3])
    assert info.value.sim_id == 3
    assert info.value.file == f"{archive}::0003.h5"
    if declared == "impossible":
        assert "more than deflate can produce" in str(info.value)
    with pytest.warns(guideloom.SkippedDataWarning):
        _export(data, tmp_path / "skip", sim_ids=[2, 3, 4], on_error="skip")
    assert guideloom.load_export(tmp_path / "skip").sim_ids.tolist() == [2, 4]
