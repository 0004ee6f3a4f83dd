"""Preprocess straight from a release on the test Dataverse server (a DOI): the same files as
from a local copy, and each modality fetches only what it reads (force alone fetches no point
cloud)."""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest

from guideloom.preprocess.job import preprocess
from tests.dataverse_server import DOI, Release, ServedFile, serve
from tests.preprocess_helpers import make_raw_dataset, tree_digest

N = 8


def _release(raw: Path) -> Release:
    return Release([
        ServedFile(11, "metadata.json", "", (raw / "metadata.json").read_bytes(), "manifest"),
        ServedFile(12, "process_parameters.csv", "",
                   (raw / "process_parameters.csv").read_bytes(), "index table"),
        ServedFile(21, "concave.zip", "h5", (raw / "concave.zip").read_bytes()),
        ServedFile(22, "convex.zip", "h5", (raw / "convex.zip").read_bytes()),
    ])


FILE_IDS = {"concave.zip": 21, "convex.zip": 22}


def _dataset_ranges(raw: Path, prefix: str) -> dict[int, list[tuple[int, int]]]:
    """Per served file id, the archive byte ranges ``[start, end)`` of every chunk of the
    datasets under ``prefix`` in every experiment."""
    out: dict[int, list[tuple[int, int]]] = {}
    for archive in raw.glob("*.zip"):
        ranges = out.setdefault(FILE_IDS[archive.name], [])
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                with open(archive, "rb") as fh:
                    fh.seek(info.header_offset + 26)
                    name_len, extra_len = struct.unpack("<HH", fh.read(4))
                base = info.header_offset + 30 + name_len + extra_len
                with zf.open(info) as fh, h5py.File(fh, "r") as f:
                    def add(_: str, node: object, ranges: list = ranges, base: int = base
                            ) -> None:
                        if isinstance(node, h5py.Dataset):
                            for k in range(node.id.get_num_chunks()):
                                chunk = node.id.get_chunk_info(k)
                                ranges.append((base + chunk.byte_offset,
                                               base + chunk.byte_offset + chunk.size))
                    if prefix in f:
                        f[prefix].visititems(add)
    return out


def _fetched_ranges(log: list, file_id: int) -> list[tuple[int, int]]:
    out = []
    for entry in log:
        if f"/api/access/datafile/{file_id}" in entry.path and entry.range:
            first, _, last = entry.range.removeprefix("bytes=").partition("-")
            out.append((int(first), int(last) + 1 if last else 1 << 62))
    return out


def _same_files(a: Path, b: Path) -> None:
    names = sorted(p.name for p in a.glob("*.h5"))
    assert names == sorted(p.name for p in b.glob("*.h5"))
    assert names
    for name in names:
        with h5py.File(a / name, "r") as x, h5py.File(b / name, "r") as y:
            assert sorted(x) == sorted(y)
            for group in x:
                assert np.array_equal(x[f"{group}/data"][()], y[f"{group}/data"][()],
                                      equal_nan=True)


@pytest.mark.parametrize("modality", ["force", "sheet", "oil"])
def test_each_modality_from_a_doi_fetches_only_its_groups(tmp_path, monkeypatch, modality):
    raw = make_raw_dataset(tmp_path / "raw", N, "zip", scan_shape=(100, 160))
    before = tree_digest(raw)
    preprocess([modality], data_dir=raw, out_dir=tmp_path / "local", client="sync", quiet=True)
    pointcloud = _dataset_ranges(raw, "pointcloud")
    assert sum(len(r) for r in pointcloud.values()) >= 4 * N  # there are point clouds to avoid
    with serve(_release(raw)) as server:
        monkeypatch.setenv("GUIDELOOM_DATAVERSE_URL", server.url)
        monkeypatch.setenv("GUIDELOOM_CACHE_DIR", str(tmp_path / "cache"))
        server.counts.reset()
        report = preprocess([modality], data_dir=DOI, out_dir=tmp_path / "remote",
                            client="sync", quiet=True)
        log = server.access_log()
        fetched = sum(n for path, n in server.counts.snapshot()["bytes"].items()
                      if path.startswith(("/api/access/datafile/21", "/api/access/datafile/22")))
    assert report.errors == {}
    _same_files(tmp_path / "remote", tmp_path / "local")
    sizes = {FILE_IDS[name]: (raw / name).stat().st_size for name in FILE_IDS}
    overlap = total = 0
    for file_id, chunks in pointcloud.items():
        total += sum(end - first for first, end in chunks)
        for first, end in _fetched_ranges(log, file_id):
            if end >= sizes[file_id]:
                continue  # the archive's tail: its central directory (read layer, once)
            overlap += sum(max(0, min(end, c[1]) - max(first, c[0])) for c in chunks)
    # point cloud bytes come along only where a 4 KiB metadata block read borders them
    assert overlap <= 2 * 4096 * N, (overlap, total)
    assert overlap < total / 8, (overlap, total)
    archives = sum((raw / name).stat().st_size for name in FILE_IDS)
    assert 0 < fetched < archives / 2, (fetched, archives)
    assert tree_digest(raw) == before
