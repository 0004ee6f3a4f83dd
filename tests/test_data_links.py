"""Data directories made of symbolic links (issue 30, "From DaRUS"; docs/security.md).

On clusters a data directory is often a set of links into a shared store. Links you made
(or root did) are followed wherever they lead; a link another user made is followed only
when it stays inside the data directory or leads into a folder you trust (``--trust-root``,
``trusted_roots``); a manifest path with ``..`` is refused whatever it leads to. The planted
links are made by a real second user (``ln -s`` run as that user, in a shared folder).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import guideloom
from guideloom import config
from guideloom.errors import ManifestError
from tests.second_user import second_user, shared_folder


def _values(data: Path) -> dict[int, np.ndarray]:
    return {r["_sim_id"]: r["force_data"]
            for r in guideloom.iter_view("force-curve", data_dir=data)}


@pytest.fixture(scope="module")
def reference(demo_loose) -> dict[int, np.ndarray]:
    return _values(demo_loose)


def _same(got: dict[int, np.ndarray], want: dict[int, np.ndarray]) -> bool:
    return got.keys() == want.keys() and all(np.array_equal(got[k], want[k]) for k in want)


def test_a_loose_folder_linked_into_a_store_is_read(demo_loose, reference, tmp_path):
    data, store = tmp_path / "data", tmp_path / "scratch" / "rddac"
    shutil.copytree(demo_loose, data)
    store.mkdir(parents=True)
    (data / "h5").rename(store / "h5")
    (data / "h5").symlink_to(store / "h5")  # ln -s /scratch/rddac/h5 data/h5
    assert _same(_values(data), reference)


def test_each_file_linked_into_a_store_is_read(demo_loose, reference, tmp_path):
    data, store = tmp_path / "data", tmp_path / "store"
    shutil.copytree(demo_loose, data)
    store.mkdir()
    for path in sorted((data / "h5").iterdir()):
        path.rename(store / path.name)
        path.symlink_to(store / path.name)
    via = tmp_path / "via"  # a chain of your own links: data/h5/X -> via/X -> store/X
    via.mkdir()
    first = data / "h5" / "0003.h5"
    first.unlink()
    (via / "0003.h5").symlink_to(store / "0003.h5")
    first.symlink_to(via / "0003.h5")
    assert _same(_values(data), reference)


@pytest.fixture
def shared(demo_loose):
    """A loose data directory and a store in a shared folder, and a second user who may add
    links to the data directory (its folders are world-writable, not sticky)."""
    with shared_folder() as root, second_user() as user:
        data, store = root / "data", root / "store"
        shutil.copytree(demo_loose, data)
        store.mkdir()
        for folder in (data, data / "h5"):
            folder.chmod(0o777)
        yield data, store, user


def _refused(data: Path, user, link: Path) -> str:
    with pytest.raises(ManifestError) as info:
        _values(data)
    text = str(info.value)
    assert f"symbolic link {link}, made by {user.name} (uid {user.uid})" in text, text
    assert "--trust-root DIR" in text, text
    assert "trusted_roots" in text, text
    assert "GUIDELOOM_TRUSTED_ROOTS" in text, text
    return text


def test_a_file_link_planted_by_another_user_is_refused_unless_its_store_is_trusted(
        shared, reference):
    data, store, user = shared
    (data / "h5" / "0003.h5").rename(store / "0003.h5")
    link = data / "h5" / "0003.h5"
    user.run("ln", "-s", str(store / "0003.h5"), str(link))
    assert os.lstat(link).st_uid == user.uid
    text = _refused(data, user, link)
    assert f"leads to {store / '0003.h5'}" in text
    other = store.parent / "other"
    other.mkdir()
    with config.set(trusted_roots=[str(other)]):  # a root that is not the store's
        _refused(data, user, link)
    with config.set(trusted_roots=[str(store)]):
        assert _same(_values(data), reference)


def test_a_folder_link_planted_by_another_user_is_refused_unless_trusted(shared, reference):
    data, store, user = shared
    (data / "h5").rename(store / "h5")
    link = data / "h5"
    user.run("ln", "-s", str(store / "h5"), str(link))
    _refused(data, user, link)
    with config.set(trusted_roots=str(store)):
        assert _same(_values(data), reference)


def test_each_link_of_a_chain_is_checked(shared, reference, tmp_path):
    """Your own link leading to a link another user made: the second one is refused (its
    target is hers to change), unless it leads into a trusted root."""
    data, store, user = shared
    (data / "h5").rename(store / "h5")
    hers = store.parent / "hers"
    user.run("ln", "-s", str(store / "h5"), str(hers))
    (data / "h5").symlink_to(hers)
    _refused(data, user, hers)
    with config.set(trusted_roots=[str(store)]):
        assert _same(_values(data), reference)


def test_a_link_of_another_user_staying_inside_the_data_directory_is_read(shared, reference):
    data, _, user = shared
    kept = data / "kept"
    kept.mkdir()
    (data / "h5" / "0003.h5").rename(kept / "0003.h5")
    user.run("ln", "-s", str(kept / "0003.h5"), str(data / "h5" / "0003.h5"))
    assert _same(_values(data), reference)


def test_a_manifest_path_with_dotdot_is_refused_even_into_a_trusted_root(demo_zip, tmp_path):
    data, store = tmp_path / "data", tmp_path / "store"
    shutil.copytree(demo_zip, data)
    store.mkdir()
    (data / "concave.zip").rename(store / "concave.zip")
    doc = json.loads((data / "metadata.json").read_text())
    for entry in doc["distribution"]:
        if entry.get("name") == "concave.zip":
            entry["name"] = entry["contentUrl"] = "../store/concave.zip"
    (data / "metadata.json").write_text(json.dumps(doc))
    with config.set(trusted_roots=[str(store), str(tmp_path)]):
        with pytest.raises(ManifestError, match=r"'\.\./store/concave\.zip', which is not a file "
                                                r"inside the data directory .*without '\.\.'"):
            guideloom.export_to_numpy("force-curve", tmp_path / "o", data_dir=data,
                                      client="sync")
    assert not (tmp_path / "o").exists()


def test_trust_root_on_the_command_line(shared):
    data, store, user = shared
    (data / "h5").rename(store / "h5")
    user.run("ln", "-s", str(store / "h5"), str(data / "h5"))
    env = {k: v for k, v in os.environ.items() if k != "GUIDELOOM_TRUSTED_ROOTS"}

    def run(*extra: str, **more: str) -> subprocess.CompletedProcess[str]:
        out = data.parent / f"out{len(extra)}{len(more)}"
        return subprocess.run([sys.executable, "-m", "guideloom", "run", "force_signals",
                               "--scheduler", "sync", "--data-dir", str(data), "--output",
                               str(out), *extra], cwd=data.parent, capture_output=True,
                              text=True, timeout=300, env={**env, **more})

    refused = run()
    assert refused.returncode != 0, refused.stderr
    assert "--trust-root DIR" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr
    views = subprocess.run([sys.executable, "-m", "guideloom", "views", str(data),
                            "--trust-root", str(store)], cwd=data.parent, capture_output=True,
                           text=True, timeout=120, env=env)
    assert views.returncode == 0, views.stderr
    assert "force-curve" in views.stdout, views.stderr
    done = run("--trust-root", str(store.parent / "elsewhere"), "--trust-root", str(store))
    assert done.returncode == 0, done.stderr
    by_env = run(GUIDELOOM_TRUSTED_ROOTS=str(store))
    assert by_env.returncode == 0, by_env.stderr


def test_trusted_roots_in_a_workflow_file(shared, tmp_path):
    """``dataset.trusted_roots`` of a workflow file: her link into the store is followed
    while the workflow loads and runs, and only then."""
    from guideloom.export import run_export
    from guideloom.workflow.load import load_workflow

    data, store, user = shared
    (data / "h5").rename(store / "h5")
    user.run("ln", "-s", str(store / "h5"), str(data / "h5"))
    text = (f'[dataset]\ndata_dir = "{data}"\n{{trust}}[view]\nname = "force-curve"\n'
            f'[output]\nkind = "npz"\npath = "{tmp_path / "out"}"\n')
    (tmp_path / "refused.toml").write_text(text.format(trust=""))
    with pytest.raises(ManifestError, match="--trust-root DIR"):
        run_export(load_workflow(tmp_path / "refused.toml").to_spec(), client="sync")
    (tmp_path / "trusted.toml").write_text(text.format(trust=f'trusted_roots = ["{store}"]\n'))
    wf = load_workflow(tmp_path / "trusted.toml")
    assert wf.trusted_roots == (str(store),)
    with wf.trusting():
        run_export(wf.to_spec(), client="sync")
    assert len(guideloom.load_export(tmp_path / "out")) == 36
    assert not config.get("trusted_roots")  # nothing is left trusted after it
