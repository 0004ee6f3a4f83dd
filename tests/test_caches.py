"""One owner of the in-process caches: bounded, closing what leaves them, cleared on demand,
safe across threads and fork (:mod:`guideloom.runtime.caches`)."""

from __future__ import annotations

import os
import random
import signal
import sys
import threading
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

import guideloom
from guideloom.read.hdf5 import open_h5_file
from guideloom.read.http import HttpRangeSource
from guideloom.read.scan import scan_locations
from guideloom.runtime import caches
from tests.dataverse_server import Faults, serve

FIELD = "force_data"


def split_archives(root: Path) -> list[int]:
    """Rewrite the demo's two archives as one zip per experiment (``h5/<id>.zip``)."""
    (root / "h5").mkdir(exist_ok=True)
    ids = []
    for name in ("concave.zip", "convex.zip"):
        with zipfile.ZipFile(root / name) as zf:
            for member in zf.namelist():
                sim_id = int(Path(member).stem)
                with zipfile.ZipFile(root / "h5" / f"{sim_id:04d}.zip", "w",
                                     compression=zipfile.ZIP_STORED) as out:
                    out.writestr(member, zf.read(member))
                ids.append(sim_id)
        (root / name).unlink()
    return sorted(ids)


def zip_fds(under: Path) -> dict[int, str]:
    """This process's open descriptors on zip files below ``under``: ``{fd: path}``."""
    found = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if target.startswith(str(under)) and ".zip" in target:
            found[int(name)] = target
    return found


def read_all(root: Path, ids: list[int]) -> dict[int, bytes]:
    return {r["_sim_id"]: r[FIELD].tobytes() for r in guideloom.iter_view(
        "force-curve", data_dir=root, sim_ids=ids)}


@pytest.fixture
def many_archives(demo_copy):
    """The demo dataset as 36 one-member archives, with its records as read from the original
    layout; the process's caches are emptied before and after."""
    guideloom.clear_caches()
    expected = read_all(demo_copy, list(range(36)))
    guideloom.clear_caches()
    ids = split_archives(demo_copy)
    assert len(ids) == 36
    yield demo_copy, ids, expected
    guideloom.clear_caches()


def test_open_archive_descriptors_stay_within_the_bound_over_many_archives(
        many_archives, monkeypatch):
    root, ids, expected = many_archives
    monkeypatch.setenv("GUIDELOOM_CACHE_ARCHIVE_FDS_ENTRIES", "4")
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(2):  # a second epoch reopens what was evicted
        assert read_all(root, ids) == expected
        # the bound, plus at most one member per reading thread still pointed at
        assert len(zip_fds(root)) <= 4 + 2
    assert len(os.listdir("/proc/self/fd")) <= before + 6


def test_an_evicted_descriptor_closes_once_the_file_reading_through_it_closes(
        many_archives, monkeypatch):
    root, ids, expected = many_archives
    monkeypatch.setenv("GUIDELOOM_CACHE_ARCHIVE_FDS_ENTRIES", "1")
    ds = guideloom.load(data_dir=root)
    locs = scan_locations(ds, root)
    first = open_h5_file(locs[ids[0]])  # holds the descriptor of its archive
    for sim_id in ids[1:6]:  # evicts it from the cache while it is in use
        with open_h5_file(locs[sim_id]) as f:
            assert f["force/data"][()].tobytes() == expected[sim_id]
    assert locs[ids[0]].path in zip_fds(root).values()  # still open: still read through
    assert first["force/data"][()].tobytes() == expected[ids[0]]
    first.close()
    open_now = set(zip_fds(root).values())
    assert locs[ids[0]].path not in open_now  # closed with the last file using it
    assert len(open_now) <= 2


def test_clear_caches_closes_every_descriptor_and_the_next_read_gives_equal_data(
        many_archives):
    root, ids, expected = many_archives
    assert read_all(root, ids) == expected
    assert zip_fds(root)  # kept open across records
    guideloom.clear_caches()
    assert zip_fds(root) == {}
    assert all(len(c) == 0 for c in caches.caches())
    assert read_all(root, ids) == expected


