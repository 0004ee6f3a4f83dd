"""An update carries a row only on proof that its input's bytes are unchanged (issue 38, item
3): each forgery of the cheap evidence is caught, the result equals a fresh full export, and
``--dry-run`` says per experiment why it would be read.

Forgeries, each made for real: a loose ``.h5`` rewritten with the same size and its mtime put
back (``os.utime``, ``touch -r``, ``cp -p``, ``rsync -t``); a zip member replaced by other bytes
of the same size and the same CRC-32 (4 compensating bytes computed in the slack of a chunk
the rewrite shrank, :func:`tests.zip_helpers.forge_crc`); the same on a remote release behind
the test Dataverse server (its MD5 changes). Also: git's "racy" rule, the migration of a
version-1 ``provenance.json`` and ``verify_inputs=True``.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest

import guideloom
from guideloom import config
from guideloom.errors import InjectedFault
from guideloom.read.fingerprint import input_evidence, trusted
from guideloom.read.locations import Location
from guideloom.runtime.faults import crash_at
from tests.export_helpers import COUNT_FILE_ENV, COUNTED_CODE_VERSION, counted_first_rows
from tests.zip_helpers import forge_crc, member_bytes, rebuild_archive

REPO = Path(__file__).resolve().parents[1]
VIEW = "force-curve"


@pytest.fixture
def data(small_loose, tmp_path) -> Path:
    """A private copy of the session's small loose dataset."""
    target = tmp_path / "data"
    shutil.copytree(small_loose, target)
    return target


@pytest.fixture
def decoded(tmp_path, monkeypatch):
    """The ids the transform saw since the last call of the returned function."""
    log = tmp_path / "decoded.txt"
    monkeypatch.setenv(COUNT_FILE_ENV, str(log))

    def take() -> list[int]:
        seen = sorted(int(x) for x in log.read_text().split()) if log.exists() else []
        log.unlink(missing_ok=True)
        return seen
    return take


@pytest.fixture
def no_racy_margin():
    """Trust unchanged evidence of any file changed before the export started (the tests'
    files are seconds old: with the default 2 s margin every one would be re-hashed)."""
    with config.set(input_racy_s=0.0):
        yield


def export(data, target: Path, ids, **kw):
    return guideloom.export.export(
        VIEW, target, kind="npy", data_dir=data, sim_ids=list(ids), sim_ids_order="sim_ids",
        record_transform=counted_first_rows, code_version=COUNTED_CODE_VERSION, client="sync",
        partition_size=4, **kw)


def same_export(ours: Path, full: Path) -> None:
    """Rows, arrays, checksums and the provenance's digests equal a fresh full export's."""
    a, b = guideloom.load_export(ours), guideloom.load_export(full)
    assert a.sim_ids.tolist() == b.sim_ids.tolist()
    for i in range(len(b)):
        assert np.array_equal(a[i]["force"], b[i]["force"])
    assert (ours / "checksums.json").read_bytes() == (full / "checksums.json").read_bytes()
    digests = [[r["blake3"] for r in json.loads((p / "provenance.json").read_text())["inputs"]]
               for p in (ours, full)]
    assert digests[0] == digests[1]
    a.verify()


def zeroed_force(blob: bytes) -> tuple[bytes, int]:
    """The HDF5 file ``blob`` with its force table set to zeros, rewritten in place by h5py
    (the shrunken chunks stay within the old allocations: same size), and the offset of 4
    bytes that no chunk uses any more (slack of an old chunk's allocation)."""
    def extents(buf: io.BytesIO) -> list[tuple[int, int]]:
        with h5py.File(buf, "r") as f:
            ds = f["force/data"]
            infos = [ds.id.get_chunk_info(k) for k in range(ds.id.get_num_chunks())]
        return [(i.byte_offset, i.byte_offset + i.size) for i in infos]

    buf = io.BytesIO(blob)
    old = extents(buf)
    with h5py.File(buf, "r+") as f:
        f["force/data"][...] = 0
    new = extents(buf)
    out = buf.getvalue()
    assert len(out) == len(blob)
    assert out != blob
    for start, end in old:
        for pos in range(start, end - 3):
            if all(pos + 4 <= a or pos >= b for a, b in new):
                return out, pos
    raise AssertionError("no slack left by the rewrite")


