"""Synthetic raw laser scans, fin labels and DDACS simulations for the pointcloud stage's tests.

A scan is a hat-shaped part (a flat deck, 45-degree walls, a flange) seen by the scanner on a
``(rows, cols)`` grid at rddac's calibration, slightly turned and shifted, with sensor noise,
dropouts, lit specks off the part (the luminescence mask removes them), floating clusters (small
3-D components) and fins: thin lips rising along stretches of the outline, which the labels mark.
The simulation is the same part, unturned and without artefacts, as DDACS stores it: the quarter
part's final node positions under ``OP10/blank/node_displacement``.
"""

from __future__ import annotations

import csv
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from guideloom.demo import demo_manifest, make_demo_data
from guideloom.preprocess.pointcloud.grid import X_MM_PER_PIXEL, Y_MM_PER_PIXEL, Z_MM_PER_UNIT

SHAPE = (160, 256)
#: The parameters the tests run with: rddac's, scaled to the small grid.
SMALL = {"lumi_min_patch_size": 500, "icp_sample_size": 4000, "rf_n_estimators": 16,
         "rf_max_depth": 12}
DECKS = {"concave": (3.0, 5.0), "convex": (4.5, 4.0)}  # deck half-widths (x, y) in mm
DECK_MM = 4.0
OUTLINE = {"op10": (9.0, 11.5), "op20": (8.0, 10.5)}
FORCES = (100, 300)
FIRST_SIM = 181809


@dataclass(frozen=True)
class Experiment:
    """One synthetic experiment: id, part geometry, blankholder force (kN)."""

    index: int
    geometry: str
    force: int


EXPERIMENTS = tuple(Experiment(i, "concave" if i < 4 else "convex", FORCES[i % 2])
                    for i in range(8))


def part_height(x: np.ndarray, y: np.ndarray, geometry: str, scale: float = 1.0) -> np.ndarray:
    """The part's height in mm at part-frame coordinates (deck, 45-degree walls, flange at 0);
    ``scale`` enlarges the part (12.5 fills a real 2000 x 3200 scan)."""
    a, b = DECKS[geometry]
    dx, dy = np.maximum(np.abs(x) - a * scale, 0), np.maximum(np.abs(y) - b * scale, 0)
    return np.clip(DECK_MM * scale - np.hypot(dx, dy), 0.0, None) + 0.05 * np.sin(x / 3.0)


def inside(x: np.ndarray, y: np.ndarray, op: str, scale: float = 1.0) -> np.ndarray:
    """Whether part-frame coordinates lie on the blank (a rounded rectangle)."""
    a, b = OUTLINE[op]
    a, b, corner = a * scale, b * scale, 1.5 * scale
    dx, dy = np.maximum(np.abs(x) - (a - corner), 0), np.maximum(np.abs(y) - (b - corner), 0)
    return np.hypot(dx, dy) < corner


