"""extract_zips: zipped layout to loose h5/ files on real zips and a real LocalCluster."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

import guideloom
from guideloom.errors import CorruptDataError
from guideloom.export.extract import ExtractError, extract_zips
from guideloom.read.scan import scan_locations
from tests.zip_helpers import corrupt_member

ALL_IDS = list(range(36))
ARCHIVES = ("concave.zip", "convex.zip")
VIEWS = {  # view -> the index filter that makes every remaining experiment have its fields
    "force-curve": None,
    "thickness": lambda row: row["has_oil"],
    "pointcloud-op10": lambda row: row["has_pointcloud"],
}


def _records(data_dir: Path) -> dict[str, dict]:
    out = {}
    for view, where in VIEWS.items():
        records = guideloom.streaming.iter_view(view, data_dir=data_dir, where=where)
        out[view] = {r["_sim_id"]: r for r in records}
    return out


def _assert_same_records(before: dict, after: dict) -> None:
    assert before.keys() == after.keys()
    for view in before:
        assert before[view].keys() == after[view].keys()
        assert before[view]
        for sim_id, rec in before[view].items():
            other = after[view][sim_id]
            assert rec.keys() == other.keys()
            for alias, value in rec.items():
                np.testing.assert_array_equal(np.asarray(value), np.asarray(other[alias]))


def _members(data_dir: Path) -> dict[str, bytes]:
    """Bytes of every member of the demo archives, by member name."""
    out = {}
    for name in ARCHIVES:
        with zipfile.ZipFile(data_dir / name) as zf:
            for info in zf.infolist():
                out[info.filename] = zf.read(info)
    return out


def _loose(data_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((data_dir / "h5").iterdir())}


def _files_under(root: Path) -> set[Path]:
    return {Path(d, f) for d, _, files in os.walk(root) for f in files}


def _deflate_archives(data_dir: Path) -> None:
    for name in ARCHIVES:
        members = []
        with zipfile.ZipFile(data_dir / name) as zf:
            members = [(info.filename, zf.read(info)) for info in zf.infolist()]
        with zipfile.ZipFile(data_dir / name, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for member, payload in members:
                zf.writestr(member, payload)


def test_round_trip_on_cluster_is_byte_exact_and_records_unchanged(demo_copy, dask_client):
    from distributed import get_task_stream

    before = _records(demo_copy)
    members = _members(demo_copy)
    with get_task_stream(client=dask_client) as stream:
        report = extract_zips(demo_copy, client=dask_client, partition_size=5)
    assert sorted(report.extracted) == ALL_IDS
    assert report.skipped_existing == []
    assert report.removed_archives == []
    assert report.failed == []
    assert report.bytes == sum(len(b) for b in members.values())
    loose = _loose(demo_copy)
    assert loose == members  # same names (0042.h5), same bytes; no temporary files left
    assert all((demo_copy / name).is_file() for name in ARCHIVES)  # kept without remove_zip
    locations = scan_locations(guideloom.load(demo_copy), demo_copy)
    assert all(loc.member is None and Path(loc.path).parent.name == "h5"
               for loc in locations.values())
    _assert_same_records(before, _records(demo_copy))
    from dask.utils import key_split

    extract = [task["key"] for task in stream.data if key_split(task["key"]) == "extract"]
    assert {key[1] for key in extract} == {"concave.zip", "convex.zip"}
    assert len(extract) == 8  # 18 + 18 by 5


def test_sync_and_cluster_write_the_same_files(demo_zip, tmp_path, dask_client):
    on_sync, on_cluster = tmp_path / "sync", tmp_path / "cluster"
    shutil.copytree(demo_zip, on_sync)
    shutil.copytree(demo_zip, on_cluster)
    a = extract_zips(on_sync, client="sync")
    b = extract_zips(on_cluster, client=dask_client, partition_size=3)
    assert a.extracted == b.extracted
    assert a.bytes == b.bytes
    assert _loose(on_sync) == _loose(on_cluster)
    assert len(_loose(on_sync)) == 36


def test_deflated_members_stream_out_byte_exact(demo_copy):
    stored = _members(demo_copy)
    _deflate_archives(demo_copy)
    with zipfile.ZipFile(demo_copy / "concave.zip") as zf:
        assert {i.compress_type for i in zf.infolist()} == {zipfile.ZIP_DEFLATED}
    report = extract_zips(demo_copy, client="sync", remove_zip=True)
    assert sorted(report.extracted) == ALL_IDS
    assert _loose(demo_copy) == stored
    assert not any((demo_copy / name).exists() for name in ARCHIVES)


def test_remove_zip_deletes_archives_after_success(demo_copy, dask_client):
    before = _records(demo_copy)
    report = extract_zips(demo_copy, client=dask_client, remove_zip=True)
    assert sorted(report.removed_archives) == [str(demo_copy / name) for name in ARCHIVES]
    assert report.kept_archives == {}
    assert not any((demo_copy / name).exists() for name in ARCHIVES)
    assert len(_loose(demo_copy)) == 36
    _assert_same_records(before, _records(demo_copy))


def test_rerun_skips_existing_files_and_can_then_remove_archives(demo_copy):
    extract_zips(demo_copy, client="sync")
    inodes = {p.name: p.stat().st_ino for p in (demo_copy / "h5").iterdir()}
    (demo_copy / "h5" / "0004.h5").unlink()
    again = extract_zips(demo_copy, client="sync", remove_zip=True)
    assert again.extracted == [4]
    assert sorted(again.skipped_existing) == [i for i in ALL_IDS if i != 4]
    assert sorted(again.removed_archives) == [str(demo_copy / name) for name in ARCHIVES]
    after = {p.name: p.stat().st_ino for p in (demo_copy / "h5").iterdir()}
    assert {k: v for k, v in after.items() if k != "0004.h5"} == {
        k: v for k, v in inodes.items() if k != "0004.h5"}  # untouched, not rewritten


def test_overwrite_rewrites_and_wrong_size_loose_file_keeps_its_archive(demo_copy):
    members = _members(demo_copy)
    extract_zips(demo_copy, client="sync")
    edited = demo_copy / "h5" / "0002.h5"
    edited.write_bytes(b"not the member")
    inode = edited.stat().st_ino
    report = extract_zips(demo_copy, client="sync", remove_zip=True)
    assert report.extracted == []
    assert edited.read_bytes() == b"not the member"
    assert report.removed_archives == [str(demo_copy / "convex.zip")]
    assert "experiment 2 is already loose" in report.kept_archives[str(demo_copy / "concave.zip")]
    assert (demo_copy / "concave.zip").is_file()
    report = extract_zips(demo_copy, client="sync", overwrite=True, remove_zip=True)
    assert sorted(report.extracted) == [i for i in ALL_IDS if i % 18 < 9]  # concave only
    assert edited.read_bytes() == members["0002.h5"]
    assert edited.stat().st_ino != inode
    assert not (demo_copy / "concave.zip").exists()


@pytest.mark.parametrize("deflated", [False, True])
def test_corrupt_member_names_id_and_archive_and_leaves_no_file(demo_copy, dask_client,
                                                               deflated):
    if deflated:
        _deflate_archives(demo_copy)
    corrupt_member(demo_copy / "concave.zip", "0003.h5", 2000)
    with pytest.raises(ExtractError, match=r"experiment 3: .*concave\.zip::0003\.h5") as info:
        extract_zips(demo_copy, client=dask_client, remove_zip=True, partition_size=4)
    error = info.value
    assert [e.sim_id for e in error.errors] == [3]
    assert error.report.failed == [3]
    assert isinstance(error.errors[0], CorruptDataError)
    assert str(demo_copy / "concave.zip") in error.errors[0].file
    if not deflated:
        assert "CRC-32" in str(error.errors[0])
    h5 = demo_copy / "h5"
    assert not (h5 / "0003.h5").exists()
    assert sorted(p.name for p in h5.iterdir()) == [f"{i:04d}.h5" for i in ALL_IDS if i != 3]
    assert (demo_copy / "concave.zip").is_file()  # a member failed: the archive stays
    assert "experiment 3 failed" in error.report.kept_archives[str(demo_copy / "concave.zip")]
    assert error.report.removed_archives == [str(demo_copy / "convex.zip")]  # all verified


def test_malicious_member_names_never_escape_h5(demo_copy, tmp_path):
    members = _members(demo_copy)
    payload_40, payload_41 = members["0000.h5"], members["0001.h5"]
    with zipfile.ZipFile(demo_copy / "concave.zip", "a") as zf:
        zf.writestr("../evil.h5", b"evil")
        zf.writestr("../../0040.h5", payload_40)
        zf.writestr("sub/dir/0041.h5", payload_41)
        zf.writestr("/abs/0042.h5", payload_41)
    before = _files_under(tmp_path)
    report = extract_zips(demo_copy, client="sync", remove_zip=True)
    created = _files_under(tmp_path) - before
    assert all(p.parent == demo_copy / "h5" for p in created)
    assert {p.name for p in created} == {f"{i:04d}.h5" for i in [*ALL_IDS, 40, 41, 42]}
    assert not any(p.name == "evil.h5" for p in _files_under(tmp_path.parent))
    h5 = demo_copy / "h5"
    assert (h5 / "0040.h5").read_bytes() == payload_40
    assert (h5 / "0041.h5").read_bytes() == payload_41
    assert (h5 / "0007.h5").read_bytes() == members["0007.h5"]
    kept = report.kept_archives[str(demo_copy / "concave.zip")]
    assert "'../evil.h5' is not an experiment file" in kept
    assert (demo_copy / "concave.zip").is_file()
    assert report.removed_archives == [str(demo_copy / "convex.zip")]


def test_stale_tmp_files_are_cleaned_and_live_ones_kept(demo_copy):
    finished = subprocess.Popen([sys.executable, "-c", "pass"])
    finished.wait()  # reaped: its pid no longer runs
    h5 = demo_copy / "h5"
    h5.mkdir()
    stale = h5 / f".0005.h5.tmp-{finished.pid}-deadbeef"
    stale.write_bytes(b"half a file from a crashed run")
    live = h5 / f".0006.h5.tmp-{os.getppid()}-0badcafe"
    live.write_bytes(b"a concurrent writer's file")
    report = extract_zips(demo_copy, client="sync")
    assert report.cleaned_tmp == [str(stale)]
    assert not stale.exists()
    assert live.exists()
    assert (h5 / "0005.h5").read_bytes() == _members(demo_copy)["0005.h5"]


def test_unwritable_target_fails_that_member_only_and_leaves_no_tmp(demo_copy):
    h5 = demo_copy / "h5"
    (h5 / "0006.h5").mkdir(parents=True)  # a directory where the file should go
    with pytest.raises(ExtractError, match=r"experiment 6: extracting .*concave\.zip::0006\.h5"):
        extract_zips(demo_copy, client="sync", remove_zip=True)
    assert sorted(p.name for p in h5.iterdir()) == [f"{i:04d}.h5" for i in ALL_IDS]
    assert (h5 / "0006.h5").is_dir()
    assert (demo_copy / "concave.zip").is_file()


def test_remove_zip_keeps_an_archive_whose_member_differs_from_a_same_size_loose_file(
        demo_copy):
    members = _members(demo_copy)
    name = sorted(members)[0]
    (demo_copy / "h5").mkdir(exist_ok=True)
    damaged = bytearray(members[name])
    damaged[len(damaged) // 2] ^= 0xFF  # same size, other bytes
    (demo_copy / "h5" / name).write_bytes(bytes(damaged))
    report = extract_zips(demo_copy, client="sync", remove_zip=True)
    kept = {Path(a).name: why for a, why in report.kept_archives.items()}
    assert len(kept) == 1
    assert len(report.removed_archives) == 1
    (archive, why), = kept.items()
    assert (demo_copy / archive).is_file()  # the only intact copy of that member is kept
    assert f"the loose file {demo_copy / 'h5' / name} differs from the archive's member" in why
    assert (demo_copy / "h5" / name).read_bytes() == bytes(damaged)  # left as it was


def test_a_deflated_member_streams_in_bounded_pieces_checked_at_the_end(demo_copy):
    """Extracting reads members as every reader does (guideloom.read.zipmember): a compressed
    member inflates piece by piece (never whole in memory), and a wrong CRC-32 is raised after
    the last piece, so nothing is kept from a damaged member."""
    import dataclasses

    from guideloom.read.byte_source import LocalFileSource
    from guideloom.read.zipdir import archive_members
    from guideloom.read.zipmember import member_pieces, read_local_header

    members = _members(demo_copy)
    _deflate_archives(demo_copy)
    info = next(m for m in archive_members(demo_copy / "concave.zip") if m.name == "0003.h5")
    loc = next(loc for i, loc in scan_locations(guideloom.load(data_dir=demo_copy),
                                                demo_copy).items() if i == 3)
    assert not loc.stored
    assert loc.crc == info.crc
    with LocalFileSource(loc.path) as source:
        start, _ = read_local_header(source, loc)
        pieces = list(member_pieces(loc, source, start, (info.file_size, info.method), 4096))
        assert b"".join(pieces) == members["0003.h5"]
        assert len(pieces) > 1
        assert max(len(p) for p in pieces) <= 4096
        wrong = dataclasses.replace(loc, crc=info.crc ^ 1)
        got = []
        with pytest.raises(CorruptDataError, match=r"experiment 3: .*Bad CRC-32 of the inflated"):
            for piece in member_pieces(wrong, source, start, (info.file_size, info.method),
                                       4096):
                got.append(piece)
        assert b"".join(got) == members["0003.h5"]  # every piece came, then the refusal


def test_an_encrypted_member_is_refused_naming_it_and_leaves_no_file(demo_copy):
    """Zip's "encrypted" flag (general purpose bit 0), set in the member's central directory
    entry and local header: extract refuses that member by name, the others are extracted."""
    from guideloom.read.zipdir import archive_members

    archive = demo_copy / "concave.zip"
    info = next(m for m in archive_members(archive) if m.name == "0005.h5")
    blob = bytearray(archive.read_bytes())
    blob[info.header_offset + 6] |= 0x1  # the local header's flags
    central = blob.index(b"PK\x01\x02")  # the first entry; then 0005.h5's
    while blob[central + 46:central + 46 + len(b"0005.h5")] != b"0005.h5":
        central = blob.index(b"PK\x01\x02", central + 4)
    blob[central + 8] |= 0x1  # the central directory entry's flags
    archive.write_bytes(bytes(blob))
    with pytest.raises(ExtractError, match=r"experiment 5: .*concave\.zip::0005\.h5 is "
                                           r"encrypted"):
        extract_zips(demo_copy, client="sync")
    assert not (demo_copy / "h5" / "0005.h5").exists()
    assert len(list((demo_copy / "h5").glob("*.h5"))) == len(ALL_IDS) - 1
