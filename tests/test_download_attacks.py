"""``guideloom download`` under attack: planted links, swapped files, changed files, lying lists.

Each test performs the attack on real files against the Dataverse-API server of
tests/dataverse_server.py on 127.0.0.1; where the attacker must be another local user, a real
second user is created (tests/second_user.py; skipped without root).
"""

from __future__ import annotations

import json
import os
import pwd
import stat
from pathlib import Path

import pytest

import guideloom
from guideloom.errors import DownloadError, UnsafeFileError
from tests.dataverse_server import Faults, Release, ServedFile, make_release, serve
from tests.second_user import second_user, shared_folder
from tests.trickle_server import TrickleServer

SMALL = ["metadata.json", "process_parameters.csv", "sample.zip"]


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Release:
    return make_release(tmp_path_factory.mktemp("release"))


def served(release: Release, name: str) -> ServedFile:
    return next(f for f in release.files if f.name == name)


def fetched(server) -> list[str]:
    """The file ids of the access requests logged."""
    return [e.path.split("/")[-1].split("?")[0] for e in server.access_log()]


# --- C1: a shared download folder --------------------------------------------------------------
def test_a_planted_record_tmp_symlink_never_overwrites_the_file_it_points_to(tmp_path,
                                                                             release):
    """Another user links ``.guideloom-download.json.tmp`` to one of our files: the record is
    written elsewhere, the file keeps its bytes."""
    victim = tmp_path / "thesis.tex"
    victim.write_text("three years of work\n")
    with second_user() as eve, shared_folder() as shared:
        eve.run("ln", "-s", str(victim), str(shared / ".guideloom-download.json.tmp"))
        with serve(release) as server:
            report = guideloom.download(shared, small=True, server=server.url,
                                        show_progress=False)
        assert sorted(Path(p).name for p in report.downloaded) == SMALL
        record = json.loads((shared / ".guideloom-download.json").read_text())
        assert sorted(record) == ["h5/sample.zip", "metadata.json", "process_parameters.csv"]
        assert not (shared / ".guideloom-download.json").is_symlink()
    assert victim.read_text() == "three years of work\n"


def test_our_own_stale_record_tmp_symlink_is_not_followed_either(tmp_path, release):
    victim = tmp_path / "keep.txt"
    victim.write_text("keep")
    out = tmp_path / "out"
    out.mkdir()
    (out / ".guideloom-download.json.tmp").symlink_to(victim)
    with serve(release) as server:
        guideloom.download(out, small=True, server=server.url, show_progress=False)
    assert victim.read_text() == "keep"
    assert (out / ".guideloom-download.json").is_file()


def test_a_planted_h5_symlink_to_another_users_folder_is_refused(release):
    with second_user() as eve, shared_folder() as shared:
        theirs = Path(pwd.getpwnam(eve.name).pw_dir) / "collect"
        eve.run("mkdir", str(theirs))
        eve.run("ln", "-s", str(theirs), str(shared / "h5"))
        with serve(release) as server:
            with pytest.raises(UnsafeFileError, match=r"h5 is a symbolic link made by user "
                                                      rf"id {eve.uid}"):
                guideloom.download(shared, small=True, server=server.url,
                                   show_progress=False)
        assert list(theirs.iterdir()) == []  # nothing landed outside the output folder


def test_a_folder_of_another_user_inside_the_output_is_refused(release):
    with second_user() as eve, shared_folder() as shared:
        eve.run("mkdir", "-m", "777", str(shared / "h5"))
        with serve(release) as server:
            with pytest.raises(UnsafeFileError, match=rf"h5 belongs to user id {eve.uid}"):
                guideloom.download(shared, files=["sample.zip"], server=server.url,
                                   show_progress=False)
            assert server.access_log() == []
        assert list((shared / "h5").iterdir()) == []


