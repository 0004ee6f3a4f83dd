"""``Export.verify()`` and ``guideloom verify``: one flipped byte in the middle of a data row
(which the open-time checks cannot see) is found and named, file and row; intact, resumed and
compacted exports verify; exports without checksums say so instead of passing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import zarr
from guideloom.workflows.demo_transforms import total_force_stream

import guideloom
from guideloom.errors import CorruptExportError, UnverifiableExportError
from guideloom.export import export
from guideloom.formats.checksums import CHECKSUMS_FILE, SWITCH_ENV
from guideloom.formats.npy import npy_data_offset
from guideloom.runtime.faults import FAULT_ENV
from guideloom.storage.shards import shard_name
from tests import export_helpers as helpers

ROOT = Path(__file__).resolve().parents[1]
KINDS = ("npy", "npz", "zarr", "storage")
STREAM = np.dtype([("force", "<f4"), ("doc", "<u4")])
TARGETS = {"npy": "npy", "npz": "npz", "zarr": "z.zarr", "storage": "st"}


def run_export(kind: str, data: Path, target: Path, ids: list[int], *, failing: bool = False,
               **extra):
    """Export with the test transforms (sync client, partitions of 2)."""
    opts = dict(data_dir=data, sim_ids=ids, client="sync", partition_size=2, **extra)
    if kind == "storage":
        transform = (helpers.stream_failing_on_multiples_of_7 if failing
                     else total_force_stream)
        storage = guideloom.StreamStorage(target, guideloom.StreamNumpyFormat(STREAM))
        return export("force-curve", target, kind="storage", format_options={"storage": storage},
                      record_transform=transform, **opts)
    transform = helpers.fail_on_multiples_of_7 if failing else helpers.first_rows
    return export("force-curve", target, kind=kind, record_transform=transform, **opts)


def cli_verify(path: Path) -> subprocess.CompletedProcess:
    """``guideloom verify PATH`` as a user runs it."""
    return subprocess.run([sys.executable, "-m", "guideloom", "verify", str(path)],
                          capture_output=True, text=True, timeout=120)


def flip(path: Path, offset: int) -> None:
    """Invert one byte of ``path`` in place (the file keeps its size)."""
    assert 0 <= offset < path.stat().st_size
    with open(path, "r+b") as fh:
        fh.seek(offset)
        byte = fh.read(1)
        fh.seek(offset)
        fh.write(bytes([byte[0] ^ 0xFF]))


def damage_row(kind: str, root: Path, row: int) -> str:
    """Flip a byte in the middle of row ``row``'s data; return the damaged file's name."""
    sim_ids = guideloom.load_export(root).sim_ids
    if kind == "npy":
        path = root / "force.npy"
        row_bytes = np.load(path, mmap_mode="r")[0].nbytes
        flip(path, npy_data_offset(str(path)) + row * row_bytes + row_bytes // 2)
        return "force.npy"
    if kind == "npz":
        name = f"{sim_ids[row]}.npz"
        flip(root / name, (root / name).stat().st_size // 2)
        return name
    if kind == "zarr":  # exported uncompressed: chunk files hold the rows' bytes as they are
        arr = zarr.open_group(str(root), mode="r")["force"]
        rpc, row_bytes = arr.chunks[0], arr[0].nbytes
        chunk = root / "force" / "c" / str(row // rpc) / "0" / "0"
        assert chunk.stat().st_size == rpc * row_bytes
        flip(chunk, (row % rpc) * row_bytes + row_bytes // 2)
        return "force"
    # storage: shard k holds partition k; its element data starts at byte 0
    offsets = np.load(root / "record_offsets.npy")
    shard, first = shard_of(root, row)
    element = offsets[row] - offsets[first] + (offsets[row + 1] - offsets[row]) // 2
    flip(root / shard_name(shard), int(element) * STREAM.itemsize)
    return shard_name(shard)


def shard_rows(root: Path) -> list[int]:
    """Rows of each shard, as the recorded checksums hold them."""
    group = json.loads((root / CHECKSUMS_FILE).read_text())["groups"]["shard-*.gls"]
    return group.get("rows") or [1] * (len(group["digests"]) // 16)


def shard_of(root: Path, row: int) -> tuple[int, int]:
    """``(shard, its first row)`` of published row ``row``."""
    first = 0
    for shard, n in enumerate(shard_rows(root)):
        if row < first + n:
            return shard, first
        first += n
    raise AssertionError(f"row {row} is in no shard")


def where_pattern(kind: str, root: Path, row: int, sim_id: int) -> str:
    """How verify names a damaged row: the row, or for storage the rows of its shard."""
    if kind == "storage":
        shard, first = shard_of(root, row)
        n = shard_rows(root)[shard]
        if n > 1:
            return rf"rows {first}-{first + n - 1} \(sim ids [\d, ]*\b{sim_id}\b"
    return rf"row {row} \(sim id {sim_id}\)"


@pytest.fixture(scope="module")
def exports(demo_zip, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("verify")
    for kind in KINDS:
        extra = {"format_options": {"compressor": None}} if kind == "zarr" else {}
        run_export(kind, demo_zip, root / TARGETS[kind], [0, 2, 4, 6, 8, 10, 12], **extra)
    return {kind: root / TARGETS[kind] for kind in KINDS}


@pytest.fixture
def copy_of(exports, tmp_path):
    def make(kind: str) -> Path:
        target = tmp_path / exports[kind].name
        subprocess.run(["cp", "-a", str(exports[kind]), str(target)], check=True)
        return target
    return make


@pytest.mark.fast_case("npy", "npz")
@pytest.mark.parametrize("kind", KINDS)
def test_an_intact_export_verifies(kind, exports):
    export_ = guideloom.load_export(exports[kind])
    report = export_.verify()
    assert report.rows == len(export_) == 7
    assert report.bytes > 0
    assert report.files >= 1
    assert report.seconds >= 0
    assert export_.manifest["checksums"]["algorithm"] == "xxh3_64"
    out = cli_verify(exports[kind])
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"{exports[kind]}: intact: 7 rows")


@pytest.mark.fast_case("6-storage")
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("row", [0, 3, 6])
def test_one_flipped_byte_in_a_row_is_named_by_file_and_row(kind, row, copy_of):
    root = copy_of(kind)
    sim_id = int(guideloom.load_export(root).sim_ids[row])
    name = damage_row(kind, root, row)
    export_ = guideloom.load_export(root)  # the open-time checks cannot see it
    where = where_pattern(kind, root, row, sim_id)
    pattern = rf"{re.escape(str(root))}/{re.escape(name)}: {where}.*does not match the checksum"
    with pytest.raises(CorruptExportError, match=pattern):
        export_.verify()
    out = cli_verify(root)
    assert out.returncode == 1
    assert re.search(pattern, out.stderr), out.stderr
    assert out.stdout == ""


def test_a_damaged_lz4_zarr_chunk_is_named(demo_zip, tmp_path):
    root = tmp_path / "z.zarr"
    run_export("zarr", demo_zip, root, [0, 2, 4, 6])  # default compressor: lz4
    chunk = root / "force" / "c" / "1" / "0" / "0"  # rows 2-3
    flip(chunk, chunk.stat().st_size // 2)
    export_ = guideloom.load_export(root)
    with pytest.raises(CorruptExportError, match=r"z\.zarr/force: rows? [23]\b"):
        export_.verify()


def test_a_damaged_record_offsets_file_is_named(copy_of):
    root = copy_of("storage")
    offsets = np.load(root / "record_offsets.npy")
    offsets[3] += 1  # same length: the open-time check passes
    np.save(root / "record_offsets.npy", offsets)
    export_ = guideloom.load_export(root)
    with pytest.raises(CorruptExportError, match=r"record_offsets\.npy: the file"):
        export_.verify()


def test_edited_checksums_are_refused(copy_of):
    root = copy_of("npy")
    doc = json.loads((root / CHECKSUMS_FILE).read_text())
    digests = doc["groups"]["force.npy"]["digests"]  # 16 hex digits per row, concatenated
    doc["groups"]["force.npy"]["digests"] = digests[:32] + "0" * 16 + digests[48:]
    (root / CHECKSUMS_FILE).write_text(json.dumps(doc))
    with pytest.raises(CorruptExportError, match=r"checksums.json: does not match the sha256"):
        guideloom.load_export(root).verify()
    (root / CHECKSUMS_FILE).unlink()
    with pytest.raises(CorruptExportError, match=r"checksums.json: missing"):
        guideloom.load_export(root).verify()


def test_a_directory_replaced_since_opening_is_refused(exports, copy_of, tmp_path):
    root = copy_of("npy")
    opened = guideloom.load_export(root)
    subprocess.run(["rm", "-rf", str(root)], check=True)
    subprocess.run(["cp", "-a", str(exports["npz"]), str(root)], check=True)
    with pytest.raises(CorruptExportError, match="replaced by another export"):
        opened.verify()


@pytest.mark.parametrize("kind", KINDS)
def test_skipped_experiments_compacted_exports_verify(kind, demo_zip, tmp_path):
    root = tmp_path / "out"
    extra = {"format_options": {"compressor": None}} if kind == "zarr" else {}
    with pytest.warns(guideloom.export.SkippedDataWarning):
        run_export(kind, demo_zip, root, [5, 6, 7, 8, 9, 14, 15], failing=True,
                   on_error="skip", **extra)
    export_ = guideloom.load_export(root)
    assert export_.sim_ids.tolist() == [5, 6, 8, 9, 15]
    assert export_.verify().rows == 5
    name = damage_row(kind, root, 2)  # the first row after a skipped experiment: sim id 8
    pattern = rf"{re.escape(name)}: {where_pattern(kind, root, 2, 8)}"
    with pytest.raises(CorruptExportError, match=pattern):
        guideloom.load_export(root).verify()


def test_an_export_without_checksums_is_not_passed_silently(demo_zip, tmp_path, monkeypatch):
    monkeypatch.setenv(SWITCH_ENV, "0")
    root = tmp_path / "out"
    run_export("npy", demo_zip, root, [1, 2, 3])
    export_ = guideloom.load_export(root)  # opens: the open-time checks still hold
    assert "checksums" not in export_.manifest
    assert not (root / CHECKSUMS_FILE).exists()
    with pytest.raises(UnverifiableExportError, match="records no full-data checksums"):
        export_.verify()
    out = cli_verify(root)
    assert out.returncode == 1
    assert "records no full-data checksums" in out.stderr
    assert "open-time checks" in out.stderr


def test_verify_usage_errors_exit_2(tmp_path):
    (tmp_path / "plain").mkdir()
    for path in (tmp_path / "nothing", tmp_path / "plain"):
        out = cli_verify(path)
        assert out.returncode == 2, out.stderr
        assert out.stderr.startswith("guideloom: error:")
        assert str(path) in out.stderr


# --- resumed exports: digests of partitions finished before a kill survive --------------------
RUN = """
import sys
import numpy as np
import guideloom
from guideloom.export import export
from tests import export_helpers

