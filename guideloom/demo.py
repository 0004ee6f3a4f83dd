"""A deterministic, RDDAC-shaped demo dataset for tutorials, tests and benchmarks.

The dataset has the shape of the published Real Deep Drawing and Cutting manifest: an index
table, a field map naming HDF5 paths, and the published use-case views. Measurements look like
measurements (smooth curves and surfaces, noise, unmeasured zero pixels), so compression and speed
figures mean something. Values are synthetic.
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import shutil
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from guideloom.errors import NotDemoDataError
from guideloom.select.write import CROISSANT_CONTEXT

REAL_SCAN_SHAPE = (2000, 3200)
DEMO_MARKER = ".guideloom-demo"  # lists the files make_demo_data wrote into a directory
LOOSE_FOLDER = "h5"
DEFAULT_SCAN_SHAPE = (100, 160)

GEOMETRIES = ("concave", "convex")
BLANKHOLDER_FORCES = (100, 300, 500)
OIL_TYPES = ("coarse", "medium", "fine")
FORCE_COLUMNS = (
    "time", "load_cell_1", "load_cell_2", "load_cell_3", "load_cell_4",
    "punch_temp", "punch_pos", "total_force",
)
FORCE_UNITS = ("s", "kN", "kN", "kN", "kN", "degC", "mm", "kN")

INDEX_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("index", "sc:Integer", "Experiment id; HDF5 member is the zero-padded id (42 -> 0042.h5)."),
    ("experiment_id", "sc:Integer", "Repetition number within its category."),
    ("category", "sc:Integer", "Geometry x blankholder force x oil type combination, 0..17."),
    ("geometry", "sc:Text", "Part geometry: concave or convex."),
    ("blankholder_force", "sc:Integer", "Blank holder force in kN: 100, 300 or 500."),
    ("mean_punch_temp", "sc:Float", "Mean punch temperature in degC."),
    ("oil_type", "sc:Text", "Lubrication pattern: coarse, medium or fine."),
    ("has_pointcloud", "sc:Boolean", "Whether the laser scans were recorded."),
    ("has_oil", "sc:Boolean", "Whether the oil film was measured."),
    ("split", "sc:Text", "Suggested split: train, val or test."),
)

FIELD_MAP: tuple[tuple[str, str, str], ...] = (
    ("force_data", "force/data", "Force and process signals over time, (n, 8)."),
    ("sheet_thickness_data", "sheet_thickness/data", "Sheet thickness traverse, (n, 2)."),
    ("oil_thickness_data", "oil_thickness/data", "Oil film traverse, (n, 2); absent without oil."),
    ("pointcloud_op10_z", "pointcloud/op10/z", "OP10 height buffer, flat y_shape*x_shape."),
    ("pointcloud_op10_luminescence", "pointcloud/op10/luminescence", "OP10 intensity buffer."),
    ("pointcloud_op20_z", "pointcloud/op20/z", "OP20 height buffer, flat y_shape*x_shape."),
    ("pointcloud_op20_luminescence", "pointcloud/op20/luminescence", "OP20 intensity buffer."),
)

VIEWS: dict[str, tuple[str, ...]] = {
    "force-curve": ("force_data",),
    "sheet-thickness": ("sheet_thickness_data",),
    "oil-thickness": ("oil_thickness_data",),
    "thickness": ("sheet_thickness_data", "oil_thickness_data"),
    "pointcloud-op10": ("pointcloud_op10_z", "pointcloud_op10_luminescence"),
    "pointcloud-op20": ("pointcloud_op20_z", "pointcloud_op20_luminescence"),
}


@dataclass(frozen=True)
class DemoDataset:
    """What :func:`make_demo_data` wrote."""

    data_dir: Path
    ids: tuple[int, ...]
    layout: str
    scan_shape: tuple[int, int]


def make_demo_data(
    data_dir: str | Path,
    n: int = 36,
    *,
    sim_ids: Sequence[int] | None = None,
    scan_shape: Sequence[int] = DEFAULT_SCAN_SHAPE,
    layout: str = "zip",
    seed: int = 0,
    compression_level: int = 4,
    force: bool = False,
) -> DemoDataset:
    """Write a deterministic RDDAC-shaped dataset into ``data_dir``.

    Args:
        data_dir: Target directory (created; existing demo files are replaced).
        n: Number of experiments (ids ``0..n-1``); ignored with ``sim_ids``.
        sim_ids: The experiment ids to write instead (distinct, non-negative, any order;
            written in increasing order): e.g. the published sample's ids, so that commands
            written for the real release find their experiments in the demo.
        scan_shape: ``(Y, X)`` of the four flat scan buffers; the real one is ``(2000, 3200)``.
        layout: ``"zip"`` for ``concave.zip``/``convex.zip`` with ``0042.h5`` members (stored,
            as published), ``"loose"`` for ``h5/0042.h5``.
        seed: Seed of every random draw; the same arguments give the same bytes of data.
        compression_level: gzip level inside HDF5.
        force: Write into a non-empty directory that make_demo_data did not make (its files of
            the same names are replaced; nothing else is removed).

    A directory made by make_demo_data before (it holds ``.guideloom-demo``) is regenerated:
    the files of the earlier call are removed first, with the loose copies of its zip members
    (``guideloom extract``), so old and new never mix; files of other origin are kept.

    Raises:
        NotDemoDataError: ``data_dir`` is not empty, was not made here, and ``force`` is false
            (a ``FileExistsError``).

    Returns:
        A :class:`DemoDataset` describing the result.
    """
    if layout not in ("zip", "loose"):
        raise ValueError(f"layout must be 'zip' or 'loose', not {layout!r}")
    ids = _demo_ids(n, sim_ids)
    y, x = (int(v) for v in scan_shape)
    root = Path(data_dir)
    _prepare(root, force)
    rows = [_index_row(i, seed) for i in ids]
    _write_csv(root / "process_parameters.csv", rows)
    surfaces = _ScanBasis((y, x), seed)
    if layout == "loose":
        folder = root / LOOSE_FOLDER
        folder.mkdir(exist_ok=True)
        for row in rows:
            target = folder / member_name(row["index"])
            _write_experiment(target, row, surfaces, seed, compression_level)
    else:
        with tempfile.TemporaryDirectory(dir=root) as tmp:
            for geometry in GEOMETRIES:
                archive = root / f"{geometry}.zip"
                partial = Path(tmp) / archive.name
                with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_STORED) as zf:
                    for row in rows:
                        if row["geometry"] != geometry:
                            continue
                        h5 = Path(tmp) / member_name(row["index"])
                        _write_experiment(h5, row, surfaces, seed, compression_level)
                        zf.write(h5, arcname=h5.name)
                        h5.unlink()
                os.replace(partial, archive)
    files = ["process_parameters.csv", *(f"{g}.zip" for g in GEOMETRIES)]
    checksums = {name: _md5(root / name) for name in files if (root / name).is_file()}
    (root / "metadata.json").write_text(json.dumps(demo_manifest(checksums), indent=2) + "\n")
    written = [*checksums, "metadata.json"]
    if layout == "loose":
        written += [f"{LOOSE_FOLDER}/{member_name(r['index'])}" for r in rows]
    record = {"files": written, "members": _zip_members(root, written)}
    (root / DEMO_MARKER).write_text(json.dumps(record) + "\n")
    return DemoDataset(root, ids, layout, (y, x))


def _demo_ids(n: int, sim_ids: Sequence[int] | None) -> tuple[int, ...]:
    """The ids :func:`make_demo_data` writes, checked: ``0..n-1`` or ``sim_ids`` sorted."""
    if sim_ids is None:
        if n < 1:
            raise ValueError("n must be at least 1")
        return tuple(range(n))
    ids = tuple(sorted(int(i) for i in sim_ids))
    if not ids or ids[0] < 0 or len(set(ids)) != len(ids):
        raise ValueError(f"sim_ids must be distinct non-negative ids, at least one: {sim_ids!r}")
    return ids


def _prepare(root: Path, force: bool) -> None:
    """Create ``root``; clear the files of an earlier call; refuse a foreign, non-empty one."""
    root.mkdir(parents=True, exist_ok=True)
    marker = root / DEMO_MARKER
    if marker.is_file():
        record = json.loads(marker.read_text())
        _remove_extracted(root, record)
        for name in record.get("files", []):
            path = (root / name).resolve()
            if path.is_relative_to(root.resolve()) and path.is_file():
                path.unlink()
        marker.unlink()
        return
    if any(root.iterdir()) and not force:
        raise NotDemoDataError(
            f"{root} is not empty and was not made by make_demo_data; choose an empty "
            "directory, or pass force=True to write the demo files into it", path=str(root))


def _zip_members(root: Path, files: Sequence[str]) -> dict[str, list[int]]:
    """``{member: [size, CRC-32]}`` of the archives among ``files`` that are still there."""
    members: dict[str, list[int]] = {}
    for name in files:
        if name.endswith(".zip") and (root / name).is_file():
            with zipfile.ZipFile(root / name) as zf:
                members.update({i.filename: [i.file_size, i.CRC] for i in zf.infolist()})
    return members


def _remove_extracted(root: Path, record: dict[str, Any]) -> None:
    """Remove the loose copies of the earlier call's zip members (``guideloom extract`` or an
    unzip made them): files under ``h5/`` named as a member, with its size and CRC-32. Loose
    files win over archives, so they would serve the old data; any other file is kept."""
    from guideloom.read.zipmember import file_crc32

    members = record.get("members") or _zip_members(root, record.get("files", []))
    folder = root / LOOSE_FOLDER
    for name, (size, crc) in members.items():
        path = folder / name
        if (Path(name).name == name and path.is_file() and not path.is_symlink()
                and path.stat().st_size == size and file_crc32(str(path)) == crc):
            path.unlink()
    if folder.is_dir() and not any(folder.iterdir()):
        folder.rmdir()


def _md5(path: Path) -> tuple[str, int]:
    digest = hashlib.md5(usedforsecurity=False)
    with path.open("rb") as fh:
        while block := fh.read(1 << 22):
            digest.update(block)
    return digest.hexdigest(), path.stat().st_size


def member_name(sim_id: int) -> str:
    """The file name of one experiment: ``0042.h5``."""
    return f"{sim_id:04d}.h5"


def demo_manifest(checksums: dict[str, tuple[str, int]] | None = None) -> dict[str, Any]:
    """The Croissant 1.1 manifest of the demo dataset (the published RDDAC shape).

    Args:
        checksums: ``{file name: (md5, size in bytes)}`` of the files written; Croissant
            readers such as mlcroissant require a checksum on every ``FileObject``.
    """
    sums = checksums or {}

    def checked(entry: dict[str, Any]) -> dict[str, Any]:
        if entry["contentUrl"] in sums:
            md5, size = sums[entry["contentUrl"]]
            entry.update(md5=md5, contentSize=f"{size} B")
        return entry

    csv_source = {"fileObject": {"@id": "process_parameters_csv"}}
    index_fields = [
        {
            "@type": "cr:Field",
            "@id": f"process-parameters/{name}",
            "name": name,
            "description": desc,
            "dataType": dtype,
            "source": {**csv_source, "extract": {"column": name}},
        }
        for name, dtype, desc in INDEX_COLUMNS
    ]
    field_map = [
        {
            "@type": "cr:Field",
            "@id": f"field-map/{name}",
            "name": name,
            "description": f"{desc} HDF5 path: {path}.",
            "dataType": "sc:Float",
            "source": {
                "fileSet": {"@id": "h5-files"},
                "extract": {"fileProperty": "content"},
                "transform": [{"regex": path}],
            },
        }
        for name, path, desc in FIELD_MAP
    ]
    views = [
        {
            "@type": "cr:RecordSet",
            "@id": view,
            "name": view,
            "description": f"Use-case view {view}.",
            "field": [
                {
                    "@type": "cr:Field",
                    "@id": f"{view}/{name}",
                    "name": name,
                    "dataType": "sc:Float",
                    "source": {"field": {"@id": f"field-map/{name}"}},
                }
                for name in names
            ],
        }
        for view, names in VIEWS.items()
    ]
    zips = [checked({
            "@type": "cr:FileObject",
            "@id": f"{g}_zip",
            "name": f"{g}.zip",
            "encodingFormat": "application/zip",
            "contentUrl": f"{g}.zip",
            "description": f"One HDF5 file per {g} experiment, stored uncompressed.",
        })
        for g in GEOMETRIES
    ]
    return {
        "@context": dict(CROISSANT_CONTEXT),
        "@type": "sc:Dataset",
        "name": "guideloom demo (RDDAC-shaped, synthetic)",
        "description": "Synthetic deep-drawing experiments with the layout of the RDDAC dataset.",
        "conformsTo": "http://mlcommons.org/croissant/1.1",
        "license": "https://creativecommons.org/publicdomain/zero/1.0/",
        "url": "https://example.invalid/guideloom-demo",
        "version": "1.0",
        "datePublished": "2026-01-01",
        "citeAs": "guideloom demo dataset (synthetic, RDDAC-shaped)",
        "distribution": [
            checked({
                "@type": "cr:FileObject",
                "@id": "process_parameters_csv",
                "name": "process_parameters.csv",
                "contentUrl": "process_parameters.csv",
                "encodingFormat": "text/csv",
                "description": "One row per experiment; join to HDF5 files on index.",
            }),
            *zips,
            {
                "@type": "cr:FileSet",
                "@id": "h5-files",
                "name": "h5-files",
                "containedIn": [{"@id": z["@id"]} for z in zips],
                "encodingFormat": "application/x-hdf5",
                "includes": ["**/*.h5"],
            },
        ],
        "recordSet": [
            {
                "@type": "cr:RecordSet",
                "@id": "process-parameters",
                "name": "process_parameters",
                "description": "Index table rows.",
                "key": {"@id": "process-parameters/index"},
                "field": index_fields,
            },
            {
                "@type": "cr:RecordSet",
                "@id": "field-map",
                "name": "field-map",
                "description": "Every HDF5 dataset, with its path inside the per-experiment file.",
                "field": field_map,
            },
            *views,
        ],
    }




def _index_row(i: int, seed: int) -> dict[str, Any]:
    rng = np.random.default_rng([seed, i, 1])
    category = i % 18
    geometry = GEOMETRIES[category // 9]
    split_draw = rng.random()
    return {
        "index": i,
        "experiment_id": i // 18 + 1,
        "category": category,
        "geometry": geometry,
        "blankholder_force": BLANKHOLDER_FORCES[(category // 3) % 3],
        "mean_punch_temp": round(float(24.0 + 6.0 * rng.random()), 3),
        "oil_type": OIL_TYPES[category % 3],
        "has_pointcloud": bool(rng.random() < 0.85),
        "has_oil": bool(rng.random() < 0.8),
        "split": "train" if split_draw < 0.7 else ("val" if split_draw < 0.85 else "test"),
    }


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=[c for c, _, _ in INDEX_COLUMNS])
        writer.writeheader()
        writer.writerows(rows)


class _ScanBasis:
    """Smooth surfaces shared by all experiments; each experiment perturbs them cheaply."""

    def __init__(self, shape: tuple[int, int], seed: int):
        y, x = shape
        self.shape = shape
        yy = np.linspace(-1.0, 1.0, y, dtype=np.float32)[:, None]
        xx = np.linspace(-1.0, 1.0, x, dtype=np.float32)[None, :]
        r2 = yy**2 + xx**2
        self.part = (r2 < 0.85).astype(np.float32)  # outside the part: no measurement
        self.dome = (40.0 * np.exp(-2.5 * r2)).astype(np.float32)
        self.shade = (120.0 + 80.0 * np.cos(3.0 * xx) * np.cos(2.0 * yy)).astype(np.float32)
        rng = np.random.default_rng([seed, 99])
        self.noise = rng.standard_normal(y * x, dtype=np.float32).reshape(shape)

    def scan(self, rng: np.random.Generator, depth: float) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(z, luminescence)`` flat float32 buffers with quantised values."""
        shift = int(rng.integers(0, self.noise.size))
        noise = np.roll(self.noise.reshape(-1), shift).reshape(self.shape)
        z = self.dome * depth + 0.002 * noise
        z = np.round(z * 1000.0) / 1000.0  # micrometre resolution
        lum = np.round(self.shade + 0.7 * noise)
        dropout = rng.random(self.shape, dtype=np.float32) < 0.02
        mask = (self.part > 0) & ~dropout
        z = np.where(mask, z, 0.0).astype(np.float32)
        lum = np.where(mask, np.clip(lum, 1.0, 255.0), 0.0).astype(np.float32)
        return z.reshape(-1), lum.reshape(-1)


