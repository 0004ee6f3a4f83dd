"""Raw datasets that exercise every cleaning branch of the force, sheet and oil stages, and
rddac 2.0 run as a subprocess in a venv of its own (the conformance reference)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import h5py
import numpy as np

from guideloom.demo import GEOMETRIES, demo_manifest, make_demo_data

RDDAC_PYTHON_ENV = "GUIDELOOM_RDDAC_PYTHON"
RDDAC_REQUIREMENTS = ("ddacs==3.2.3", "rddac[preprocessing]==2.0.0")
N_VARIANTS = 10
FORCE_COLUMNS = ("time", "load_cell_1", "load_cell_2", "load_cell_3", "load_cell_4",
                 "punch_temp", "punch_pos", "total_force")


def _force(rng: np.random.Generator, variant: int) -> tuple[np.ndarray, object]:
    """A 300 Hz force table; variants: a short trace, an offset clock, another column layout."""
    seconds = 1.4 if variant == 1 else 2.6
    start = 0.013 if variant == 2 else 0.0
    t = start + np.arange(int(seconds * 300)) / 300.0
    phase = np.clip(t / 2.5, 0, 1)
    rest = 3.0 + rng.random()  # the blankholder preload the stage removes
    cells = np.stack([rest + 40 * np.sin(np.pi * phase) ** 1.5 * (1 + 0.03 * k)
                      + 0.2 * rng.standard_normal(len(t)) for k in range(4)], axis=1)
    if variant == 3:
        cells[:, 0] -= 8.0  # a negative rest: abs() of the minimum
    temp = 24.0 + 0.8 * np.sin(2 * np.pi * phase) + 0.05 * rng.standard_normal(len(t))
    pos = 60.0 * phase + 0.3 * rng.standard_normal(len(t))
    table = np.column_stack([t, cells, temp, pos, cells.sum(axis=1)])
    if variant == 4:  # columns as one comma-separated text, in another order, one dropped
        order = [0, 7, 1, 2, 3, 4, 6]
        return table[:, order].astype(np.float32), ", ".join(FORCE_COLUMNS[i] for i in order)
    return table.astype(np.float32), list(FORCE_COLUMNS)


def _sheet(rng: np.random.Generator, variant: int) -> np.ndarray:
    """A traverse; variants: the sensor's negative error codes, fewer than 200 rows."""
    n = 150 if variant == 5 else 208 + int(rng.integers(-3, 4))
    pos = 12.5 + np.linspace(0.0, 300.0, n)
    val = 1.0 + 0.02 * np.sin(pos / 40.0) + 0.001 * rng.standard_normal(n)
    if variant in (3, 5):
        val[rng.choice(n, 6, replace=False)] = -99999.0
    return np.column_stack([pos, val]).astype(np.float32)


def _oil(rng: np.random.Generator, variant: int) -> np.ndarray:
    """A traverse measured about twice per mm; variants: dropouts, spikes, flat quantised
    stretches (the MAD-0 fallback), three samples a position, positions out of range, gaps."""
    n = 421 + int(rng.integers(-3, 4))
    pos = np.linspace(-1.4, 240.0, n)
    val = np.round(1.5 + 0.4 * np.sin(pos / 40.0) + 0.02 * rng.standard_normal(n), 2)
    if variant in (1, 6):
        val[rng.choice(n, 12, replace=False)] = np.nan  # dropouts
        pos[rng.choice(n, 2, replace=False)] = np.nan  # a lost position
    if variant in (2, 6):
        val[rng.choice(n, 8, replace=False)] += rng.choice([-1.0, 1.0], 8) * 3.0  # spikes
    if variant in (3, 6):
        val[40:140] = 1.23  # flat: MAD 0
        val[60] = 1.24  # one LSB: never an outlier
        val[90] = 1.40  # a spike in a flat stretch
    if variant == 7:  # three samples per position, with a gap of missing positions
        pos = np.repeat(np.arange(0.0, 200.0), 3) + rng.uniform(-0.3, 0.3, 600)
        val = np.round(1.1 + 0.1 * rng.standard_normal(600), 3)
        keep = (pos < 50) | (pos > 70)
        pos, val = pos[keep], val[keep]
    if variant == 8:  # starts late: the grid's start is filled from the first value
        keep = pos > 30.0
        pos, val = pos[keep], val[keep]
    return np.column_stack([pos, val]).astype(np.float32)