def test_a_file_swapped_by_another_user_keeping_size_and_mtime_is_verified_again(release):
    """She replaces a downloaded file by her own of the same size and modification time: the
    next run sees another inode and owner, checks it, and fetches the real file again."""
    meta = served(release, "metadata.json")
    with second_user() as eve, shared_folder() as shared:
        with serve(release) as server:
            guideloom.download(shared, small=True, server=server.url, show_progress=False)
            target = shared / "metadata.json"
            st = target.stat()
            fake = shared / ".fake"
            script = (f"head -c {st.st_size} /dev/zero | tr '\\0' x > {fake} && "
                      f"touch -d @{st.st_mtime_ns // 10**9}.{st.st_mtime_ns % 10**9:09d} "
                      f"{fake} && mv -f {fake} {target}")
            eve.run("sh", "-c", script)
            swapped = target.stat()
            assert (swapped.st_uid, swapped.st_size, swapped.st_mtime_ns) == (
                eve.uid, st.st_size, st.st_mtime_ns)
            before = len(server.access_log())
            report = guideloom.download(shared, small=True, server=server.url,
                                        show_progress=False)
            again = fetched(server)[before:]
        assert report.downloaded == ["metadata.json"]
        assert again == [str(meta.id)]
        assert target.read_bytes() == meta.data
        assert target.stat().st_uid == os.geteuid()