def _force_table(rng: np.random.Generator, row: dict[str, Any]) -> np.ndarray:
    n = int(1140 + rng.integers(-40, 41))
    t = np.linspace(0.0, 11.4, n)
    phase = np.clip(t / 11.4, 0.0, 1.0)
    peak = 180.0 + 0.35 * row["blankholder_force"] + 15.0 * rng.standard_normal()
    shape = np.sin(np.pi * phase) ** 1.5
    cells = np.stack(
        [peak / 4 * shape * (1 + 0.03 * k) + 0.5 * rng.standard_normal(n) for k in range(4)],
        axis=1,
    )
    temp = row["mean_punch_temp"] + 0.8 * np.sin(2 * np.pi * phase) + 0.05 * rng.standard_normal(n)
    pos = 120.0 * phase + 0.01 * rng.standard_normal(n)
    total = cells.sum(axis=1)
    return np.column_stack([t, cells, temp, pos, total]).astype(np.float32)


def _traverse(rng: np.random.Generator, n_mean: int, base: float, amp: float) -> np.ndarray:
    n = int(n_mean + rng.integers(-3, 4))
    pos = np.linspace(0.0, 300.0, n)
    val = base + amp * np.sin(pos / 40.0 + rng.random()) + 0.05 * amp * rng.standard_normal(n)
    return np.column_stack([pos, val]).astype(np.float32)


