"""``guideloom download`` / ``info`` against a real Dataverse-API server on 127.0.0.1.

The server (tests/dataverse_server.py) serves a release made by make_demo_data plus a
sample.zip, redirects large files to a second server as DaRUS does, and injects the faults a
repository shows. Commands run as real subprocesses from a temporary directory.
"""

from __future__ import annotations

import io
import os
import pty
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import guideloom
from guideloom.errors import DownloadError, UnsafeFileError
from tests.dataverse_server import Faults, Release, ServedFile, make_release, serve

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "s3cr3t-t0ken-for-tests"


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> Release:
    return make_release(tmp_path_factory.mktemp("release"))


def cli(cwd: Path, *args: str, env: dict[str, str] | None = None, timeout: float = 120,
        stdin: int | None = subprocess.DEVNULL) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run([sys.executable, "-m", "guideloom", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout, stdin=stdin)


def served(release: Release, name: str) -> ServedFile:
    return next(f for f in release.files if f.name == name)


def assert_identical(out: Path, release: Release, names: list[str] | None = None) -> None:
    for f in release.files:
        if names is None or f.name in names:
            path = out / f.directory / f.name
            assert path.read_bytes() == f.data, path
    assert not list(out.rglob("*.part"))


def test_small_downloads_the_sample_into_rddacs_layout_and_a_second_run_fetches_nothing(
        tmp_path, release):
    with serve(release) as server:
        done = cli(tmp_path, "download", "--small", "--yes", "--server", server.url)
        assert done.returncode == 0, done.stderr
        out = tmp_path / "data"  # rddac's default output directory, relative to the cwd
        assert sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()
                      and not p.name.startswith(".")) == [
            "h5/sample.zip", "metadata.json", "process_parameters.csv"]
        assert_identical(out, release, ["sample.zip", "metadata.json",
                                        "process_parameters.csv"])
        first = len(server.access_log())
        assert first == 3
        again = cli(tmp_path, "download", "--small", "--yes", "--server", server.url)
        assert again.returncode == 0, again.stderr
        assert len(server.access_log()) == first  # nothing fetched the second time
        assert "0 of 3 file(s) to fetch" in again.stdout
    # the tutorial's next step works on it: the sample's two experiments are found in
    # h5/sample.zip and exported; the ids the sample lacks are named as missing
    run = cli(tmp_path, "run", "force_signals", "--data-dir", "data", "--output", "fs",
              "--scheduler", "sync")
    assert run.returncode == 0, run.stderr
    assert "wrote 2 records of view 'force-signals'" in run.stdout
    assert guideloom.load_export(tmp_path / "fs").sim_ids.tolist() == [0, 1]


def test_full_download_in_parallel_through_redirects_429_and_503(tmp_path, release):
    faults = Faults(fail_every=3, redirect_over=300_000)
    with serve(release, faults) as server:
        done = cli(tmp_path, "download", "--yes", "--out", "rel", "--parallel", "3",
                   "--server", server.url, env={"GUIDELOOM_DATAVERSE_TOKEN": TOKEN})
        assert done.returncode == 0, done.stderr
        assert_identical(tmp_path / "rel", release)
        log = server.log
    statuses = [e.status for e in log]
    assert 503 in statuses
    assert 429 in statuses
    store = [e for e in log if e.server == "store"]
    assert {e.path for e in store} == {"/files/21", "/files/22"}  # the two large zips
    # the token goes to the Dataverse server only, never to the store it redirects to
    assert all(e.token for e in log if e.server == "api")
    assert not any(e.token for e in store)
    assert TOKEN not in done.stdout + done.stderr
    for path in (tmp_path / "rel").rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path


def test_the_progress_bar_shows_bytes_rate_and_time_left(tmp_path, release):
    with serve(release) as server:
        done = cli(tmp_path, "download", "--yes", "--files", "concave.zip", "--server",
                   server.url)
    assert done.returncode == 0, done.stderr
    from tqdm import tqdm

    size = tqdm.format_sizeof(len(served(release, "concave.zip").data), divisor=1024)
    bar = done.stderr.strip().splitlines()[-1]
    assert "download: 100%" in bar, bar
    assert f"{size}/{size}" in bar, bar
    assert "B/s]" in bar, bar
    assert "<00:00" in bar  # the time left
    assert (tmp_path / "data" / "h5" / "concave.zip").read_bytes() == served(
        release, "concave.zip").data