def scan(exp: Experiment, op: str, shape: tuple[int, int] = SHAPE
         ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(z raw units, luminescence, fin mask)`` grids of one operation's scan (the part
    scaled with the grid: :data:`SHAPE` holds the part at scale 1)."""
    rng = np.random.default_rng([exp.index, int(op[2:])])
    rows, cols = shape
    scale = rows / SHAPE[0]
    yy, xx = np.mgrid[0:rows, 0:cols].astype(float)
    x = (xx - cols / 2) * X_MM_PER_PIXEL + rng.uniform(-0.4, 0.4)
    y = (yy - rows / 2) * Y_MM_PER_PIXEL + rng.uniform(-0.4, 0.4)
    theta = np.radians(rng.uniform(-2.0, 2.0))
    px, py = np.cos(theta) * x + np.sin(theta) * y, -np.sin(theta) * x + np.cos(theta) * y
    on = inside(px, py, op, scale)
    height = part_height(px, py, exp.geometry, scale) + 0.01 * rng.standard_normal(shape)
    # fins: lips along stretches of the outline, rising outward
    a, b = OUTLINE[op]
    edge = on & ~inside(px * a / (a - 0.35), py * b / (b - 0.35), op, scale)
    stretch = np.zeros(shape, dtype=bool)
    for _ in range(3):
        angle = rng.uniform(-np.pi, np.pi)
        heading = np.arctan2(py, px)
        stretch |= np.abs(np.angle(np.exp(1j * (heading - angle)))) < 0.35
    fins = edge & stretch
    rise = np.clip((np.hypot(px / a, py / b) / scale - 0.93) * 60, 0, None)
    height = np.where(fins, height + 1.5 + rise * rng.uniform(1.0, 2.0), height)
    # floating clusters: small blocks far above the flange
    for _ in range(3):
        r0, c0 = rng.integers(8, rows - 14), rng.integers(8, cols - 14)
        block = (slice(r0, r0 + 5), slice(c0, c0 + 6))  # 30 pixels at any scale
        height[block] = np.where(on[block], height[block] + 12.0, height[block])
    z = (height + 30.0) / Z_MM_PER_UNIT
    lumi = np.round(120 + 60 * np.cos(px / 2.0) * np.cos(py / 3.0) + 5 * rng.standard_normal(shape))
    dropout = rng.random(shape) < 0.01
    surface = on & ~dropout
    z = np.where(surface, z, 0.0)
    lumi = np.where(surface, np.clip(lumi, 1, 255), 0.0)
    for _ in range(4):  # lit specks off the part: too small a patch
        r0, c0 = rng.integers(0, rows - 3), rng.integers(0, 6)
        lumi[r0:r0 + 3, c0:c0 + 3] = 40.0
        z[r0:r0 + 3, c0:c0 + 3] = 3000.0
    return z.astype(np.float32), lumi.astype(np.float32), fins & surface


def sim_quarter(geometry: str, op: str, step: float = 0.25, scale: float = 1.0) -> np.ndarray:
    """The simulated part's quarter (x, y >= 0) as ``(N, 3)`` node positions."""
    a, b = OUTLINE[op]
    gx, gy = np.meshgrid(np.arange(0, a * scale + 1e-9, step),
                         np.arange(0, b * scale + 1e-9, step))
    x, y = gx.ravel(), gy.ravel()
    keep = inside(x, y, op, scale)
    x, y = x[keep], y[keep]
    return np.column_stack([x, y, part_height(x, y, geometry, scale)])


def sim_rows() -> list[dict[str, Any]]:
    """DDACS's parameter table for the test: per geometry and force two rddac candidates (the
    second nearer to thick sheet and little oil) and one that is not rddac's."""
    rows = []
    index = FIRST_SIM
    for geometry in DECKS:
        for force in FORCES:
            for sheet, friction, rddac in ((0.95, 0.05, True), (1.05, 0.15, True),
                                           (1.0, 0.1, False)):
                rows.append({"index": index, "geometry": geometry,
                             "blankholder_force": float(force * 1000), "sheet_metal_thickness":
                             sheet, "friction_coefficient": friction, "rddac": rddac})
                index += 1
    return rows


