"""Data roots (guideloom.read.roots): one kind of object for a folder and for a release read
by URL, so that code above the read package asks the root instead of testing its type. A real
HTTP server on 127.0.0.1 serves the demo release; every remote answer must equal the local."""

from __future__ import annotations

import os
import pickle
import shutil

import pytest

import guideloom
from guideloom.export.fingerprint import data_fingerprint
from guideloom.read.fingerprint import remote_fingerprint
from guideloom.read.locations import Location, RemoteLocation
from guideloom.read.roots import (
    DataRoot,
    LocalRoot,
    RemoteRoot,
    as_root,
    folder_of,
    open_root,
)
from guideloom.read.scan import scan_locations
from guideloom.read.zipdir import archive_members, on_archive_changed
from guideloom.select.selection import resolve_dataset
from tests.http_server import serve


@pytest.fixture
def served(demo_zip, tmp_path, monkeypatch):
    monkeypatch.setenv("GUIDELOOM_CACHE_DIR", str(tmp_path / "cache"))
    with serve(demo_zip) as (url, stats):
        yield url, stats


def test_open_root_is_the_one_place_that_tells_a_folder_from_a_url(demo_zip):
    local = open_root(demo_zip)
    assert isinstance(local, LocalRoot)
    assert local.is_local
    assert local.path == demo_zip
    remote = open_root("https://example.org/release/")
    assert isinstance(remote, RemoteRoot)
    assert not remote.is_local
    assert remote.url == "https://example.org/release"  # nothing fetched for an https:// root
    assert open_root(remote) is remote
    assert as_root(remote) is remote
    assert as_root(demo_zip) == local
    assert as_root(str(demo_zip)) == local
    assert isinstance(open_root("memory://bucket/x", {"anon": True}), RemoteRoot)
    with pytest.raises(ValueError, match="storage_options apply to a remote data_dir"):
        open_root(demo_zip, {"anon": True})


def test_roots_and_locations_pickle_equal(demo_zip):
    ds = guideloom.load(demo_zip)
    roots: list[DataRoot] = [LocalRoot(demo_zip),
                             RemoteRoot("s3://b/p", options={"key": "k", "secret": "s"})]
    for root in roots:
        assert pickle.loads(pickle.dumps(root)) == root
    # the storage options ride along (Dask ships them) but take no part in equality
    assert pickle.loads(pickle.dumps(roots[1])).options == {"key": "k", "secret": "s"}
    assert roots[1] == RemoteRoot("s3://b/p")
    assert "secret" not in repr(roots[1])
    locs = list(ds.root.locations(ds).values())
    assert locs
    assert all(type(loc) is Location and loc.is_local for loc in locs)
    assert [pickle.loads(pickle.dumps(loc)) for loc in locs] == locs
    remote = RemoteLocation(sim_id=1, path="https://h/a.zip", member="0001.h5", size=9,
                            archive_size=99, headers=(("X-Dataverse-key", "t"),))
    assert not remote.is_local
    assert pickle.loads(pickle.dumps(remote)) == remote


def test_a_local_root_scans_reads_and_fingerprints_as_before(demo_zip):
    ds = guideloom.load(demo_zip)
    root = ds.root
    assert root == LocalRoot(demo_zip)
    found = root.locations(ds)
    assert found == scan_locations(ds)
    assert len(found) == len(ds.index().ids)
    index = (demo_zip / ds.index_file).read_bytes()
    assert root.index_bytes(ds) == index
    assert ds.fetched_index_bytes() is None  # a local table is read again, not kept
    assert root.fingerprint(index, found.values()) == data_fingerprint(index, found.values())
    data, where = root.read_bytes(ds.index_file, "the index table")
    assert data == index
    assert where == demo_zip / ds.index_file
    with pytest.raises(guideloom.ManifestError, match="not a file inside the data directory"):
        root.file("../outside.csv", "the index table")
    with pytest.raises(FileNotFoundError, match="the index table not found"):
        root.read_bytes("absent.csv", "the index table")
    assert "has no HDF5 file under" in root.missing_experiment(ds, 999)


