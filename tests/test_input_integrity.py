"""Damaged input, found or knowingly trusted: zip CRC-32 checks (``verify_crc``) and damaged
HDF5 metadata, on real archives and files written by h5py.

A byte flipped inside an uncompressed dataset of a stored member is read in place without any
check by default (the documented partial-read trust); ``verify_crc=True`` finds it before the
data is used. A deflated member is inflated whole, so zipfile checks its CRC-32 always.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest

import guideloom
from guideloom.errors import CorruptDataError, IncompleteExportError, SkippedDataWarning
from guideloom.export import build_spec, plan_export
from guideloom.read import zipmember
from guideloom.read.byte_source import LocalFileSource
from guideloom.read.scan import scan_locations
from tests.zip_helpers import corrupt_member, member_bytes, rebuild_archive

ARCHIVE, MEMBER, VICTIM = "concave.zip", "0004.h5", 4
FLIPPED_ELEMENT = 37  # of force/data, flattened
CRC_ERROR = r"experiment 4: .*concave\.zip::0004\.h5: CRC-32 mismatch"


def uncompressed_member(data: bytes, h5_path: str, scratch: Path) -> tuple[bytes, int]:
    """``data`` (an HDF5 file) with ``h5_path`` rewritten contiguous and unfiltered, and the
    byte offset of that dataset's values in the file."""
    path = scratch / "member.h5"
    path.write_bytes(data)
    with h5py.File(path, "a") as f:
        values = f[h5_path][()]
        del f[h5_path]
        f.create_dataset(h5_path, data=values)
        offset = f[h5_path].id.get_offset()
    assert offset is not None
    return path.read_bytes(), offset


@pytest.fixture
def flipped(demo_copy, tmp_path) -> tuple[Path, np.ndarray, np.ndarray]:
    """The demo data with member 0004.h5's ``force/data`` stored uncompressed and one byte of
    it flipped in the archive (the CRC-32 in the zip headers is the intact one's).

    Returns the data directory, the intact array and the array the damaged bytes hold.
    """
    archive = demo_copy / ARCHIVE
    data, offset = uncompressed_member(member_bytes(archive, MEMBER), "force/data", tmp_path)
    rebuild_archive(archive, {MEMBER: data})
    with h5py.File(tmp_path / "member.h5") as f:
        intact = f["force/data"][()]
    damaged = intact.copy()
    damaged.reshape(-1).view(np.uint8)[FLIPPED_ELEMENT * 4] ^= 0x01
    byte = bytes([data[offset + FLIPPED_ELEMENT * 4] ^ 0x01])
    corrupt_member(archive, MEMBER, offset + FLIPPED_ELEMENT * 4, byte)
    zipmember.forget_verified()
    return demo_copy, intact, damaged


# --- stored members: trusted by default, checked with verify_crc -----------------------------
def test_by_default_a_partial_read_is_trusted_and_exports_the_flipped_byte(flipped, tmp_path):
    data, intact, damaged = flipped
    rec = next(guideloom.streaming.iter_view("force-curve", data_dir=data, sim_ids=[VICTIM]))
    np.testing.assert_array_equal(rec["force_data"], damaged)  # garbage in, garbage out
    assert not np.array_equal(rec["force_data"], intact)
    guideloom.export_to_numpy_per_sim("force-curve", tmp_path / "o", data_dir=data,
                                      sim_ids=[3, VICTIM, 5], client="sync")
    export = guideloom.load_export(tmp_path / "o")
    np.testing.assert_array_equal(export.by_sim_id(VICTIM)["force_data"], damaged)
    assert json.loads((tmp_path / "o" / "export.json").read_text())["verify_crc"] is False


def test_verify_crc_raises_naming_experiment_archive_and_member(flipped, tmp_path):
    data, _, _ = flipped
    records = guideloom.streaming.iter_view("force-curve", data_dir=data, sim_ids=[3, VICTIM],
                                            verify_crc=True)
    assert next(records)["_sim_id"] == 3
    with pytest.raises(CorruptDataError, match=CRC_ERROR) as info:
        next(records)
    assert info.value.sim_id == VICTIM
    assert info.value.file == f"{data / ARCHIVE}::{MEMBER}"
    with pytest.raises(CorruptDataError, match=CRC_ERROR):
        guideloom.export_to_numpy_per_sim("force-curve", tmp_path / "o", data_dir=data,
                                          sim_ids=[3, VICTIM, 5], client="sync",
                                          verify_crc=True)
    with pytest.raises(IncompleteExportError):
        guideloom.load_export(tmp_path / "o")