def _write_experiment(
    path: Path, row: dict[str, Any], scans: _ScanBasis, seed: int, level: int
) -> None:
    rng = np.random.default_rng([seed, row["index"], 2])
    gz = {"compression": "gzip", "compression_opts": level, "shuffle": True}
    force = _force_table(rng, row)
    sheet = _traverse(rng, 208, 1.0, 0.02)
    with h5py.File(path, "w") as f:
        for key, value in row.items():
            f.attrs[key] = value
        f.attrs["n_force_measurements"] = force.shape[0]
        f.attrs["n_sheet_measurements"] = sheet.shape[0]
        g = f.create_group("force")
        g.attrs["columns"] = list(FORCE_COLUMNS)
        g.attrs["units"] = list(FORCE_UNITS)
        g.create_dataset("data", data=force, chunks=True, **gz)
        f.create_group("sheet_thickness").create_dataset("data", data=sheet, **gz)
        if row["has_oil"]:
            oil = _traverse(rng, 421, 1.5, 0.4)
            f.attrs["n_oil_measurements"] = oil.shape[0]
            f.create_group("oil_thickness").create_dataset("data", data=oil, **gz)
        if row["has_pointcloud"]:
            y, x = scans.shape
            chunk = (pointcloud_chunk(y * x),)
            for op, depth in (("op10", 1.0), ("op20", 0.97)):
                z, lum = scans.scan(rng, depth * (1.0 + 0.02 * rng.standard_normal()))
                g = f.create_group(f"pointcloud/{op}")
                g.attrs["x_shape"], g.attrs["y_shape"] = x, y
                g.create_dataset("z", data=z, chunks=chunk, **gz)
                g.create_dataset("luminescence", data=lum, chunks=chunk, **gz)