def test_a_killed_download_resumes_by_range_and_ends_byte_identical(tmp_path, release):
    big = served(release, "concave.zip")
    part = tmp_path / "data" / "h5" / "concave.zip.part"
    with serve(release, Faults(throttle=0.01)) as server:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "guideloom", "download", "--quiet", "--files",
             "concave.zip", "--server", server.url],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 60
            while not (part.exists() and part.stat().st_size >= len(big.data) // 3):
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "the .part file did not grow"
                time.sleep(0.005)
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait(timeout=30)
            proc.stdout.close()
            proc.stderr.close()
        had = part.stat().st_size
        assert 0 < had < len(big.data)
        assert not (tmp_path / "data" / "h5" / "concave.zip").exists()
        server.faults.throttle = 0.0
        before = len(server.access_log())
        done = cli(tmp_path, "download", "--quiet", "--files", "concave.zip",
                   "--server", server.url)
        assert done.returncode == 0, done.stderr
        assert done.stdout == done.stderr == ""  # --quiet
        resumed = server.access_log()[before:]
    assert [e.range for e in resumed] == [f"bytes={had}-"]
    assert [e.status for e in resumed] == [206]
    assert (tmp_path / "data" / "h5" / "concave.zip").read_bytes() == big.data
    assert not part.exists()


def test_a_damaged_file_on_the_server_is_never_left_under_its_name(tmp_path, release):
    with serve(release, Faults(damaged={"convex.zip"})) as server:
        done = cli(tmp_path, "download", "--yes", "--server", server.url)
    assert done.returncode == 1
    assert "h5/convex.zip" in done.stderr
    assert f"{server.url}/api/access/datafile/22" in done.stderr
    assert "MD5" in done.stderr
    assert served(release, "convex.zip").md5 in done.stderr
    h5 = tmp_path / "data" / "h5"
    assert not (h5 / "convex.zip").exists()
    assert not (h5 / "convex.zip.part").exists()
    # the other files were downloaded and verified
    assert (h5 / "concave.zip").read_bytes() == served(release, "concave.zip").data


def test_a_checksum_in_the_manifest_is_checked_too(tmp_path, release):
    import hashlib
    import json

    doc = json.loads(served(release, "metadata.json").data)
    for entry in doc["distribution"]:
        if entry.get("contentUrl") == "concave.zip":
            entry["sha256"] = hashlib.sha256(b"not these bytes").hexdigest()
    body = json.dumps(doc).encode()
    changed = Release([ServedFile(11, "metadata.json", "", body), *release.files[1:]])
    with serve(changed) as server:
        with pytest.raises(DownloadError, match=r"h5/concave.zip: .*SHA-256"):
            guideloom.download(tmp_path / "out", server=server.url, show_progress=False,
                               retries=1)
    assert not (tmp_path / "out" / "h5" / "concave.zip").exists()
    assert (tmp_path / "out" / "h5" / "convex.zip").is_file()


@pytest.mark.fast_case("fault0")
@pytest.mark.parametrize("fault", [
    {"reset_after": {"concave.zip": 200_000}},
    {"truncate_after": {"concave.zip": 300_000}},
])
def test_a_body_cut_short_is_resumed_by_range(tmp_path, release, fault):
    with serve(release, Faults(**fault)) as server:
        report = guideloom.download(tmp_path / "out", files=["concave.zip"], server=server.url,
                                    show_progress=False, retries=2)
        log = server.access_log()
    assert report.downloaded == ["h5/concave.zip"]
    cut = next(iter(next(iter(fault.values())).values()))
    assert [e.range is None for e in log] == [True, False]
    resumed_at = int(log[1].range.removeprefix("bytes=").removesuffix("-"))
    assert 0 < resumed_at <= cut  # what arrived before the cut was kept (a RST may drop some)
    assert log[1].status == 206
    assert_identical(tmp_path / "out", release, ["concave.zip"])


def test_a_wrong_content_range_restarts_from_byte_zero(tmp_path, release):
    with serve(release, Faults(reset_after={"concave.zip": 100_000},
                               bad_content_range=True)) as server:
        guideloom.download(tmp_path / "out", files=["concave.zip"], server=server.url,
                           show_progress=False, retries=3)
        log = server.access_log()
    assert [e.range is None for e in log] == [True, False, True]
    assert [e.status for e in log] == [200, 206, 200]
    assert_identical(tmp_path / "out", release, ["concave.zip"])


def test_a_server_that_ignores_range_sends_the_whole_file_again(tmp_path, release):
    data = served(release, "concave.zip").data
    part = tmp_path / "out" / "h5" / "concave.zip.part"
    part.parent.mkdir(parents=True)
    part.write_bytes(data[:50_000])
    with serve(release, Faults(ignore_range=True)) as server:
        report = guideloom.download(tmp_path / "out", files=["concave.zip"],
                                    server=server.url, show_progress=False)
        log = server.access_log()
    assert [(e.range, e.status) for e in log] == [("bytes=50000-", 200)]
    assert report.bytes_fetched == len(data)
    assert_identical(tmp_path / "out", release, ["concave.zip"])


def test_a_stalled_answer_times_out_and_is_retried(tmp_path, release):
    with serve(release, Faults(stall=2.0, stall_requests=1)) as server:
        guideloom.download(tmp_path / "out", files=["process_parameters.csv"],
                           server=server.url, show_progress=False, timeout=0.5)
        assert len(server.access_log()) == 2
    assert_identical(tmp_path / "out", release, ["process_parameters.csv"])


def test_a_server_that_never_answers_gives_a_clear_error_in_bounded_time(tmp_path, release):
    with serve(release, Faults(stall=1.5)) as server:
        t0 = time.monotonic()
        done = cli(tmp_path, "download", "--yes", "--files", "process_parameters.csv",
                   "--timeout", "0.3", "--retries", "2", "--server", server.url)
        seconds = time.monotonic() - t0
    assert done.returncode == 1
    line = done.stderr.strip().splitlines()[-1]
    assert "process_parameters.csv" in line
    assert f"{server.url}/api/access/datafile/12" in line
    assert "failed after 3 attempts" in line
    assert "timed out" in line
    assert seconds < 30
    assert not (tmp_path / "data" / "process_parameters.csv").exists()


def test_extract_and_remove_zip_leave_loose_files(tmp_path, release):
    with serve(release) as server:
        done = cli(tmp_path, "download", "--small", "--yes", "--extract", "--remove-zip",
                   "--server", server.url)
    assert done.returncode == 0, done.stderr
    import zipfile

    with zipfile.ZipFile(io.BytesIO(served(release, "sample.zip").data)) as zf:
        members = {i.filename: zf.read(i) for i in zf.infolist()}
    h5 = tmp_path / "data" / "h5"
    assert sorted(p.name for p in h5.iterdir()) == sorted(members)
    for name, data in members.items():
        assert (h5 / name).read_bytes() == data
    assert "extracted 2 experiments" in done.stdout


def test_usage_errors(tmp_path, release):
    with serve(release) as server:
        unknown = cli(tmp_path, "download", "--yes", "--files", "nope.zip", "--server",
                      server.url)
        lonely = cli(tmp_path, "download", "--yes", "--remove-zip", "--server", server.url)
        asked = cli(tmp_path, "download", "--small", "--server", server.url)  # stdin closed
        fetched = len(server.access_log())
    assert unknown.returncode == 2
    assert "nope.zip" in unknown.stderr
    assert "h5/concave.zip" in unknown.stderr  # says what there is
    assert lonely.returncode == 2
    assert "--extract" in lonely.stderr
    # stdin is not a terminal and no --yes: nobody can answer, so it fails (issue 41)
    assert asked.returncode == 1, asked
    assert asked.stderr.splitlines() == ["guideloom: cannot ask for confirmation (stdin is not a "
                                         "terminal); pass --yes: nothing was downloaded"]
    assert fetched == 0
    assert not (tmp_path / "data" / "metadata.json").exists()


def answer_on_a_terminal(cwd: Path, answer: bytes, *args: str) -> tuple[int, str, str]:
    """Run ``guideloom download ARGS`` with a real pseudo-terminal as stdin, type ``answer``
    once it asks, and return its exit code, stdout and stderr."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "guideloom", "download", *args], cwd=cwd,
                                env={**os.environ, "PYTHONPATH": str(ROOT)}, stdin=follower,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        os.close(follower)
        os.write(leader, answer)  # the terminal buffers the line until input() reads it
        out, err = proc.communicate(timeout=120)
    finally:
        os.close(leader)
    return proc.returncode, out.decode(), err.decode()


@pytest.mark.parametrize("answer", [b"n\n", b"\n", b"whatever\n"])
def test_a_declined_download_exits_non_zero_and_says_nothing_was_downloaded(tmp_path, release,
                                                                             answer):
    with serve(release) as server:
        code, out, err = answer_on_a_terminal(tmp_path, answer, "--small", "--server", server.url)
        fetched = len(server.access_log())
    assert "? [y/N] " in out  # it did ask, on the terminal
    assert code == 1, err
    assert err.splitlines() == ["guideloom: download declined: nothing was downloaded"]
    assert fetched == 0
    assert not (tmp_path / "data" / "metadata.json").exists()


def test_a_download_confirmed_on_a_terminal_fetches_and_exits_0(tmp_path, release):
    with serve(release) as server:
        code, out, err = answer_on_a_terminal(tmp_path, b"y\n", "--small", "--server", server.url)
    assert code == 0, err
    assert "? [y/N] " in out
    assert "downloaded " in out
    assert (tmp_path / "data" / "metadata.json").is_file()


def test_a_draft_needs_the_token_and_the_error_says_how_to_pass_it(tmp_path, release):
    with serve(release, Faults(require_token=TOKEN)) as server:
        refused = cli(tmp_path, "info", "--server", server.url)
        server.faults.api_busy = 2  # and the metadata API is busy twice: retried
        shown = cli(tmp_path, "--token", TOKEN, "info", "--server", server.url)
        statuses = [e.status for e in server.log]
    assert refused.returncode == 1
    assert "401" in refused.stderr
    assert "--token" in refused.stderr
    assert shown.returncode == 0, shown.stderr
    assert statuses == [401, 503, 503, 200]
    assert "2.0" in shown.stdout
    assert "+sample.zip" in shown.stdout
    assert TOKEN not in shown.stdout + shown.stderr


def test_a_file_name_that_leaves_the_output_directory_is_refused(tmp_path, release):
    hostile = Release([*release.files, ServedFile(99, "evil.txt", "../../outside", b"x")])
    with serve(hostile) as server:
        with pytest.raises(DownloadError, match=r"'\.\./\.\./outside'"):
            guideloom.download(tmp_path / "out", server=server.url, show_progress=False)
        assert server.access_log() == []
    assert not (tmp_path / "outside").exists()


def test_a_local_file_changed_after_download_is_fetched_again(tmp_path, release):
    with serve(release) as server:
        guideloom.download(tmp_path / "out", small=True, server=server.url,
                           show_progress=False)
        sample = tmp_path / "out" / "h5" / "sample.zip"
        data = bytearray(sample.read_bytes())
        data[100] ^= 0xFF  # same size, other bytes: the record's mtime no longer matches
        sample.write_bytes(bytes(data))
        before = len(server.access_log())
        report = guideloom.download(tmp_path / "out", small=True, server=server.url,
                                    show_progress=False)
        fetched = [e.path for e in server.access_log()[before:]]
    assert fetched == ["/api/access/datafile/23?format=original"]
    assert report.downloaded == ["h5/sample.zip"]
    assert sorted(report.present) == ["metadata.json", "process_parameters.csv"]
    assert sample.read_bytes() == served(release, "sample.zip").data


def test_two_downloads_into_one_directory_do_not_mix(tmp_path, release):
    part = tmp_path / "data" / "h5" / "concave.zip.part"
    hold = threading.Event()  # the first command's body waits until the second has answered
    with serve(release, Faults(hold=hold)) as server:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        first = subprocess.Popen(
            [sys.executable, "-m", "guideloom", "download", "--quiet", "--files",
             "concave.zip", "--server", server.url],
            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            while not (part.exists() and part.stat().st_size > 0):
                assert first.poll() is None, first.communicate()
                assert time.monotonic() < deadline, "the .part file did not grow"
                time.sleep(0.005)
            second = cli(tmp_path, "download", "--quiet", "--files", "concave.zip",
                         "--server", server.url)
            hold.set()
            _out, err = first.communicate(timeout=60)
        finally:
            hold.set()
            if first.poll() is None:
                first.kill()
                first.communicate()
    assert second.returncode == 1
    assert "another guideloom download is writing into data" in second.stderr
    assert first.returncode == 0, err
    assert (tmp_path / "data" / "h5" / "concave.zip").read_bytes() == served(
        release, "concave.zip").data


def test_a_planted_symlink_part_file_is_not_followed(tmp_path, release):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(b"keep me")
    h5 = tmp_path / "out" / "h5"
    h5.mkdir(parents=True)
    (h5 / "sample.zip.part").symlink_to(victim)
    with serve(release) as server:
        with pytest.raises(UnsafeFileError, match=r"sample.zip.part is a symbolic link"):
            guideloom.download(tmp_path / "out", files=["sample.zip"], server=server.url,
                               show_progress=False)
    assert victim.read_bytes() == b"keep me"
    assert not (h5 / "sample.zip").exists()


def test_a_server_listing_sha1_checksums_is_verified_by_sha1(tmp_path, release):
    sha1 = Release(release.files, checksum_type="SHA-1")
    with serve(sha1) as server:
        report = guideloom.download(tmp_path / "ok", small=True, server=server.url,
                                    show_progress=False)
        assert len(report.downloaded) == 3
        server.faults.damaged = {"sample.zip"}
        with pytest.raises(DownloadError, match=r"h5/sample.zip: .* SHA-1 [0-9a-f]{40}, the "
                                                r"repository lists"):
            guideloom.download(tmp_path / "bad", small=True, server=server.url,
                               show_progress=False)
    assert_identical(tmp_path / "ok", release, ["sample.zip", "metadata.json",
                                                "process_parameters.csv"])
    assert not (tmp_path / "bad" / "h5" / "sample.zip").exists()


def test_the_version_is_positional_or_an_option(tmp_path, release):
    with serve(release) as server:
        older = cli(tmp_path, "download", "1.0", "--yes", "--files", "process_parameters.csv",
                    "--out", "v1", "--server", server.url)
        option = cli(tmp_path, "download", "--version", "1.0", "--small", "--yes",
                     "--server", server.url)
        paths = [e.path for e in server.log if "/versions/" in e.path]
    assert older.returncode == 0, older.stderr
    assert "(version 1.0)" in older.stdout
    assert (tmp_path / "v1" / "process_parameters.csv").is_file()
    assert option.returncode == 2  # version 1.0 has no sample.zip, and the error says so
    assert "not in this version of the dataset: sample.zip" in option.stderr
    assert all("/versions/1.0?" in p for p in paths), paths


def test_a_complete_part_file_is_verified_and_a_longer_one_is_dropped(tmp_path, release):
    """A .part as long as the listed file (killed before the rename) is checked, not fetched;
    one longer than the listed file (the file changed on the server) starts again at 0."""
    small = served(release, "sample.zip")
    part = tmp_path / "out" / "h5" / "sample.zip.part"
    part.parent.mkdir(parents=True)
    part.write_bytes(small.data[:1000])
    grown = ServedFile(small.id, small.name, small.directory, small.data[:1000])
    changed = Release([*(f for f in release.files if f.name != "sample.zip"), grown])
    with serve(changed) as server:
        guideloom.download(tmp_path / "out", files=["sample.zip"], server=server.url,
                           show_progress=False)
        assert [(e.range, e.status) for e in server.access_log()] == []  # complete: verified
    assert (tmp_path / "out" / "h5" / "sample.zip").read_bytes() == small.data[:1000]
    part.write_bytes(small.data[:5000])
    (tmp_path / "out" / "h5" / "sample.zip").unlink()
    with serve(changed) as server:
        guideloom.download(tmp_path / "out", files=["sample.zip"], server=server.url,
                           show_progress=False)
        log = [(e.range, e.status) for e in server.access_log()]
    assert log == [(None, 200)]  # a .part longer than the file is dropped, not resumed
    assert (tmp_path / "out" / "h5" / "sample.zip").read_bytes() == small.data[:1000]