def test_concurrent_readers_share_a_small_descriptor_cache_and_read_their_own_bytes(
        many_archives, monkeypatch):
    root, ids, expected = many_archives
    monkeypatch.setenv("GUIDELOOM_CACHE_ARCHIVE_FDS_ENTRIES", "2")
    ds = guideloom.load(data_dir=root)
    locs = scan_locations(ds, root)

    def read(seed: int) -> list[bool]:
        order = random.Random(seed).choices(ids, k=60)
        ok = []
        for sim_id in order:  # descriptors are evicted under the other threads all along
            with open_h5_file(locs[sim_id]) as f:
                ok.append(f["force/data"][()].tobytes() == expected[sim_id])
        return ok

    with ThreadPoolExecutor(8) as pool:
        results = [x for part in pool.map(read, range(8)) for x in part]
    assert len(results) == 480
    assert all(results)
    assert len(zip_fds(root)) <= 2 + 8


def test_a_bounded_cache_used_from_many_threads_closes_each_value_once():
    closed: list[int] = []
    lock = threading.Lock()

    def close(value: int) -> None:
        with lock:
            closed.append(value)

    made = iter(range(10**9))
    made_lock = threading.Lock()

    def make() -> int:
        with made_lock:
            return next(made)

    cache = caches.BoundedCache("archive_fds", close=close)  # a private one, same bound
    os.environ["GUIDELOOM_CACHE_ARCHIVE_FDS_ENTRIES"] = "16"
    try:
        def work(seed: int) -> None:
            rng = random.Random(seed)
            for _ in range(3000):
                key = rng.randrange(64)
                if rng.random() < 0.05:
                    cache.pop(key)
                else:
                    cache.get_or_create(key, make)

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(work, range(8)))
        assert len(cache) <= 16
        kept = [cache.get(k) for k in cache.keys()]  # noqa: SIM118 - BoundedCache is not iterable
        total = next(made)
        # every value made is either still kept or was closed, exactly once
        assert sorted(closed + kept) == list(range(total))
        cache.clear()
        assert sorted(closed) == list(range(total))
        assert len(cache) == 0
    finally:
        del os.environ["GUIDELOOM_CACHE_ARCHIVE_FDS_ENTRIES"]


def test_clear_caches_closes_idle_http_connections_and_eviction_closes_a_hosts(
        tmp_path, monkeypatch):
    data = random.Random(5).randbytes(1 << 16)
    (tmp_path / "data.bin").write_bytes(data)
    guideloom.clear_caches()

    def established(port: int) -> int:
        return sum(1 for c in psutil.Process().net_connections("tcp")
                   if c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED)

    with serve(faults=Faults(), static=tmp_path) as one, \
            serve(faults=Faults(), static=tmp_path) as two:
        port_one, port_two = (int(s.url.rsplit(":", 1)[1].split("/")[0]) for s in (one, two))
        src = HttpRangeSource(f"{one.url}/data.bin", size=len(data))
        assert src.read(100, 50) == data[100:150]
        assert established(port_one) == 1  # kept alive, idle
        guideloom.clear_caches()
        assert established(port_one) == 0
        assert src.read(200, 50) == data[200:250]  # the next read reconnects
        assert one.counts.connections == 2
        monkeypatch.setenv("GUIDELOOM_CACHE_HTTP_CONNECTIONS_ENTRIES", "1")
        other = HttpRangeSource(f"{two.url}/data.bin", size=len(data))
        assert other.read(0, 10) == data[:10]  # a second host evicts the first one's
        assert established(port_one) == 0
        assert established(port_two) == 1
        guideloom.clear_caches()
        assert established(port_two) == 0


