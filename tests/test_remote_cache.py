"""The on-disk cache of remote reads when the archive behind it changes (issue 30, C5).

A server that gives no ETag or Last-Modified (the test server of tests/dataverse_server.py
serving a folder) has ``concave.zip`` replaced by another valid archive of the same size (its
members in another order): the next read must see the new archive -- its rows equal a local
read of it -- not fail "the archive is damaged" until the user finds the cache.
``guideloom cache clear`` empties the cache and says what it removed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from guideloom.read.byte_source import clear_source_cache
from guideloom.read.http import close_connections
from tests.dataverse_server import Faults, serve
from tests.remote_helpers import assert_same, records

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def release(demo_zip, tmp_path, monkeypatch):
    """The demo release served at ``URL/release`` without validators; its folder, its URL."""
    site = tmp_path / "site"
    shutil.copytree(demo_zip, site / "release")
    monkeypatch.setenv("GUIDELOOM_CACHE_DIR", str(tmp_path / "cache"))
    clear_source_cache()
    with serve(faults=Faults(), static=site) as server:
        yield site / "release", f"{server.url}/release"
    close_connections()
    clear_source_cache()


def reorder(archive: Path) -> None:
    """Rewrite ``archive`` with its members in reverse order: valid, the same size, every
    member at another offset."""
    with zipfile.ZipFile(archive) as z:
        items = [(info, z.read(info)) for info in z.infolist()]
    size = archive.stat().st_size
    new = archive.with_name(archive.name + ".new")
    with zipfile.ZipFile(new, "w") as out:
        for info, data in reversed(items):
            copy = zipfile.ZipInfo(info.filename, info.date_time)
            copy.compress_type, copy.external_attr = info.compress_type, info.external_attr
            out.writestr(copy, data)
    os.replace(new, archive)
    assert archive.stat().st_size == size


def entries(cache: Path) -> list[str]:
    folder = cache / "remote"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def test_an_archive_replaced_with_the_same_size_is_read_anew(release, tmp_path):
    folder, url = release
    first = records("force-curve", data_dir=url)
    assert_same(first, records("force-curve", data_dir=folder))
    assert entries(tmp_path / "cache")  # what the first read learnt is on disk
    reorder(folder / "concave.zip")
    clear_source_cache()  # a new process: only the on-disk cache remembers the old archive
    close_connections()
    again = records("force-curve", data_dir=url)
    assert_same(again, records("force-curve", data_dir=folder))


def test_cache_clear_removes_every_entry_and_says_so(release, tmp_path):
    _folder, url = release
    assert records("force-curve", data_dir=url)
    cache = tmp_path / "cache"
    before = entries(cache)
    assert before
    done = subprocess.run([sys.executable, "-m", "guideloom", "cache", "clear"],
                          env={**os.environ, "PYTHONPATH": str(ROOT),
                               "GUIDELOOM_CACHE_DIR": str(cache)},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().startswith(f"removed {len(before)} entries (")
    assert str(cache / "remote") in done.stdout
    assert entries(cache) == []


def test_a_damaged_remote_archive_names_the_cache_and_how_to_clear_it(release, tmp_path):
    from guideloom.errors import CorruptDataError

    folder, url = release
    archive = folder / "concave.zip"
    with archive.open("r+b") as fh:  # the first member's local header names another file
        fh.seek(30)
        name = fh.read(1)
        fh.seek(30)
        fh.write(b"9" if name != b"9" else b"8")
    with pytest.raises(CorruptDataError) as info:
        records("force-curve", data_dir=url)
    message = str(info.value)
    assert f"{url}/concave.zip" in message, message
    assert "the archive is damaged" in message, message
    assert "guideloom cache clear" in message, message
    assert str(tmp_path / "cache" / "remote") in message, message