def test_verify_crc_with_on_error_skip_leaves_the_member_out_and_reports_it(flipped, tmp_path,
                                                                            dask_client):
    data, _, _ = flipped
    with pytest.warns(SkippedDataWarning, match="CRC-32 mismatch"):
        guideloom.export_to_numpy_per_sim("force-curve", tmp_path / "o", data_dir=data,
                                          sim_ids=[3, VICTIM, 5, 6], client=dask_client,
                                          partition_size=2, verify_crc=True, on_error="skip")
    export = guideloom.load_export(tmp_path / "o")
    assert export.sim_ids.tolist() == [3, 5, 6]
    manifest = json.loads((tmp_path / "o" / "export.json").read_text())
    assert [s["sim_id"] for s in manifest["skipped"]] == [VICTIM]
    assert manifest["skipped"][0]["file"].endswith(f"{ARCHIVE}::{MEMBER}")
    assert "CRC-32 mismatch" in manifest["skipped"][0]["error"]
    assert manifest["verify_crc"] is True
    for sim_id in (3, 5, 6):  # the intact members are exported as they are
        rec = next(guideloom.streaming.iter_view("force-curve", data_dir=data, sim_ids=[sim_id]))
        np.testing.assert_array_equal(export.by_sim_id(sim_id)["force_data"], rec["force_data"])


def test_view_dataset_passes_verify_crc_to_its_reads(flipped):
    pytest.importorskip("torch", reason="torch is an optional dependency")
    from guideloom.pytorch import ViewDataset

    data, _, damaged = flipped
    trusting = list(ViewDataset("force-curve", data_dir=data, sim_ids=[VICTIM]))
    np.testing.assert_array_equal(trusting[0]["force_data"], damaged)
    with pytest.raises(CorruptDataError, match=CRC_ERROR):
        list(ViewDataset("force-curve", data_dir=data, sim_ids=[VICTIM], verify_crc=True))


def test_verify_crc_does_not_change_the_job_identity(demo_zip, tmp_path):
    plain = build_spec("force-curve", "npz", tmp_path / "o", data_dir=demo_zip)
    checked = build_spec("force-curve", "npz", tmp_path / "o", data_dir=demo_zip,
                         verify_crc=True)
    assert checked.verify_crc
    assert not plain.verify_crc
    assert plan_export(plain).identity == plan_export(checked).identity


def test_each_member_is_checked_once_per_process_until_the_archive_changes(demo_copy,
                                                                           monkeypatch):
    calls: list[tuple[int, int]] = []
    real = zipmember.member_crc

    def counting(fd: int, start: int, size: int, block: int = zipmember.CRC_BLOCK):
        calls.append((start, size))
        return real(fd, start, size, block)

    monkeypatch.setattr(zipmember, "member_crc", counting)  # counts our own calls; reads real bytes
    zipmember.forget_verified()
    ids = [0, 1, 2, 3]
    for _ in range(2):  # two epochs of a view with two fields (and one open per record)
        got = list(guideloom.streaming.iter_view("pointcloud-op10", data_dir=demo_copy,
                                                 sim_ids=ids, verify_crc=True))
        assert [r["_sim_id"] for r in got] == ids
    assert len(calls) == len(ids) == len(set(calls))
    archive = demo_copy / ARCHIVE
    stamp = archive.stat()
    os.utime(archive, ns=(stamp.st_atime_ns, stamp.st_mtime_ns + 10**9))  # "a new archive"
    list(guideloom.streaming.iter_view("pointcloud-op10", data_dir=demo_copy, sim_ids=ids,
                                       verify_crc=True))
    with zipfile.ZipFile(archive) as zf:
        in_archive = {int(n[:4]) for n in zf.namelist()}
    assert len(calls) == len(ids) + len(in_archive & set(ids))
    assert all(size > 0 for _, size in calls)


def test_verify_crc_passes_intact_members_and_loose_files(demo_zip, demo_loose):
    zipmember.forget_verified()
    for data in (demo_zip, demo_loose):
        plain = list(guideloom.streaming.iter_view("force-curve", data_dir=data, sim_ids=[0, 4]))
        checked = list(guideloom.streaming.iter_view("force-curve", data_dir=data,
                                                     sim_ids=[0, 4], verify_crc=True))
        for a, b in zip(plain, checked, strict=True):
            np.testing.assert_array_equal(a["force_data"], b["force_data"])