CHILD_TIMEOUT = 120


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
def test_a_forked_child_reads_on_its_own_and_leaves_the_parents_descriptors_open(
        many_archives):
    root, ids, expected = many_archives
    assert read_all(root, ids[:10]) == {i: expected[i] for i in ids[:10]}  # warm the caches
    held = zip_fds(root)
    assert held
    locks = [c._lock for c in caches.caches()]  # another thread mid-update at the fork
    for lock in locks:
        lock.acquire()
    try:
        pid = os.fork()
    except BaseException:
        for lock in locks:
            lock.release()
        raise
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            signal.alarm(CHILD_TIMEOUT)  # a lock inherited held would hang here
            ok = read_all(root, ids) == expected
            guideloom.clear_caches()
            code = 0 if ok and not zip_fds(root) else 2
        except BaseException as exc:
            print(f"child failed: {exc!r}", file=sys.stderr)
        finally:
            os._exit(code)
    for lock in locks:
        lock.release()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert zip_fds(root) == held  # the parent's descriptors: same numbers, same files, open
    for fd in held:
        os.fstat(fd)
    assert read_all(root, ids) == expected
    guideloom.clear_caches()
    assert zip_fds(root) == {}


def test_memoized_functions_take_their_bound_at_use_and_are_emptied_by_clear_caches(
        monkeypatch):
    from guideloom.formats import layout

    guideloom.clear_caches()
    monkeypatch.setenv("GUIDELOOM_CACHE_OUTPUT_NAMES_ENTRIES", "3")
    for name in ("a", "b", "c", "d", "e"):
        layout.check_output_name(name, "test")
    info = layout._reason_cached.cache_info()
    assert info.maxsize == 3
    assert info.currsize == 3
    guideloom.clear_caches()
    monkeypatch.delenv("GUIDELOOM_CACHE_OUTPUT_NAMES_ENTRIES")
    assert layout._reason_cached.cache_info().currsize == 0
    assert layout._reason_cached.cache_info().maxsize == 4096


def test_cache_bounds_come_from_the_environment_and_bad_values_name_the_variable(monkeypatch):
    assert caches._limit("archive_fds") == (64, None)
    monkeypatch.setenv("GUIDELOOM_CACHE_ARCHIVE_FDS_ENTRIES", "7")
    monkeypatch.setenv("GUIDELOOM_CACHE_H5_HEADER_BLOCKS_BYTES", "none")
    assert caches._limit("archive_fds") == (7, None)
    assert caches._limit("h5_header_blocks") == (4096, None)
    monkeypatch.setenv("GUIDELOOM_CACHE_ARCHIVE_FDS_ENTRIES", "many")
    with pytest.raises(ValueError, match="GUIDELOOM_CACHE_ARCHIVE_FDS_ENTRIES"):
        caches._limit("archive_fds")
    with pytest.raises(ValueError, match="DEFAULTS"):
        caches.cache("not_a_cache")


def test_clear_caches_is_public_and_keeps_the_on_disk_remote_cache(tmp_path, monkeypatch):
    from guideloom.read.metacache import process_cache

    assert "clear_caches" in guideloom.__all__
    monkeypatch.setenv("GUIDELOOM_CACHE_DIR", str(tmp_path / "disk"))
    process_cache().put("kind", "key", {"a": 1})
    guideloom.clear_caches()
    assert process_cache().get("kind", "key") == {"a": 1}
    process_cache().clear()  # the on-disk cache's own clear
    assert process_cache().get("kind", "key") is None
    assert {c.name for c in caches.caches()} >= {"archive_fds", "archive_listings"}