def write_simulations(folder: Path, scale: float = 1.0, step: float = 0.25
                      ) -> list[dict[str, Any]]:
    """A DDACS-shaped folder: ``rddac.zip`` of ``<id>.h5``, the parameter table, a manifest."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = sim_rows()
    with (folder / "process_parameters.csv").open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    with zipfile.ZipFile(folder / "rddac.zip", "w", zipfile.ZIP_STORED) as zf:
        for row in rows:
            if not row["rddac"]:
                continue
            member = folder / f"{row['index']}.h5"
            with h5py.File(member, "w") as f:
                for op in ("OP10", "OP20"):
                    quarter = sim_quarter(row["geometry"], op.lower(), step, scale)
                    final = quarter.copy()
                    final[:, 2] *= 1.0 + 0.02 * (row["sheet_metal_thickness"] - 1.0)
                    f.create_dataset(f"{op}/blank/node_displacement",
                                     data=np.stack([quarter * [1, 1, 0], final]))
            zf.write(member, member.name)
            member.unlink()
    (folder / "metadata.json").write_text(json.dumps(sim_manifest()))
    return rows


def sim_manifest() -> dict[str, Any]:
    """A Croissant manifest of the simulation folder (DDACS's shape, few columns)."""
    manifest = demo_manifest()
    manifest["name"] = "DDACS (test)"
    csv_ref = {"fileObject": {"@id": "process_parameters_csv"}}
    manifest["distribution"] = [
        manifest["distribution"][0],
        {"@type": "cr:FileObject", "@id": "rddac_zip", "name": "rddac.zip",
         "encodingFormat": "application/zip", "contentUrl": "rddac.zip"},
        {"@type": "cr:FileSet", "@id": "h5-files", "name": "h5-files",
         "containedIn": [{"@id": "rddac_zip"}], "encodingFormat": "application/x-hdf5",
         "includes": ["**/*.h5"]}]
    types = {"index": "sc:Integer", "geometry": "sc:Text", "blankholder_force": "sc:Float",
             "sheet_metal_thickness": "sc:Float", "friction_coefficient": "sc:Float",
             "rddac": "sc:Boolean"}
    fields = [{"@type": "cr:Field", "@id": f"process-parameters/{name}", "name": name,
               "dataType": kind, "source": {**csv_ref, "extract": {"column": name}}}
              for name, kind in types.items()]
    index_rs = {**manifest["recordSet"][0], "field": fields}
    source = {"fileSet": {"@id": "h5-files"}, "extract": {"fileProperty": "content"},
              "transform": [{"regex": "OP10/blank/node_displacement"}]}
    field_map = {**manifest["recordSet"][1], "field": [{
        "@type": "cr:Field", "@id": "field-map/blank_displacement", "name": "blank_displacement",
        "dataType": "sc:Float", "source": source}]}
    manifest["recordSet"] = [index_rs, field_map]
    return manifest


def write_raw(path: Path, exp: Experiment, shape: tuple[int, int] = SHAPE,
              ops: tuple[str, ...] = ("op10", "op20")) -> dict[str, np.ndarray]:
    """One raw experiment with its scans (and nothing else); returns the fin masks by op."""
    fins = {}
    with h5py.File(path, "w") as f:
        f.attrs["index"] = exp.index
        f.attrs["geometry"] = exp.geometry
        f.attrs["blankholder_force"] = exp.force
        for op in ops:
            z, lumi, fin = scan(exp, op, shape)
            fins[op] = fin
            g = f.create_group(f"pointcloud/{op}")
            g.attrs["y_shape"], g.attrs["x_shape"] = shape
            g.create_dataset("z", data=z.ravel(), compression="gzip")
            g.create_dataset("luminescence", data=lumi.ravel(), compression="gzip")
    return fins


def write_dataset(root: Path, labelled: int = 6, shape: tuple[int, int] = SHAPE
                  ) -> tuple[Path, Path]:
    """A loose RDDAC-shaped data folder with the synthetic experiments (and ``simulation/``), and
    a labels folder for the first ``labelled`` of each geometry; returns ``(data, labels)``."""
    data = root / "data"
    make_demo_data(data, n=len(EXPERIMENTS), scan_shape=(4, 4), layout="loose")
    labels = root / "labels"
    labels.mkdir()
    per_geometry: dict[str, int] = {}
    for exp in EXPERIMENTS:
        fins = write_raw(data / "h5" / f"{exp.index:04d}.h5", exp, shape)
        if per_geometry.get(exp.geometry, 0) < labelled // 2:
            per_geometry[exp.geometry] = per_geometry.get(exp.geometry, 0) + 1
            for op, mask in fins.items():
                np.savez_compressed(labels / f"{exp.index:04d}_{op}.npz", outlier_mask=mask)
    _fix_index(data / "process_parameters.csv")
    scale = shape[0] / SHAPE[0]
    write_simulations(data / "simulation", scale, 0.25 * max(1.0, scale / 4))
    return data, labels


def _fix_index(path: Path) -> None:
    with path.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    for row in rows:
        exp = EXPERIMENTS[int(row["index"])]
        row["geometry"], row["blankholder_force"] = exp.geometry, str(exp.force)
        row["has_pointcloud"] = "True"
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def processed_means(out: h5py.File, exp: Experiment) -> None:
    """Processed sheet and oil tables in ``out`` (the means choose among the candidates)."""
    sheet = 1000.0 + 40.0 * (exp.index % 3) + np.zeros(200, dtype=np.float32)
    oil = 0.8 + 0.3 * (exp.index % 3) + np.zeros(200, dtype=np.float32)
    pos = np.arange(200, dtype=np.float32)
    out.create_dataset("sheet_thickness/data", data=np.column_stack([pos, sheet]))
    out.create_dataset("oil_thickness/data", data=np.column_stack([pos, oil]))