# --- loose files: size and mtime restored -------------------------------------------------
def _forge_loose(path: Path, how: str, tmp_path: Path) -> None:
    """Replace ``path``'s bytes by others of the same size, its mtime put back by ``how``."""
    before = path.stat()
    forged, _ = zeroed_force(path.read_bytes())
    scratch = tmp_path / "forged.h5"
    scratch.write_bytes(forged)
    os.utime(scratch, ns=(before.st_atime_ns, before.st_mtime_ns))
    if how == "plain":  # same size only: mtime moves
        path.write_bytes(forged)
    elif how == "os.utime":
        with open(path, "r+b") as fh:
            fh.write(forged)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    elif how == "touch -r":
        reference = tmp_path / "reference.h5"
        shutil.copy2(path, reference)
        path.write_bytes(forged)
        subprocess.run(["touch", "-r", str(reference), str(path)], check=True)
    elif how == "cp -p":
        subprocess.run(["cp", "-p", str(scratch), str(path)], check=True)
    elif how == "rsync -t":
        # -I: copy although size and mtime match (rsync's own quick check would skip it)
        subprocess.run(["rsync", "-t", "-I", str(scratch), str(path)], check=True)
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns) \
        or how == "plain"
    assert path.read_bytes() == forged


@pytest.mark.parametrize("how", ["plain", "os.utime", "touch -r", "cp -p", "rsync -t"])
def test_a_loose_file_rewritten_with_its_size_and_mtime_is_read_again(
        how, data, tmp_path, decoded, no_racy_margin):
    if how == "rsync -t" and shutil.which("rsync") is None:
        pytest.skip("rsync is not installed")
    out, full = tmp_path / "out", tmp_path / "full"
    export(data, out, range(10))
    decoded()
    _forge_loose(data / "h5" / "0004.h5", how, tmp_path)
    result = export(data, out, range(10), update=True)
    assert decoded() == [4]
    assert result.update == {"added": 0, "removed": 0, "changed": 1, "carried": 9}
    why = result.update_plan.changed[4]
    assert "ctime changed" in why, why
    assert why.endswith("blake3 differs)"), why
    assert not result.update_plan.rehashed  # the others' evidence is unchanged and old
    assert np.all(guideloom.load_export(out)[4]["force"] == 0)
    export(data, full, range(10))
    same_export(out, full)


# --- zip members: same size and CRC-32 ----------------------------------------------------
def test_a_zip_member_with_the_same_size_and_crc_is_read_again(demo_copy, tmp_path, decoded,
                                                                no_racy_margin):
    out, full = tmp_path / "out", tmp_path / "full"
    ids = range(0, 12)
    export(demo_copy, out, ids)
    decoded()
    archive = next(p for p in demo_copy.glob("*.zip") if "0004.h5" in zipfile.ZipFile(p).namelist())
    with zipfile.ZipFile(archive) as zf:
        before = {i.filename: (i.header_offset, i.compress_size, i.CRC) for i in zf.infolist()}
    original = member_bytes(archive, "0004.h5")
    zeroed, slack = zeroed_force(original)
    forged = forge_crc(zeroed, slack, before["0004.h5"][2])
    rebuild_archive(archive, {"0004.h5": forged})
    with zipfile.ZipFile(archive) as zf:  # the central directory says nothing changed
        assert {i.filename: (i.header_offset, i.compress_size, i.CRC)
                for i in zf.infolist()} == before
    assert member_bytes(archive, "0004.h5") == forged != original
    result = export(demo_copy, out, ids, update=True)
    assert decoded() == [4]
    plan = result.update_plan
    assert plan.changed[4].endswith("blake3 differs)")
    in_archive = {int(m[:4]) for m in before} & set(ids)
    assert set(plan.rehashed) == in_archive - {4}  # its other members: hashed, unchanged
    assert all(why.startswith("re-hashed: unchanged; ") for why in plan.rehashed.values())
    export(demo_copy, full, ids)
    same_export(out, full)


# --- the racy rule -------------------------------------------------------------------------
def test_unchanged_evidence_of_a_file_changed_after_the_start_is_not_trusted(tmp_path):
    path = tmp_path / "x.h5"
    before = time.time_ns()
    path.write_bytes(b"x" * 100)
    evidence = input_evidence([Location(1, str(path))])[0]
    assert evidence["ctime_ns"] == path.stat().st_ctime_ns
    margin = int(float(config.get("input_racy_s")) * 1e9)
    assert not trusted(evidence, before)  # changed after the recorded start
    changed = max(evidence["mtime_ns"], evidence["ctime_ns"])
    assert not trusted(evidence, changed + margin)  # within the margin of the start
    assert trusted(evidence, changed + margin + 1)


def test_a_file_stamped_after_the_export_started_is_re_hashed(data, tmp_path, decoded,
                                                              no_racy_margin):
    """Evidence equal, but the file's mtime is not older than the export's start: hashed."""
    out = tmp_path / "out"
    path = data / "h5" / "0003.h5"
    future = time.time_ns() + 3600 * 10**9
    os.utime(path, ns=(future, future))
    export(data, out, range(6))
    decoded()
    result = export(data, out, range(6), update=True)
    assert result.up_to_date
    assert decoded() == []
    assert result.update_plan.rehashed == {3: "re-hashed: unchanged; changed too close to the "
                                              "export's start"}