POINTCLOUD_CHUNKS = 512  # the published files' layout: a 2000 x 3200 field in 512 gzip chunks
MIN_POINTCLOUD_CHUNK = 1 << 12
DEMO_FORMAT = 2  # bumped when the files written for the same arguments change (chunking: 2)


def pointcloud_chunk(size: int) -> int:
    """Elements per chunk of a flat point-cloud field of ``size`` elements: 512 chunks, as in
    the published data (12,500 elements, 50 KB, for a 2000 x 3200 scan), but at least 4,096."""
    return min(size, max(-(-size // POINTCLOUD_CHUNKS), MIN_POINTCLOUD_CHUNK))


def cached_demo_data(
    cache_dir: str | Path, n: int, scan_shape: Sequence[int], layout: str, seed: int = 0
) -> Path:
    """Return a demo dataset under ``cache_dir``, writing it only if it is not there yet.

    Benchmarks use this so that large real-shape datasets are generated once.
    """
    y, x = (int(v) for v in scan_shape)
    target = Path(cache_dir) / f"demo-n{n}-{y}x{x}-{layout}-s{seed}"
    stamp = target / ".complete"
    wanted = json.dumps({"n": n, "scan_shape": [y, x], "layout": layout, "seed": seed,
                         "format": DEMO_FORMAT})
    if not stamp.is_file() or stamp.read_text() != wanted:
        if stamp.is_file():  # made here for other arguments or an older demo format
            shutil.rmtree(target)
        make_demo_data(target, n=n, scan_shape=(y, x), layout=layout, seed=seed)
        stamp.write_text(wanted)
    return target
