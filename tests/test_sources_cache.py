"""Zip central directories are read once while an archive is unchanged, again after a change."""

from __future__ import annotations

import zipfile

import guideloom
from guideloom.read.hdf5 import open_h5_file, open_h5py
from guideloom.read.locations import Location
from guideloom.read.scan import scan_locations


def test_listing_follows_a_rewritten_archive(demo_copy):
    ds = guideloom.load(data_dir=demo_copy)
    first = scan_locations(ds, demo_copy)
    again = scan_locations(ds, demo_copy)
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
    after = scan_locations(ds, demo_copy)
    dropped = {sim_id for sim_id, loc in first.items() if loc.member == names[0]}
    assert dropped
    assert set(after) == set(first) - dropped
    # members moved inside the replaced archive: records must come from the new file
    still = [i for i in in_archive if i in after]
    for record in guideloom.streaming.iter_view("force-curve", data_dir=demo_copy,
                                                sim_ids=still):
        assert record["force_data"].tobytes() == before[record["_sim_id"]].tobytes()


def test_members_opened_from_many_threads_at_once_read_their_own_bytes(demo_copy):
    """Each thread re-points its own file-access list at each member it opens: files opened
    at the same time, in one thread and across threads, must never read another's bytes."""
    from concurrent.futures import ThreadPoolExecutor

    import h5py

    ds = guideloom.load(data_dir=demo_copy)
    locations = scan_locations(ds, demo_copy)
    zipped = sorted(i for i, loc in locations.items() if loc.member is not None)
    assert len(zipped) >= 4
    loose = {}
    for sim_id in zipped:
        with open_h5_file(locations[sim_id]) as f:
            loose[sim_id] = f["force/data"][()].tobytes()

    def read_all_open_together(ids):
        files = [open_h5_file(locations[i]) for i in ids]  # all open at once
        try:
            return {i: f["force/data"][()].tobytes() for i, f in zip(ids, files, strict=True)}
        finally:
            for f in files:
                f.close()

    def read_raw(sim_id):
        fid = open_h5py(locations[sim_id]).fid
        try:
            return sim_id, h5py.File(fid)["force/data"][()].tobytes()
        finally:
            fid.close()

    assert read_all_open_together(zipped) == loose
    with ThreadPoolExecutor(4) as pool:
        for _ in range(5):
            assert dict(pool.map(read_raw, zipped * 3)) == loose
            groups = [zipped[k::3] for k in range(3)]
            for got in pool.map(read_all_open_together, groups):
                assert got == {i: loose[i] for i in got}


def test_a_deflated_member_is_not_kept_in_memory_after_its_file_closes(tmp_path):
    """A deflated member is inflated whole into memory; once its file is closed nothing of
    guideloom's may hold that copy (a thread's reused file-access list would)."""
    import gc
    import weakref
    import zipfile

    import h5py
    import numpy as np

    h5 = tmp_path / "0000.h5"
    with h5py.File(h5, "w") as f:
        f["x"] = np.arange(1000.0)
    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        zf.write(h5, "0000.h5")
    info = zipfile.ZipFile(archive).getinfo("0000.h5")
    loc = Location(sim_id=0, path=str(archive), member="0000.h5",
                           header_offset=info.header_offset, size=info.file_size,
                           stored=False, crc=info.CRC)
    f = open_h5_file(loc)
    assert (f["x"][()] == np.arange(1000.0)).all()
    copy = weakref.ref(f.fileobj)
    f.close()
    del f
    gc.collect()
    assert copy() is None