def test_a_remote_root_answers_as_the_local_one(demo_zip, served):
    url, stats = served
    local = guideloom.load(demo_zip)
    ds = guideloom.load(url)
    root = ds.root
    assert isinstance(root, RemoteRoot)
    assert not root.is_local
    assert root.url == url
    index = (demo_zip / ds.index_file).read_bytes()
    ds.index()
    assert ds.fetched_index_bytes() == index
    requests = stats.requests
    assert root.index_bytes(ds) == index  # the table the job read: not fetched again
    assert stats.requests == requests
    found = root.locations(ds)
    here = local.root.locations(local)
    assert sorted(found) == sorted(here)
    for sim_id, loc in found.items():
        assert not loc.is_local
        assert loc.path == f"{url}/{here[sim_id].path.rsplit('/', 1)[-1]}"
        assert (loc.member, loc.header_offset, loc.size, loc.crc) == (
            here[sim_id].member, here[sim_id].header_offset, here[sim_id].size, here[sim_id].crc)
    assert root.fingerprint(index, found.values()) == remote_fingerprint(
        index, found.values())[:32]
    assert root.fingerprint(index, found.values()) != local.root.fingerprint(
        index, here.values())
    assert "in the remote release" in root.missing_experiment(ds, 999)
    with guideloom.open_h5(sorted(found)[0], data_dir=url) as remote_file, \
            guideloom.open_h5(sorted(found)[0], data_dir=demo_zip) as local_file:
        assert sorted(remote_file) == sorted(local_file)


def test_resolve_dataset_gives_the_root_a_folder_made_absolute_or_a_url(demo_zip, served,
                                                                       tmp_path, monkeypatch):
    url, _ = served
    ds, where = resolve_dataset(url, None, None)
    assert where == ds.data_dir
    assert isinstance(where, RemoteRoot)
    _ds2, where2 = resolve_dataset(url, guideloom.load(demo_zip), None)
    assert isinstance(where2, RemoteRoot)
    assert where2.url == url
    monkeypatch.chdir(demo_zip.parent)
    ds3, where3 = resolve_dataset(demo_zip.name, None, None)
    assert where3 == LocalRoot(demo_zip)
    assert where3.local_folder() == demo_zip
    assert ds3.root == where3
    assert ds3.data_dir == demo_zip  # the compat property: the folder, as before
    with pytest.raises(FileNotFoundError, match="data directory not found"):
        resolve_dataset(tmp_path / "absent", ds3, None)


def test_a_rewritten_archive_tells_the_member_opener(demo_zip, tmp_path):
    copy = tmp_path / "data"
    shutil.copytree(demo_zip, copy)
    archive = next(copy.rglob("*.zip"))
    heard: list[str] = []
    forget = on_archive_changed(heard.append)
    try:
        first = archive_members(archive)
        assert archive_members(archive) is first
        assert heard == []
        st = archive.stat()
        os.utime(archive, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))  # rewritten in place
        again = archive_members(archive)
        assert again == first
        assert again is not first
        assert heard == [str(archive)]
    finally:
        forget()


def test_a_local_root_may_be_forked_and_names_its_folder(demo_zip, monkeypatch):
    root = open_root(demo_zip)
    assert root.can_fork
    assert not root.high_latency
    assert root.local_folder() == demo_zip
    assert root.data_phrase == "local data"
    assert root.absolute() is root  # already absolute: the same root
    monkeypatch.chdir(demo_zip.parent)
    relative = LocalRoot(type(demo_zip)(demo_zip.name))
    assert relative.local_folder() == type(demo_zip)(demo_zip.name)
    assert relative.absolute() == LocalRoot(demo_zip)
    assert folder_of(demo_zip.name) == type(demo_zip)(demo_zip.name)
    assert folder_of(root) == demo_zip


def test_a_remote_root_is_not_forked_and_has_no_folder():
    for root in (open_root("https://example.org/release"),
                 RemoteRoot("doi:10.1/x", server="https://dv.example.org")):
        assert not root.can_fork
        assert root.high_latency
        assert root.local_folder() is None
        assert root.absolute() is root
        assert root.data_phrase == "data in the remote release"
        assert folder_of(root) is None
    # a URL or DOI is told from a folder without reading anything (no DOI lookup here)
    assert folder_of("https://example.org/release") is None
    assert folder_of("doi:10.18419/DARUS-5589") is None
    assert folder_of("s3://bucket/prefix") is None
    assert folder_of(None) is None


def test_the_dataset_carries_its_root_and_still_gives_its_folder(demo_zip, served):
    ds = guideloom.load(demo_zip)
    assert ds.root == LocalRoot(demo_zip)
    assert ds.data_dir == demo_zip
    assert guideloom.load(ds.root).root == ds.root  # a root is a data_dir too
    url, _ = served
    remote = guideloom.load(url)
    assert isinstance(remote.root, RemoteRoot)
    assert remote.data_dir is remote.root  # a release read by URL: its root, as before
    for dataset in (ds, remote):
        copy = pickle.loads(pickle.dumps(dataset))
        assert copy.root == dataset.root
        assert len(pickle.dumps(dataset.root)) < 400  # small: shipped with every task