def test_the_disk_cache_folder_follows_the_environment_each_time(tmp_path, monkeypatch):
    """cache_root() is remembered per setting, never past a change of one."""
    from guideloom.read.metacache import cache_root, process_cache

    monkeypatch.delenv("GUIDELOOM_CACHE_DIR", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home1"))
    assert cache_root() == tmp_path / "home1" / ".cache" / "guideloom"
    monkeypatch.setenv("HOME", str(tmp_path / "home2"))
    assert cache_root() == tmp_path / "home2" / ".cache" / "guideloom"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "guideloom"
    monkeypatch.setenv("GUIDELOOM_CACHE_DIR", str(tmp_path / "explicit"))
    assert cache_root() == tmp_path / "explicit"
    assert process_cache().root == tmp_path / "explicit" / "remote"
    monkeypatch.setenv("GUIDELOOM_CACHE_DIR", str(tmp_path / "other"))
    assert process_cache().root == tmp_path / "other" / "remote"


def test_a_disk_cache_entry_read_is_marked_used_at_most_every_few_minutes(tmp_path,
                                                                           monkeypatch):
    """A read marks the entry used (its mtime: eviction removes the oldest first) unless it
    was marked within TOUCH_AFTER_S: lookups repeated in one export dirty no inode."""
    from guideloom.read import metacache

    monkeypatch.setenv("GUIDELOOM_CACHE_DIR", str(tmp_path / "disk"))
    cache = metacache.process_cache()
    cache.put("kind", "key", {"a": 1})
    path = cache._file("kind", "key")
    assert path is not None
    recent = time.time() - metacache.TOUCH_AFTER_S / 2
    os.utime(path, (recent, recent))
    assert cache.get("kind", "key") == {"a": 1}
    assert os.stat(path).st_mtime == pytest.approx(recent, abs=1e-3)  # not marked again
    old = time.time() - 2 * metacache.TOUCH_AFTER_S
    os.utime(path, (old, old))
    assert cache.get("kind", "key") == {"a": 1}
    assert os.stat(path).st_mtime > time.time() - 60  # marked used now


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX only")
def test_a_forked_child_opens_its_own_connection_and_its_clear_leaves_the_parents(tmp_path):
    data = random.Random(6).randbytes(1 << 16)
    (tmp_path / "data.bin").write_bytes(data)
    guideloom.clear_caches()
    with serve(faults=Faults(), static=tmp_path) as server:
        src = HttpRangeSource(f"{server.url}/data.bin", size=len(data))
        assert src.read(0, 100) == data[:100]
        assert server.counts.connections == 1  # idle in the parent's pool
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                signal.alarm(CHILD_TIMEOUT)
                ok = src.read(1000, 100) == data[1000:1100]
                guideloom.clear_caches()  # closes the child's connection only
                code = 0 if ok else 2
            except BaseException as exc:
                print(f"child failed: {exc!r}", file=sys.stderr)
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert server.counts.connections == 2  # the child never used the parent's
        assert src.read(2000, 100) == data[2000:2100]
        assert server.counts.connections == 2  # the parent's connection still works
    guideloom.clear_caches()


def test_the_descriptor_of_a_replaced_archive_is_closed_not_kept(demo_copy):
    guideloom.clear_caches()
    ds = guideloom.load(data_dir=demo_copy)
    archive = demo_copy / "concave.zip"
    ids = sorted(i for i, loc in scan_locations(ds, demo_copy).items()
                 if loc.path == str(archive))
    expected = read_all(demo_copy, ids)
    for n in range(5):  # the archive is replaced (same members, a new file) between epochs
        copy = demo_copy / f"concave.{n}.zip"
        copy.write_bytes(archive.read_bytes())
        copy.replace(archive)
        assert read_all(demo_copy, ids) == expected
    open_now = list(zip_fds(demo_copy).values())
    assert not [p for p in open_now if p.endswith("(deleted)")], open_now
    assert open_now.count(str(archive)) == 1
    guideloom.clear_caches()


def test_cache_bounds_are_configuration_keys_set_from_python():
    from guideloom import config

    assert config.get("cache_archive_fds_entries") == 64
    assert config.get("cache_h5_header_blocks_bytes") == 16 << 20
    with config.set(cache_archive_fds_entries=3, cache_h5_header_blocks_bytes=0):
        assert caches._limit("archive_fds") == (3, None)
        assert caches._limit("h5_header_blocks") == (4096, None)
        bounded: caches.BoundedCache[int, int] = caches.BoundedCache("archive_fds")
        for i in range(5):
            bounded.put(i, i)
        assert len(bounded) == 3
        assert bounded.evictions == 2
    assert caches._limit("archive_fds") == (64, None)
    with pytest.raises(guideloom.ConfigError, match="cache_archive_fds_entries must be at least 0"):
        config.set(cache_archive_fds_entries=-1)
    # every registered cache has its key, documented in docs/configuration.md's table
    assert {f"cache_{name}_entries" for name in caches.DEFAULTS} <= set(config.KNOBS)