kind, data, target = sys.argv[1], sys.argv[2], sys.argv[3]
opts = dict(data_dir=data, sim_ids=list(range(10)), client="sync", partition_size=2)
if kind == "storage":
    storage = guideloom.StreamStorage(target, guideloom.StreamNumpyFormat(
        np.dtype([("force", "<f4"), ("doc", "<u4")])))
    result = export("force-curve", target, kind="storage", format_options={"storage": storage},
                    record_transform=export_helpers.blocking_total_force_stream,
                    code_version=export_helpers.BLOCKING_CODE_VERSION, **opts)
else:
    result = export("force-curve", target, kind=kind,
                    record_transform=export_helpers.blocking_first_rows,
                    code_version=export_helpers.BLOCKING_CODE_VERSION, **opts)
print("resumed", result.resumed_partitions)
"""


def start(kind: str, data: Path, target: Path, env_extra: dict[str, str]) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **env_extra}
    for name in (FAULT_ENV, "GUIDELOOM_TEST_BLOCK_FROM"):
        if name not in env_extra:
            env.pop(name, None)
    return subprocess.Popen([sys.executable, "-c", RUN, kind, str(data), str(target)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_for_markers(staging: Path, n: int, proc: subprocess.Popen, deadline_s: float) -> None:
    """Poll until ``n`` partitions are marked finished (the run then blocks on the next)."""
    end = time.monotonic() + deadline_s
    while len(list((staging / "parts").glob("*.json"))) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, f"{n} partitions were not marked done in time"
        time.sleep(0.05)


@pytest.mark.fast_case("killed-mid-run-npy")
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("how", ["killed-mid-run", "killed-before-finalize"])
def test_a_resumed_export_verifies(kind, how, demo_zip, tmp_path):
    target = tmp_path / "out"
    if how == "killed-mid-run":  # partitions 0-2 finish, partition 3 blocks on id 6: SIGKILL
        proc = start(kind, demo_zip, target, {"GUIDELOOM_TEST_BLOCK_FROM": "6"})
        try:
            wait_for_markers(tmp_path / ".out.guideloom-staging", 3, proc, 120)
        finally:
            proc.kill()
            proc.communicate()
        resumed = 3
    else:  # every partition done and marked, the driver killed before finalize
        proc = start(kind, demo_zip, target, {FAULT_ENV: "partitions-done"})
        proc.communicate(timeout=120)
        assert proc.returncode == -9
        resumed = 5
    rerun = start(kind, demo_zip, target, {})
    out, err = rerun.communicate(timeout=120)
    assert rerun.returncode == 0, err
    assert f"resumed {resumed}" in out
    export_ = guideloom.load_export(target)
    assert export_.verify().rows == 10
    assert export_.manifest["checksums"]["groups"]
    assert cli_verify(target).returncode == 0
