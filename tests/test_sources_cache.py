"""Zip central directories are read once while an archive is unchanged, again after a change."""

from __future__ import annotations

import zipfile

import guideloom
from guideloom import sources


def test_listing_follows_a_rewritten_archive(demo_copy):
    ds = guideloom.load(data_dir=demo_copy)
    first = sources.scan_locations(ds, demo_copy)
    again = sources.scan_locations(ds, demo_copy)
    assert again == first
    archive = demo_copy / "concave.zip"
    in_archive = sorted(i for i, loc in first.items() if loc.path == str(archive))
    before = {r["_sim_id"]: r["force_data"] for r in guideloom.streaming.iter_view(
        "force-curve", data_dir=demo_copy, sim_ids=in_archive)}  # the archive's fd is open
    with zipfile.ZipFile(archive) as zf:
        names = sorted(zf.namelist())
        kept = {name: zf.read(name) for name in names[1:]}
    rewritten = demo_copy / "concave.new.zip"
    with zipfile.ZipFile(rewritten, "w", compression=zipfile.ZIP_STORED) as zf:
        for name, data in kept.items():
            zf.writestr(name, data)
    rewritten.replace(archive)
    after = sources.scan_locations(ds, demo_copy)
    dropped = {sim_id for sim_id, loc in first.items() if loc.member == names[0]}
    assert dropped and set(after) == set(first) - dropped
    # members moved inside the replaced archive: records must come from the new file
    still = [i for i in in_archive if i in after]
    for record in guideloom.streaming.iter_view("force-curve", data_dir=demo_copy,
                                                sim_ids=still):
        assert record["force_data"].tobytes() == before[record["_sim_id"]].tobytes()