def rewrite_measurements(path: Path, sim_id: int) -> None:
    """Replace the force, sheet and oil groups of one raw file by a variant (``sim_id %
    N_VARIANTS``); variant 9 has no oil and no sheet group, variant 0 no force group."""
    variant = sim_id % N_VARIANTS
    rng = np.random.default_rng([sim_id, 39])
    gz = {"compression": "gzip", "compression_opts": 4, "shuffle": True}
    with h5py.File(path, "a") as f:
        for group in ("force", "sheet_thickness", "oil_thickness"):
            if group in f:
                del f[group]
        if variant != 0 or sim_id == 0:
            table, columns = _force(rng, variant)
            g = f.create_group("force")
            g.attrs["columns"] = columns
            g.create_dataset("data", data=table, chunks=True, **gz)
        if variant != 9:
            f.create_group("sheet_thickness").create_dataset("data", data=_sheet(rng, variant),
                                                             **gz)
            f.create_group("oil_thickness").create_dataset("data", data=_oil(rng, variant),
                                                           **gz)


def make_raw_dataset(root: Path, n: int = 20, layout: str = "loose",
                     scan_shape: tuple[int, int] = (8, 12)) -> Path:
    """A demo-shaped raw dataset (manifest, index, tiny point clouds) whose measurements are
    the variants above; ``layout`` ``"loose"`` (``<id>.h5`` at the top) or ``"zip"`` (one stored
    archive per geometry, as published)."""
    make_demo_data(root, n=n, layout="loose", scan_shape=scan_shape, seed=3)
    h5 = root / "h5"
    for i in range(n):
        rewrite_measurements(h5 / f"{i:04d}.h5", i)
    (root / ".guideloom-demo").unlink()
    if layout == "loose":  # at the top, where rddac looks first
        for i in range(n):
            os.replace(h5 / f"{i:04d}.h5", root / f"{i:04d}.h5")
        h5.rmdir()
    if layout == "zip":
        geometry = {}
        for i in range(n):
            with h5py.File(h5 / f"{i:04d}.h5", "r") as f:
                geometry[i] = str(f.attrs["geometry"])
        for g in GEOMETRIES:
            with zipfile.ZipFile(root / f"{g}.zip", "w", zipfile.ZIP_STORED) as zf:
                for i in range(n):
                    if geometry[i] == g:
                        zf.write(h5 / f"{i:04d}.h5", arcname=f"{i:04d}.h5")
        shutil.rmtree(h5)
        sums = {}
        for name in ("process_parameters.csv", *(f"{g}.zip" for g in GEOMETRIES)):
            data = (root / name).read_bytes()
            sums[name] = (hashlib.md5(data).hexdigest(), len(data))
        (root / "metadata.json").write_text(json.dumps(demo_manifest(sums), indent=2) + "\n")
    return root


def tree_digest(root: Path) -> dict[str, str]:
    """Every file below ``root`` (relative name → sha256 of its bytes and its mode)."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            mode = oct(path.stat().st_mode)
            out[str(path.relative_to(root))] = hashlib.sha256(path.read_bytes()).hexdigest() + mode
    return out


def rddac_python() -> tuple[str | None, str]:
    """The python of a venv with rddac 2.0 (``GUIDELOOM_RDDAC_PYTHON``, or one made once in
    the user's cache folder), or ``None`` and why it cannot be had."""
    given = os.environ.get(RDDAC_PYTHON_ENV)
    if given:
        return (given, "") if os.path.exists(given) else (None, f"{RDDAC_PYTHON_ENV}={given} "
                                                                "does not exist")
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "guideloom-tests"
    venv = cache / "rddac-2.0.0-venv"
    python = venv / "bin" / "python"
    if python.exists():
        return str(python), ""
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True,
                       capture_output=True, timeout=120)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *RDDAC_REQUIREMENTS],
                       check=True, capture_output=True, timeout=900)
    except (subprocess.SubprocessError, OSError) as exc:
        shutil.rmtree(venv, ignore_errors=True)
        return None, f"cannot install rddac 2.0.0 into a venv ({exc})"
    return str(python), ""


def run_rddac(python: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``rddac ARGS`` in its venv (no pointcloud work; checked)."""
    code = "import sys; from rddac.cli import main; sys.exit(main())"
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    return subprocess.run([python, "-c", code, *args], capture_output=True, text=True,
                          check=True, env=env, timeout=600)
