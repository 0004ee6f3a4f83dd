"""No path named by data, a transform or a manifest leaves its directory (docs/security.md)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

import guideloom
from guideloom import DocumentPickleFormat, DocumentStorage
from guideloom.errors import UnsafeNameError

EXPORTERS = {
    "npy": guideloom.export_to_numpy,
    "npz": guideloom.export_to_numpy_per_sim,
    "zarr": guideloom.export_to_zarr,
}


def _tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _rows(rec):
    return {"force": np.asarray(rec["force_data"])[:10]}


@pytest.mark.parametrize("kind", sorted(EXPORTERS))
@pytest.mark.parametrize("key", ["../../B/force", "sub/force", "..", ".hidden", "a\\b",
                                 "nul\0x", "sim_ids", "export.json", "checksums.json",
                                 "croissant.json", ""])
def test_record_key_that_is_not_a_plain_name_writes_nothing(demo_zip, tmp_path, kind, key):
    victim = tmp_path / "B"
    EXPORTERS[kind]("force-curve", victim, data_dir=demo_zip, sim_ids=[0, 1, 2],
                    record_transform=_rows, client="sync")
    before = _tree_digest(victim)

    def evil(rec):
        return {key: np.asarray(rec["force_data"])[:10] * 0}

    with pytest.raises(UnsafeNameError) as info:
        EXPORTERS[kind]("force-curve", tmp_path / "A", data_dir=demo_zip, sim_ids=[0, 1, 2],
                        record_transform=evil, client="sync", on_error="skip")
    assert "experiment 0" in str(info.value)
    assert repr(key) in str(info.value)
    assert _tree_digest(victim) == before  # the other export is untouched
    assert not (tmp_path / "A").exists()  # and nothing was published
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == ["B"]


def test_storage_record_key_is_checked_too(demo_zip, tmp_path):
    storage = DocumentStorage(tmp_path / "docs", DocumentPickleFormat())
    with pytest.raises(UnsafeNameError, match=r"experiment 0 .*'\.\./x'"):
        guideloom.export_to_storage(
            "force-curve", storage, data_dir=demo_zip, sim_ids=[0, 1], client="sync",
            record_transform=lambda r: {"../x": np.asarray(r["force_data"])[:2]})
    assert not storage.directory.exists()


def test_plain_names_still_export(demo_zip, tmp_path):
    out = tmp_path / "o"
    guideloom.export_to_numpy(
        "force-curve", out, data_dir=demo_zip, sim_ids=[0, 1], client="sync",
        record_transform=lambda r: {"force-1": np.asarray(r["force_data"])[:3],
                                    "export": np.int64(1), "Sim ids": np.int64(2)})
    assert sorted(p.name for p in out.glob("*.npy")) == [
        "Sim ids.npy", "export.npy", "force-1.npy", "sim_ids.npy"]


# --- HDF5 files that point outside themselves ---------------------------------------------
def _make_hostile(path: Path, how: str, outside: Path) -> None:
    """Replace ``force/data`` of the HDF5 file at ``path`` by one whose data is elsewhere."""
    import h5py

    with h5py.File(path, "r+") as f:
        shape, dtype = f["force/data"].shape, f["force/data"].dtype
        del f["force/data"]
        nbytes = int(np.prod(shape)) * dtype.itemsize
        if how == "external storage":
            secret = outside / "secret.bin"
            secret.write_bytes((b"password=hunter2;" * (nbytes // 17 + 1))[:nbytes])
            f.create_dataset("force/data", shape=shape, dtype=dtype,
                             external=[(str(secret), 0, nbytes)])
            return
        source = outside / "outside.h5"
        with h5py.File(source, "w") as g:
            g["x"] = np.full(shape, 7.0, dtype)
        if how == "external link":
            f["force/data"] = h5py.ExternalLink(str(source), "/x")
        else:  # a virtual dataset over the outside file, or over one that does not exist
            name = str(source) if how == "virtual dataset" else str(outside / "absent.h5")
            layout = h5py.VirtualLayout(shape=shape, dtype=dtype)
            layout[...] = h5py.VirtualSource(name, "x", shape=shape)
            f.create_virtual_dataset("force/data", layout, fillvalue=0)


HOSTILE = ["external storage", "external link", "virtual dataset",
           "virtual dataset of a missing file"]
WORDS = {"external storage": "stores its data in external files",
         "external link": "an external link",
         "virtual dataset": "is a virtual dataset",
         "virtual dataset of a missing file": "is a virtual dataset"}


@pytest.mark.parametrize("layout", ["loose", "zip"])
@pytest.mark.parametrize("how", HOSTILE)
def test_hdf5_data_stored_outside_the_file_is_refused(tmp_path, how, layout):
    from guideloom.demo import make_demo_data
    from guideloom.errors import CorruptDataError
    from tests.zip_helpers import rebuild_archive

    data = tmp_path / "data"
    make_demo_data(data, n=4, layout=layout, seed=0)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    if layout == "loose":
        victim = data / "h5" / "0002.h5"
        _make_hostile(victim, how, outside)
        where = str(victim)
    else:
        import zipfile

        with zipfile.ZipFile(data / "concave.zip") as zf:
            (tmp_path / "m.h5").write_bytes(zf.read("0002.h5"))
        _make_hostile(tmp_path / "m.h5", how, outside)
        rebuild_archive(data / "concave.zip", {"0002.h5": (tmp_path / "m.h5").read_bytes()})
        where = "concave.zip::0002.h5"
    for kind, ids in (("npy", [2]), ("npz", None)):  # npy probes shapes from metadata
        with pytest.raises(CorruptDataError) as info:
            guideloom.export.export("force-curve", tmp_path / kind, kind=kind, data_dir=data,
                                    sim_ids=ids, client="sync")
        err = info.value
        assert err.sim_id == 2
        assert err.h5_path == "force/data"
        assert where in err.file
        assert WORDS[how] in str(err)
        assert "experiment 2" in str(err)
        assert "hunter2" not in str(err)
        assert not (tmp_path / kind).exists()
    with pytest.warns(guideloom.SkippedDataWarning):
        guideloom.export_to_numpy("force-curve", tmp_path / "skip", data_dir=data,
                                  record_transform=_rows, client="sync", on_error="skip")
    export = guideloom.load_export(tmp_path / "skip")
    assert export.sim_ids.tolist() == [0, 1, 3]


# --- paths named by the manifest ------------------------------------------------------------
def _rename_in_manifest(data: Path, old: str, new: str) -> None:
    import json

    path = data / "metadata.json"
    doc = json.loads(path.read_text())
    for entry in doc["distribution"]:
        if entry.get("name") == old:
            entry["name"] = entry["contentUrl"] = new
    path.write_text(json.dumps(doc))


def test_a_manifest_naming_an_archive_outside_the_data_directory_is_refused(demo_copy,
                                                                             tmp_path):
    from guideloom.errors import ManifestError

    (demo_copy / "concave.zip").rename(tmp_path / "outside.zip")
    _rename_in_manifest(demo_copy, "concave.zip", "../outside.zip")
    with pytest.raises(ManifestError) as info:
        guideloom.export_to_numpy("force-curve", tmp_path / "o", data_dir=demo_copy,
                                  record_transform=_rows, client="sync")
    text = str(info.value)
    assert "zip FileObject's 'name'" in text
    assert "'../outside.zip'" in text
    assert "not a file inside the data directory" in text
    assert str(tmp_path / "outside.zip") in text
    assert not (tmp_path / "o").exists()


def test_a_manifest_naming_an_index_outside_the_data_directory_never_shows_it(demo_copy,
                                                                               tmp_path):
    from guideloom.errors import ManifestError

    secret = tmp_path / "secret.csv"
    secret.write_text("root:x:0:0:password-hash\nline two\n")
    for name in (str(secret), "../secret.csv"):
        _rename_in_manifest(demo_copy, "process_parameters.csv" if name == str(secret)
                            else str(secret), name)
        with pytest.raises(ManifestError) as info:
            guideloom.export_to_numpy("force-curve", tmp_path / "o", data_dir=demo_copy,
                                      record_transform=_rows, client="sync")
        text = str(info.value)
        assert "the index table" in text
        assert repr(name) in text
        assert "root:x" not in text
        assert "password" not in text
        assert not (tmp_path / "o").exists()


def _foreign_link(link: Path, target: Path, user) -> None:
    """``link`` -> ``target``, owned by ``user`` (as if she had made it: a link's owner is
    whoever made it, and only root can change it)."""
    import os

    link.symlink_to(target)
    os.lchown(link, user.uid, user.gid)


def test_a_symlink_out_of_the_data_directory_is_refused(demo_copy, tmp_path):
    """A link another user made, leading out, is refused (issue 30: your own links are
    followed; tests/test_data_links.py)."""
    from guideloom.errors import ManifestError
    from tests.second_user import second_user

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (demo_copy / "concave.zip").rename(elsewhere / "concave.zip")
    with second_user() as user:
        _foreign_link(demo_copy / "concave.zip", elsewhere / "concave.zip", user)
        with pytest.raises(ManifestError, match=r"'concave.zip', which passes the symbolic "
                                                r"link .*concave.zip, made by "):
            guideloom.export_to_numpy("force-curve", tmp_path / "o", data_dir=demo_copy,
                                      record_transform=_rows, client="sync")
    inside = demo_copy / "archives"  # a symlink that stays inside is fine
    inside.mkdir()
    (demo_copy / "concave.zip").unlink()
    (elsewhere / "concave.zip").rename(inside / "concave.zip")
    (demo_copy / "concave.zip").symlink_to(inside / "concave.zip")
    guideloom.export_to_numpy("force-curve", tmp_path / "o", data_dir=demo_copy,
                              record_transform=_rows, client="sync")
    assert len(guideloom.load_export(tmp_path / "o")) == 36


def test_a_loose_file_or_folder_linking_out_of_the_data_directory_is_refused(demo_loose,
                                                                             tmp_path):
    """Links another user made, leading out, are refused; links inside are followed (issue
    30: your own links are followed wherever they lead; tests/test_data_links.py)."""
    import shutil

    from guideloom.errors import ManifestError
    from tests.second_user import second_user

    data = tmp_path / "data"
    shutil.copytree(demo_loose, data)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (data / "h5" / "0003.h5").rename(elsewhere / "0003.h5")
    with second_user() as user:
        _foreign_link(data / "h5" / "0003.h5", elsewhere / "0003.h5", user)
        with pytest.raises(ManifestError, match=r"a loose HDF5 file names 'h5/0003.h5', which "
                                                 r"passes the symbolic link"):
            list(guideloom.iter_view("force-curve", data_dir=data))
        inside = data / "kept"  # a link that stays inside the data directory is fine
        inside.mkdir()
        (data / "h5" / "0003.h5").unlink()
        (elsewhere / "0003.h5").rename(inside / "0003.h5")
        _foreign_link(data / "h5" / "0003.h5", inside / "0003.h5", user)
        reference = {r["_sim_id"]: r["force_data"]
                     for r in guideloom.iter_view("force-curve", data_dir=demo_loose)}
        linked = {r["_sim_id"]: r["force_data"]
                  for r in guideloom.iter_view("force-curve", data_dir=data)}
        assert linked.keys() == reference.keys()
        assert np.array_equal(linked[3], reference[3])
        (data / "h5").rename(elsewhere / "h5")  # the whole loose folder, linked from elsewhere
        _foreign_link(data / "h5", elsewhere / "h5", user)
        with pytest.raises(ManifestError, match=r"names 'h5(/concave\.zip)?', which passes the "
                                                 r"symbolic link"):
            list(guideloom.iter_view("force-curve", data_dir=data))


@pytest.mark.parametrize("kind", ["npy", "zarr"])
def test_an_export_json_naming_a_field_outside_the_export_is_refused(demo_zip, tmp_path, kind):
    import json
    import shutil

    from guideloom.errors import CorruptExportError

    out = tmp_path / "shared" / "export"
    EXPORTERS[kind]("force-curve", out, data_dir=demo_zip, sim_ids=[0, 1, 2],
                    record_transform=_rows, client="sync")
    stored = "force.npy" if kind == "npy" else "force"
    shutil.move(out / stored, tmp_path / "shared" / stored.replace("force", "victim"))
    manifest = json.loads((out / "export.json").read_text())
    manifest["fields"] = {"../victim": manifest["fields"]["force"]}
    (out / "export.json").write_text(json.dumps(manifest))
    with pytest.raises(CorruptExportError, match=r"names the field '\.\./victim'"):
        guideloom.load_export(out)