def test_a_file_rewritten_in_place_keeping_size_and_mtime_is_verified_again(tmp_path,
                                                                            release):
    sample = served(release, "sample.zip")
    with serve(release) as server:
        guideloom.download(tmp_path / "out", small=True, server=server.url,
                           show_progress=False)
        target = tmp_path / "out" / "h5" / "sample.zip"
        st = target.stat()
        data = bytearray(target.read_bytes())
        data[200] ^= 0xFF
        with target.open("r+b") as fh:  # the same inode, other bytes, the old mtime
            fh.write(bytes(data))
        os.utime(target, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert target.stat().st_ino == st.st_ino
        assert target.stat().st_mtime_ns == st.st_mtime_ns
        before = len(server.access_log())
        report = guideloom.download(tmp_path / "out", small=True, server=server.url,
                                    show_progress=False)
        again = fetched(server)[before:]
    assert report.downloaded == ["h5/sample.zip"]
    assert again == [str(sample.id)]
    assert target.read_bytes() == sample.data


def test_a_planted_symlink_at_a_files_name_is_replaced_not_trusted(tmp_path, release):
    """``h5/sample.zip`` planted as a link to a copy of the right bytes: it is not "present"
    (its target can change at any time); the real file replaces the link."""
    sample = served(release, "sample.zip")
    copy = tmp_path / "elsewhere.zip"
    copy.write_bytes(sample.data)
    h5 = tmp_path / "out" / "h5"
    h5.mkdir(parents=True)
    (h5 / "sample.zip").symlink_to(copy)
    with serve(release) as server:
        report = guideloom.download(tmp_path / "out", files=["sample.zip"], server=server.url,
                                    show_progress=False)
    assert report.downloaded == ["h5/sample.zip"]
    assert not (h5 / "sample.zip").is_symlink()
    assert (h5 / "sample.zip").read_bytes() == sample.data == copy.read_bytes()


# --- C2: resume only the same version ------------------------------------------------------------
def _changed(release: Release, name: str, checksum_type: str) -> Release:
    """The release with ``name``'s bytes changed, keeping its size."""
    old = served(release, name)
    data = bytes(b ^ 0x5A for b in old.data)
    new = ServedFile(old.id, old.name, old.directory, data, old.description,
                     modified=old.modified + 3600)
    return Release([new if f is old else f for f in release.files],
                   checksum_type=checksum_type)


def _cut(tmp_path: Path, release: Release, faults: Faults) -> Path:
    """Download concave.zip until the server cuts it halfway; the .part stays."""
    with serve(release, faults) as server, pytest.raises(DownloadError, match=r"h5/concave.zip"):
        guideloom.download(tmp_path / "out", files=["concave.zip"], server=server.url,
                           show_progress=False, retries=0)
    part = tmp_path / "out" / "h5" / "concave.zip.part"
    assert 0 < part.stat().st_size < len(served(release, "concave.zip").data)
    return part


@pytest.mark.parametrize("validators", [True, False])
def test_a_file_changed_on_the_server_after_a_cut_is_not_resumed_into_a_mix(
        tmp_path, release, validators, caplog):
    """The list gives only sizes; the file is cut halfway, then changes on the server (same
    size). The next run must not publish half old, half new bytes."""
    size_only = Release(release.files, checksum_type="none")
    half = len(served(release, "concave.zip").data) // 2
    faults = Faults(truncate_after={"concave.zip": half}, validators=validators)
    part = _cut(tmp_path, size_only, faults)
    changed = _changed(release, "concave.zip", "none")
    new = served(changed, "concave.zip").data
    with serve(changed, Faults(validators=validators)) as server, \
            caplog.at_level("INFO", logger="guideloom"):
        guideloom.download(tmp_path / "out", files=["concave.zip"], server=server.url,
                           show_progress=False)
        log = server.access_log()
    assert (tmp_path / "out" / "h5" / "concave.zip").read_bytes() == new
    assert not part.exists()
    if validators:  # asked for the rest only if it is still the version begun: it is not
        assert [(e.if_range is not None, e.range is not None, e.status) for e in log] == [
            (True, True, 200)]
        assert "h5/concave.zip changed on the server" in caplog.text
    else:  # nothing tells the versions apart: the file is fetched again, and the log says so
        assert [(e.range, e.status) for e in log] == [(None, 200)]
        assert "h5/concave.zip: cannot resume safely" in caplog.text


def test_an_unchanged_file_is_resumed_with_if_range(tmp_path, release):
    size_only = Release(release.files, checksum_type="none")
    data = served(release, "concave.zip").data
    part = _cut(tmp_path, size_only, Faults(truncate_after={"concave.zip": len(data) // 2},
                                            validators=True))
    had = part.stat().st_size
    with serve(size_only, Faults(validators=True)) as server:
        guideloom.download(tmp_path / "out", files=["concave.zip"], server=server.url,
                           show_progress=False)
        log = server.access_log()
    assert [(e.range, e.if_range, e.status) for e in log] == [
        (f"bytes={had}-", served(release, "concave.zip").etag, 206)]
    assert (tmp_path / "out" / "h5" / "concave.zip").read_bytes() == data


# --- C10: one path, two files ------------------------------------------------------------------
def test_a_list_naming_two_files_at_one_path_is_refused_naming_both(tmp_path, release):
    sample = served(release, "sample.zip")
    other = ServedFile(77, "sample.zip", "h5", b"another file entirely")
    hostile = Release([*release.files, other])
    with serve(hostile) as server:
        with pytest.raises(DownloadError, match=rf"h5/sample.zip.* file {sample.id} .*"
                                                rf"file {other.id}"):
            guideloom.download(tmp_path / "out", small=True, server=server.url,
                               show_progress=False)
        assert server.access_log() == []
    assert not (tmp_path / "out" / "h5" / "sample.zip").exists()


# --- From DaRUS: file modes ----------------------------------------------------------------------
def test_downloaded_files_follow_the_umask_unless_private(tmp_path, release):
    old = os.umask(0o022)
    try:
        with serve(release) as server:
            guideloom.download(tmp_path / "shared", small=True, server=server.url,
                               show_progress=False)
            guideloom.download(tmp_path / "mine", small=True, server=server.url,
                               show_progress=False, private=True)
    finally:
        os.umask(old)
    for name in ("metadata.json", "h5/sample.zip"):
        assert stat.S_IMODE((tmp_path / "shared" / name).stat().st_mode) == 0o644, name
        assert stat.S_IMODE((tmp_path / "mine" / name).stat().st_mode) == 0o600, name


# --- retries, names that do not resolve, configuration values ---------------------------------
ROOT = Path(__file__).resolve().parents[1]


def cli(cwd: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120):
    import subprocess
    import sys

    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "guideloom", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("command", [["download", "--small", "--yes"], ["info"]])
def test_retries_apply_to_the_file_list_too(tmp_path, release, command):
    with serve(release, Faults(api_busy=5)) as server:
        done = cli(tmp_path, *command, "--retries", "1", "--server", server.url)
        listed = [e for e in server.log if "/api/datasets/" in e.path]
    assert done.returncode == 1
    assert [e.status for e in listed] == [503, 503]  # the first attempt and one retry
    assert "failed after 2 attempts" in done.stderr
    assert "HTTP 503" in done.stderr


def test_a_server_name_that_does_not_resolve_is_said_once_without_retries(tmp_path):
    done = cli(tmp_path, "download", "--small", "--yes", "--retries", "5",
               "--server", "http://guideloom-no-such-host.invalid")
    assert done.returncode == 1
    line = done.stderr.strip().splitlines()[-1]
    assert "cannot resolve guideloom-no-such-host.invalid: no network?" in line, line
    assert "attempts" not in line
    assert "to resume" not in line


@pytest.mark.parametrize("value", ["1e400", "nan", "-1", "0"])
def test_a_bad_configuration_value_is_refused_at_once_naming_the_variable(tmp_path, release,
                                                                         value):
    with serve(release) as server:
        done = cli(tmp_path, "views", "doi:10.18419/DARUS-5589", "--server", server.url,
                   env={"GUIDELOOM_HTTP_TIMEOUT": value})
        requests = len(server.log)
    assert done.returncode == 2
    line = done.stderr.strip()
    assert line.startswith(f"guideloom: error: GUIDELOOM_HTTP_TIMEOUT={value!r} must be"), line
    assert "manifest" not in line
    assert "Traceback" not in line
    assert requests == 0  # refused before anything was asked


def test_the_config_module_refuses_infinite_and_nan_values_naming_the_key():
    from guideloom import config
    from guideloom.errors import ConfigError

    for key, value in [("http_timeout", float("inf")), ("http_timeout", 0.0),
                       ("cache_max_mb", float("nan")), ("decode_bytes_per_s", float("inf"))]:
        with pytest.raises(ConfigError, match=rf"guideloom.config {key} must be"):
            config.set(**{key: value})


# --- the "From DaRUS" path ---------------------------------------------------------------------
def test_views_of_a_doi_takes_server_as_info_and_download_do(tmp_path, release):
    with serve(release) as server:
        done = cli(tmp_path, "views", "doi:10.18419/DARUS-5589", "--server", server.url)
        asked = {e.path.split("?")[0] for e in server.log}
    assert done.returncode == 0, done.stderr
    assert "force-curve" in done.stdout
    assert "data in the remote release" in done.stdout
    assert "/api/datasets/:persistentId/versions/2.0" in asked


def test_a_wrong_option_names_the_subcommands_help(tmp_path):
    done = cli(tmp_path, "views", "data", "--bogus")
    assert done.returncode == 2
    assert "unrecognized arguments: --bogus (see guideloom views --help)" in done.stderr


# --- C3 (info and download): a server that trickles ---------------------------------------------
@pytest.mark.fast_case("command1-True", "command0-False")
@pytest.mark.parametrize("trickle_head", [True, False])
@pytest.mark.parametrize("command", [["info"], ["download", "--small", "--yes"]])
def test_a_trickling_server_fails_in_bounded_time_naming_the_url(tmp_path, command,
                                                                 trickle_head):
    import time

    server = TrickleServer(head=trickle_head)  # one byte every 0.05 s
    try:
        t0 = time.monotonic()
        done = cli(tmp_path, *command, "--timeout", "1", "--retries", "0", "--server",
                   server.url, timeout=60)
        seconds = time.monotonic() - t0
    finally:
        server.close()
    assert done.returncode == 1
    line = done.stderr.strip().splitlines()[-1]
    assert f"{server.url}/api/datasets/" in line, line
    assert ("no complete answer within 1 s" if trickle_head else "bytes/s for") in line, line
    assert seconds < 30  # python's start and one second of trickle; on main: hours


@pytest.mark.parametrize("timeout", [0, -1.0, float("inf"), float("nan")])
def test_download_refuses_a_timeout_that_is_no_wait(tmp_path, timeout):
    from guideloom.errors import UsageError

    with pytest.raises(UsageError, match="timeout must be a finite number of seconds above 0"):
        guideloom.download(tmp_path / "out", small=True, server="http://127.0.0.1:9",
                           timeout=timeout, show_progress=False)
    assert not (tmp_path / "out").exists()