def test_a_member_cut_short_by_a_truncated_archive_is_reported(demo_copy):
    archive = demo_copy / ARCHIVE
    with zipfile.ZipFile(archive) as zf:
        info = max(zf.infolist(), key=lambda i: i.header_offset)  # the last member
    sim_id = int(info.filename[:4])
    loc = scan_locations(guideloom.load(data_dir=demo_copy), demo_copy)[sim_id]
    fd = os.open(archive, os.O_RDONLY)
    try:
        start = zipmember.member_data_offset(fd, loc)
    finally:
        os.close(fd)
    os.truncate(archive, start + info.compress_size // 2)
    zipmember.forget_verified()
    # the central directory is gone with the tail: the archive itself is reported unreadable
    with pytest.raises(guideloom.GuideloomError, match="cannot be read"):
        list(guideloom.streaming.iter_view("force-curve", data_dir=demo_copy, sim_ids=[sim_id]))
    assert (loc.size, loc.crc, loc.member) == (info.compress_size, info.CRC, info.filename)
    source = LocalFileSource(archive)
    try:  # and the check itself says how much of the member is there
        with pytest.raises(CorruptDataError, match=rf"only {info.compress_size // 2} of its "
                                                   rf"{info.compress_size} bytes"):
            zipmember.verify_crc(source, start, loc)
    finally:
        source.close()


# --- deflated members: inflated whole, so zipfile checks their CRC-32 -----------------------
def _set_crc(archive: Path, member: str, crc: int) -> None:
    """Write ``crc`` into ``member``'s local header and central directory entry."""
    with zipfile.ZipFile(archive) as zf:
        info = zf.getinfo(member)
        directory = zf.start_dir
    raw = bytearray(archive.read_bytes())
    old, new = info.CRC.to_bytes(4, "little"), crc.to_bytes(4, "little")
    assert raw[info.header_offset + 14:info.header_offset + 18] == old
    raw[info.header_offset + 14:info.header_offset + 18] = new
    pos = directory
    while True:  # walk the central directory to the member's entry
        assert raw[pos:pos + 4] == b"PK\x01\x02"
        name_len, extra_len, comment_len = (int.from_bytes(raw[pos + k:pos + k + 2], "little")
                                            for k in (28, 30, 32))
        if raw[pos + 46:pos + 46 + name_len].decode() == member:
            break
        pos += 46 + name_len + extra_len + comment_len
    assert raw[pos + 16:pos + 20] == old
    raw[pos + 16:pos + 20] = new
    archive.write_bytes(bytes(raw))


@pytest.mark.parametrize("verify_crc", [False, True])
def test_a_deflated_member_with_a_wrong_crc_is_always_found(demo_copy, verify_crc):
    archive = demo_copy / ARCHIVE
    rebuild_archive(archive, compression=zipfile.ZIP_DEFLATED)
    with zipfile.ZipFile(archive) as zf:
        right = zf.getinfo(MEMBER).CRC
    _set_crc(archive, MEMBER, right ^ 0x5A5A5A5A)  # the deflate stream itself is intact
    with pytest.raises(CorruptDataError, match=r"experiment 4: .*concave\.zip::0004\.h5 .*"
                                               r"Bad CRC-32") as info:
        list(guideloom.streaming.iter_view("force-curve", data_dir=demo_copy, sim_ids=[VICTIM],
                                           verify_crc=verify_crc))
    assert info.value.sim_id == VICTIM
    other = list(guideloom.streaming.iter_view("force-curve", data_dir=demo_copy, sim_ids=[3],
                                               verify_crc=verify_crc))
    assert other[0]["force_data"].shape[1] == 8  # the other deflated members read


# --- the command line and workflow files ---------------------------------------------------
WORKFLOW = """
[dataset]
data_dir = "{data}"

[view]
name = "force-curve"

[filter]
sim_ids = [3, 4, 5]

[output]
kind = "npz"
path = "{out}"

[run]
on_error = "{on_error}"
{extra}
"""


def _run_cli(tmp_path: Path, data: Path, name: str, *flags: str, on_error: str = "raise",
             extra: str = "") -> subprocess.CompletedProcess:
    wf = tmp_path / f"{name}.toml"
    wf.write_text(WORKFLOW.format(data=data, out=tmp_path / name, on_error=on_error,
                                  extra=extra))
    return subprocess.run([sys.executable, "-m", "guideloom", "run", str(wf), "--scheduler",
                           "sync", *flags], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)


def test_cli_verify_crc_flag_and_workflow_key(flipped, tmp_path):
    data, _, _ = flipped
    trusted = _run_cli(tmp_path, data, "trusted")
    assert trusted.returncode == 0, trusted.stderr
    assert "wrote 3 records" in trusted.stdout
    failed = _run_cli(tmp_path, data, "flag", "--verify-crc")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "CRC-32 mismatch" in failed.stderr
    assert f"{ARCHIVE}::{MEMBER}" in failed.stderr
    assert "experiment 4" in failed.stderr
    assert "Traceback" not in failed.stderr
    keyed = _run_cli(tmp_path, data, "keyed", extra="verify_crc = true")
    assert keyed.returncode == 1, keyed.stderr
    assert "CRC-32 mismatch" in keyed.stderr, keyed.stderr
    skipped = _run_cli(tmp_path, data, "skip", "--verify-crc", on_error="skip")
    assert skipped.returncode == 0, skipped.stderr
    assert "wrote 2 records" in skipped.stdout
    assert re.search(r"^skipped: 1 experiments \(experiment 4: .*CRC-32 mismatch", skipped.stdout,
                     re.M), skipped.stdout


# --- damaged HDF5 metadata is CorruptDataError; an absent path stays MissingFieldError -----
def _metadata_offset(data: bytes, part: str, scratch: Path) -> int:
    """Offset in the HDF5 file ``data`` of one metadata structure of its ``force`` group (or
    of the ``force/data`` dataset's object header), found through h5py and the signatures."""
    path = scratch / "probe.h5"
    path.write_bytes(data)
    with h5py.File(path) as f:
        group = h5py.h5o.get_info(f["force"].id).addr
        dataset = h5py.h5o.get_info(f["force/data"].id).addr
    if part == "group object header":
        return group
    if part == "dataset object header":
        return dataset
    signature = {"group B-tree": b"TREE\x00", "group local heap": b"HEAP"}[part]
    return data.index(signature, group)  # the group's own, written right after its header


DAMAGE = {  # what is overwritten, and HDF5's words for it
    "group object header": (b"\xff" * 16, "object header"),
    "dataset object header": (b"\xff" * 16, "object header"),
    "group B-tree": (b"XXXX", "B-tree"),
    "group local heap": (b"XXXX", "local heap"),
}


def _damaged_copy(layout: str, demo_copy: Path, demo_loose: Path, tmp_path: Path,
                  damage: str) -> tuple[Path, str]:
    """A copy of the demo data with one structure of experiment 4 damaged; the data directory
    and the file as messages name it."""
    if layout == "loose":
        data = tmp_path / "loose"
        shutil.copytree(demo_loose, data)
        target = data / "h5" / MEMBER
        raw = bytearray(target.read_bytes())
        what, _ = DAMAGE[damage]
        offset = _metadata_offset(bytes(raw), damage, tmp_path)
        raw[offset:offset + len(what)] = what
        target.write_bytes(bytes(raw))
        return data, str(target)
    archive = demo_copy / ARCHIVE
    raw = member_bytes(archive, MEMBER)
    what, _ = DAMAGE[damage]
    corrupt_member(archive, MEMBER, _metadata_offset(raw, damage, tmp_path), what)
    return demo_copy, f"{archive}::{MEMBER}"


@pytest.mark.parametrize("layout", ["loose", "zip"])
@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_metadata_is_corrupt_data_naming_id_file_path_and_hdf5s_words(
        layout, damage, demo_copy, demo_loose, tmp_path):
    data, file = _damaged_copy(layout, demo_copy, demo_loose, tmp_path, damage)
    records = guideloom.streaming.iter_view("force-curve", data_dir=data, sim_ids=[3, VICTIM])
    assert next(records)["_sim_id"] == 3
    with pytest.raises(CorruptDataError) as info:
        next(records)
    error = info.value
    assert not isinstance(error, guideloom.MissingFieldError)
    assert (error.sim_id, error.file, error.h5_path) == (VICTIM, file, "force/data")
    message = str(error)
    assert message.startswith(f"experiment 4: {file}: HDF5 path 'force/data' cannot be opened")
    assert DAMAGE[damage][1] in message, message  # HDF5's own diagnosis, quoted
    assert "has_oil" not in message
    assert "filter" not in message


@pytest.mark.parametrize("layout", ["loose", "zip"])
def test_damaged_metadata_through_export_raises_or_is_skipped(layout, demo_copy, demo_loose,
                                                              tmp_path):
    data, file = _damaged_copy(layout, demo_copy, demo_loose, tmp_path, "group B-tree")
    with pytest.raises(CorruptDataError, match=r"experiment 4: .*'force/data' cannot be opened"):
        guideloom.export_to_numpy_per_sim("force-curve", tmp_path / "o", data_dir=data,
                                          sim_ids=[VICTIM, 5], client="sync")
    with pytest.warns(SkippedDataWarning, match="B-tree"):
        guideloom.export_to_numpy_per_sim("force-curve", tmp_path / "s", data_dir=data,
                                          sim_ids=[3, VICTIM, 5], client="sync",
                                          on_error="skip")
    manifest = json.loads((tmp_path / "s" / "export.json").read_text())
    assert manifest["count"] == 2
    assert [(s["sim_id"], s["file"]) for s in manifest["skipped"]] == [(VICTIM, file)]


@pytest.mark.parametrize("layout", ["loose", "zip"])
@pytest.mark.parametrize("damage", ["superblock", "truncated"])
def test_a_garbled_superblock_or_a_truncated_file_is_corrupt_data(layout, damage, demo_copy,
                                                                  demo_loose, tmp_path):
    if layout == "loose":
        data = tmp_path / "loose"
        shutil.copytree(demo_loose, data)
        raw = (data / "h5" / MEMBER).read_bytes()
    else:
        data = demo_copy
        raw = member_bytes(data / ARCHIVE, MEMBER)
    if damage == "superblock":  # the signature survives, the fields after it are garbage
        raw = raw[:8] + b"\x07" * 40 + raw[48:]
        words = "superblock"
    else:
        raw = raw[:len(raw) // 2]
        words = "truncated file"
    if layout == "loose":
        (data / "h5" / MEMBER).write_bytes(raw)
        file = str(data / "h5" / MEMBER)
    else:  # a consistent archive of a damaged file: the CRC check passes, HDF5 does not
        rebuild_archive(data / ARCHIVE, {MEMBER: raw})
        file = f"{data / ARCHIVE}::{MEMBER}"
    for verify_crc in (False, True):
        with pytest.raises(CorruptDataError) as info:
            list(guideloom.streaming.iter_view("force-curve", data_dir=data, sim_ids=[VICTIM],
                                               verify_crc=verify_crc))
        assert (info.value.sim_id, info.value.file) == (VICTIM, file)
        assert str(info.value).startswith(f"experiment 4: {file} is damaged")
        assert words in str(info.value)
    with pytest.raises(CorruptDataError, match=words):
        guideloom.export_to_numpy_per_sim("force-curve", tmp_path / "o", data_dir=data,
                                          sim_ids=[VICTIM], client="sync")


ABSENT = {  # how a real file lacks force/data, and what the message says
    "dataset deleted": ("has no HDF5 dataset 'force/data'", "filter such experiments out"),
    "group deleted": ("has no HDF5 dataset 'force/data'", "filter such experiments out"),
    "a group in its place": ("'force/data' is a group, not a dataset", ""),
}


@pytest.mark.parametrize("layout", ["loose", "zip"])
@pytest.mark.parametrize("how", sorted(ABSENT))
def test_a_genuinely_absent_field_stays_missing_field_with_its_hint(layout, how, demo_copy,
                                                                    demo_loose, tmp_path):
    scratch = tmp_path / "member.h5"
    if layout == "loose":
        data = tmp_path / "loose"
        shutil.copytree(demo_loose, data)
        scratch = data / "h5" / MEMBER
        file = str(scratch)
    else:
        data = demo_copy
        scratch.write_bytes(member_bytes(data / ARCHIVE, MEMBER))
        file = f"{data / ARCHIVE}::{MEMBER}"
    with h5py.File(scratch, "a") as f:
        del f["force/data" if how != "group deleted" else "force"]
        if how == "a group in its place":
            f.create_group("force/data")
    if layout == "zip":
        rebuild_archive(data / ARCHIVE, {MEMBER: scratch.read_bytes()})
    said, hint = ABSENT[how]
    for verify_crc in (False, True):
        with pytest.raises(guideloom.MissingFieldError) as info:
            list(guideloom.streaming.iter_view("force-curve", data_dir=data, sim_ids=[VICTIM],
                                               verify_crc=verify_crc))
        assert (info.value.sim_id, info.value.file, info.value.h5_path) == \
            (VICTIM, file, "force/data")
        assert said in str(info.value)
        assert hint in str(info.value)
    # the schema probe of an export reads metadata only: the same error
    with pytest.raises(guideloom.MissingFieldError, match=re.escape(said)):
        guideloom.export_to_numpy_per_sim("force-curve", tmp_path / "o", data_dir=data,
                                          sim_ids=[VICTIM], client="sync")


def test_the_has_oil_hint_still_comes_with_a_missing_oil_field(demo_loose):
    index = guideloom.load(data_dir=demo_loose).index()
    no_oil = next(i for i in index.ids if not index.row(i)["has_oil"])
    with pytest.raises(guideloom.MissingFieldError,
                       match=r"has_oil=False: filter with where=lambda row: row\['has_oil'\]"):
        list(guideloom.streaming.iter_view("oil-thickness", data_dir=demo_loose,
                                           sim_ids=[no_oil]))