# --- migration -------------------------------------------------------------------------------
def _as_version_1(out: Path) -> None:
    """Rewrite the export's provenance as guideloom before issue 38 wrote it."""
    path = out / "provenance.json"
    doc = json.loads(path.read_text())
    old = {"version": 1, "data": "".join(hashlib.sha256(json.dumps(e).encode()).hexdigest()[:16]
                                         for e in doc["inputs"]),
           "row": doc["row"]}
    path.write_text(json.dumps(old))
    manifest = json.loads((out / "export.json").read_text())
    assert manifest["provenance"].pop("started_ns") > 0  # (version 1 recorded no start)
    manifest["provenance"]["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    (out / "export.json").write_text(json.dumps(manifest))


def test_an_export_without_digests_is_updated_by_reading_every_experiment(data, tmp_path,
                                                                           decoded):
    out, full = tmp_path / "out", tmp_path / "full"
    export(data, out, range(8))
    _as_version_1(out)
    decoded()
    result = export(data, out, range(10), update=True)
    assert decoded() == list(range(10))
    assert result.update == {"added": 2, "removed": 0, "changed": 8, "carried": 0}
    assert set(result.update_plan.changed.values()) == {
        "recorded no input digest (older guideloom)"}
    assert json.loads((out / "provenance.json").read_text())["version"] == 2
    export(data, full, range(10))
    same_export(out, full)
    assert export(data, out, range(10), update=True).up_to_date  # later ones are updates


def test_a_resumed_partition_without_digests_has_its_inputs_hashed_at_finalize(data, tmp_path,
                                                                             decoded):
    """Markers written by a guideloom before digests (no ``input_digests``): the rerun resumes
    them and hashes their inputs when it records the provenance."""
    out, full = tmp_path / "out", tmp_path / "full"
    with pytest.raises(InjectedFault), crash_at("partitions-done"):
        export(data, out, range(8))
    markers = sorted((tmp_path / ".out.guideloom-staging" / "parts").glob("*.json"))
    assert len(markers) == 2
    for marker in markers:
        summary = json.loads(marker.read_text())
        del summary["input_digests"]
        marker.write_text(json.dumps(summary))
    decoded()
    result = export(data, out, range(8))
    assert result.resumed_partitions == 2
    assert decoded() == []
    export(data, full, range(8))
    same_export(out, full)


REWRITE: dict[int, Path] = {}  # sim_id -> the input the transform below rewrites


def rewriting_first_rows(rec):
    """``first_rows``, rewriting its experiment's input file (same size, other bytes) when it
    is listed in ``REWRITE``: the input changes between the decode and the end of its read."""
    from tests.export_helpers import first_rows

    path = REWRITE.get(int(rec["_sim_id"]))
    if path is not None:
        forged, _ = zeroed_force(path.read_bytes())
        with open(path, "r+b") as fh:
            fh.write(forged)
    return first_rows(rec)


def test_an_input_changed_while_the_export_reads_it_fails_naming_it(data, tmp_path,
                                                                     monkeypatch):
    monkeypatch.setitem(REWRITE, 3, data / "h5" / "0003.h5")
    with pytest.raises(guideloom.ExperimentReadError,
                       match=r"experiment 3: .*0003\.h5 changed while the export read it"):
        guideloom.export.export(VIEW, tmp_path / "out", kind="npy", data_dir=data,
                                sim_ids=range(6), record_transform=rewriting_first_rows,
                                client="sync", partition_size=4)
    assert not (tmp_path / "out").exists()


# --- verify_inputs ---------------------------------------------------------------------------
def test_verify_inputs_re_hashes_every_carried_input(data, tmp_path, decoded, no_racy_margin,
                                                     caplog):
    out, full = tmp_path / "out", tmp_path / "full"
    export(data, out, range(10))
    decoded()
    plain = export(data, out, range(10), update=True)
    assert plain.up_to_date
    assert not plain.update_plan.rehashed
    _forge_loose(data / "h5" / "0006.h5", "plain", tmp_path)
    with caplog.at_level("INFO", logger="guideloom.export.update"):
        result = export(data, out, range(10), update=True, verify_inputs=True)
    assert decoded() == [6]
    plan = result.update_plan
    assert set(plan.rehashed) == set(range(10)) - {6}  # every carried input, hashed
    assert set(plan.rehashed.values()) == {"re-hashed: unchanged; verify_inputs"}
    sizes = sum((data / "h5" / f"{i:04d}.h5").stat().st_size for i in range(10))
    assert plan.hashed_bytes == sizes  # and the changed one (hashed, found different)
    assert "re-hashed 10 inputs" in caplog.text
    assert "9 unchanged, 1 changed" in caplog.text
    export(data, full, range(10))
    same_export(out, full)


# --- a remote release: its MD5 changed -------------------------------------------------------
def test_a_member_forged_in_a_served_release_is_read_again(tmp_path, monkeypatch, decoded):
    from tests.dataverse_server import DOI, make_release, serve

    monkeypatch.setenv("GUIDELOOM_CACHE_DIR", str(tmp_path / "cache"))
    out, full = tmp_path / "out", tmp_path / "full"
    release = make_release(tmp_path / "v1", n=8)
    with serve(release) as server:
        monkeypatch.setenv("GUIDELOOM_DATAVERSE_URL", server.url)
        export(DOI, out, range(8))
    decoded()
    concave = next(f for f in release.files if f.name == "concave.zip")
    with zipfile.ZipFile(io.BytesIO(concave.data)) as zf:
        members = {int(i.filename[:4]): i for i in zf.infolist()}
        victim = max(members)  # (sample.zip holds concave.zip's first two members too)
        original = zf.read(members[victim])
    zeroed, slack = zeroed_force(original)
    local = tmp_path / "concave.zip"
    local.write_bytes(concave.data)
    rebuild_archive(local, {members[victim].filename:
                            forge_crc(zeroed, slack, members[victim].CRC)})
    old_md5 = concave.md5
    concave.data = local.read_bytes()
    assert concave.md5 != old_md5
    assert len(concave.data) == len(local.read_bytes())
    with serve(release) as server:
        monkeypatch.setenv("GUIDELOOM_DATAVERSE_URL", server.url)
        result = export(DOI, out, range(8), update=True)
    assert decoded() == [victim]
    plan = result.update_plan
    assert "server checksum (MD5/ETag) changed" in plan.changed[victim]
    assert plan.changed[victim].endswith("blake3 differs)")
    assert victim - 1 in plan.rehashed
    assert set(plan.rehashed) <= set(members) - {victim}
    assert all(why.startswith("re-hashed: unchanged; server checksum (MD5/ETag) changed")
               for why in plan.rehashed.values())  # convex.zip's members: its MD5 unchanged
    extracted = tmp_path / "v2"
    shutil.copytree(tmp_path / "v1" / "release", extracted)
    (extracted / "concave.zip").write_bytes(concave.data)
    export(extracted, full, range(8))
    same_export(out, full)


# --- --dry-run: per experiment, why ---------------------------------------------------------
WORKFLOW = """
name = "inputs-test"
paths_relative_to = "cwd"
[dataset]
data_dir = "{data}"
[view]
name = "force-curve"
[filter]
sim_ids = {ids}
[transforms]
record = "tests.export_helpers:first_rows"
[output]
kind = "npy"
path = "out"
"""


def test_the_dry_run_lists_why_each_experiment_would_be_read(data, tmp_path):
    (tmp_path / "job.toml").write_text(WORKFLOW.format(data=data, ids=list(range(8))))
    env = {**os.environ, "PYTHONPATH": str(REPO), "GUIDELOOM_INPUT_RACY_S": "0"}
    env.pop(COUNT_FILE_ENV, None)

    def run(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "guideloom", "run", "job.toml", *extra],
                              cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=300)

    assert run().returncode == 0
    recorded = (tmp_path / "out" / "provenance.json").read_bytes()
    (tmp_path / "job.toml").write_text(WORKFLOW.format(data=data, ids=[*range(1, 8), 9]))
    _forge_loose(data / "h5" / "0004.h5", "os.utime", tmp_path)
    h5 = data / "h5" / "0002.h5"
    os.chmod(h5, 0o600)  # its ctime moves, its bytes stay
    dry = run("--update", "--dry-run", "--all")
    assert dry.returncode == 0, dry.stderr
    lines = [line.strip() for line in dry.stdout.splitlines()
             if re.match(r"  [0-9]+: ", line)]
    assert "1 added, 1 removed, 1 changed, 6 carried" in dry.stdout
    assert lines[:3] == ["4: input bytes changed (ctime changed; blake3 differs)",
                         "9: added", "0: removed"]
    assert "2: carried (re-hashed: unchanged; ctime changed)" in lines
    assert "3: carried (evidence unchanged)" in lines
    assert len(lines) == 9
    assert (tmp_path / "out" / "provenance.json").read_bytes() == recorded  # nothing written
    shown = run("--update", "--dry-run")  # bounded without --all: all 9 fit in 20
    assert shown.stdout.count("carried (evidence unchanged)") == 5
