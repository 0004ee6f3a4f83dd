"""The fin classifier: one random forest per part geometry and operation, trained
deterministically from the published labels, cached under ``<out>/models/pointcloud_fin_rf/``.

A cached model is used only while its fingerprint holds: the schema of this module, the labels'
sha256, the hyperparameters, and the versions of scikit-learn, numpy and scipy. The cache is
written beside and renamed into place, so a killed training leaves the previous cache or none.
The decision threshold is applied at prediction and is not part of the fingerprint.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from guideloom.preprocess.pointcloud import features, grid, icp, means, registration
from guideloom.preprocess.pointcloud.labels import Labels
from guideloom.preprocess.pointcloud.params import BALANCE_RATIO, DX_MM, DY_MM, MAX_TRAIN_ROWS, SEED
from guideloom.preprocess.pointcloud.simulations import Simulations

logger = logging.getLogger(__name__)

SCHEMA = 2  # rddac 2.0's bundle schema: features on the cup-anchored two-pass alignment
CACHE = Path("models") / "pointcloud_fin_rf"
GROUPS = ("concave_op10", "concave_op20", "convex_op10", "convex_op20")
MIN_MEMBERS = 3


def identity(labels_sha256: str, n_estimators: int, max_depth: int) -> dict[str, Any]:
    """What a cached model must have been made with."""
    import scipy
    import sklearn

    return {"schema_version": SCHEMA, "labels_sha256": labels_sha256,
            "rf_n_estimators": int(n_estimators), "rf_max_depth": int(max_depth),
            "sklearn": sklearn.__version__, "numpy": np.__version__, "scipy": scipy.__version__}


def digest(ident: dict[str, Any]) -> str:
    """A short hex digest of an identity."""
    return hashlib.sha256(json.dumps(ident, sort_keys=True).encode()).hexdigest()[:16]


def cache_dir(out_dir: str | os.PathLike[str]) -> Path:
    """The model cache folder of an output directory."""
    return Path(out_dir) / CACHE


def cached(out_dir: str | os.PathLike[str], ident: dict[str, Any]) -> bool:
    """Whether the cache under ``out_dir`` holds all groups made with ``ident``."""
    folder = cache_dir(out_dir)
    try:
        meta = json.loads((folder / "meta.json").read_text())
    except (OSError, ValueError):
        return False
    return ({k: meta.get(k) for k in ident} == ident
            and all((folder / f"{g}.joblib").is_file() for g in meta.get("groups", [None])))


def load(out_dir: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """The cached bundles by group (``model``, ``prior_reg``, ``expected_reg``, ``ref_ds``, ...)."""
    import joblib

    folder = cache_dir(out_dir)
    meta = json.loads((folder / "meta.json").read_text())
    return {group: joblib.load(folder / f"{group}.joblib") for group in meta["groups"]}


class Bundles(Mapping[str, dict[str, Any]]):
    """The cached bundles of ``out_dir``, each loaded on first use (a worker that only sees
    concave parts never holds the convex forests: each is tens to hundreds of MB)."""

    def __init__(self, out_dir: str | os.PathLike[str]):
        self.folder = cache_dir(out_dir)
        self.groups = tuple(json.loads((self.folder / "meta.json").read_text())["groups"])
        self._loaded: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def __getitem__(self, group: str) -> dict[str, Any]:
        with self._lock:
            if group not in self._loaded:
                if group not in self.groups:
                    raise KeyError(f"no fin classifier for {group} in {self.folder}")
                import joblib

                self._loaded[group] = joblib.load(self.folder / f"{group}.joblib")
            return self._loaded[group]

    def __iter__(self) -> Iterator[str]:
        return iter(self.groups)

    def __len__(self) -> int:
        return len(self.groups)


@dataclass(frozen=True)
class Sample:
    """One labelled scan prepared for training: aligned heights, mask, distances, luminescence."""

    z_mm: np.ndarray
    valid: np.ndarray
    sim_distance: np.ndarray
    lumi: np.ndarray


def prepare_sample(raw: Any, op: str, sims: Simulations, params: dict[str, Any]
                   ) -> tuple[str, Sample]:
    """``(group, sample)`` of one labelled scan: aligned on all its points (no seeds)."""
    from scipy.spatial import cKDTree

    geometry = str(raw.attrs["geometry"])
    sheet_mean, oil_mean = means.from_raw(raw)
    match = sims.match(geometry, int(raw.attrs["blankholder_force"]), sheet_mean, oil_mean)
    sim = sims.points(match["simulation_id"], op)
    z, lumi = read_scan(raw, op)
    valid = grid.surface_mask(lumi, z, int(params["lumi_min_patch_size"]))
    points = grid.scan_points(z, valid)
    fit = icp.align(points, sim, np.ones(len(points), dtype=bool),
                    anchor_height_mm=float(params["icp_anchor_height_mm"]),
                    iterations=int(params["icp_max_iterations"]),
                    sample=int(params["icp_sample_size"]), seed=SEED)
    distances = cKDTree(sim).query(fit.aligned)[0]
    return f"{geometry}_{op}", Sample(grid.on_grid(fit.aligned[:, 2], valid), valid,
                                      grid.on_grid(distances, valid),
                                      grid.luminescence_grid(lumi, valid))


def read_scan(raw: Any, op: str) -> tuple[np.ndarray, np.ndarray]:
    """``(z, luminescence)`` grids of one operation's raw scan.

    Raises:
        ValueError: The buffers do not hold ``y_shape x x_shape`` values.
    """
    group = raw[f"pointcloud/{op}"]
    shape = (int(group.attrs["y_shape"]), int(group.attrs["x_shape"]))
    z, lumi = group["z"][:], group["luminescence"][:]
    if z.size != shape[0] * shape[1] or lumi.size != z.size:
        raise ValueError(f"pointcloud/{op}: {z.size} heights and {lumi.size} luminescence values "
                         f"for a {shape[0]} x {shape[1]} grid")
    return z.reshape(shape), lumi.reshape(shape)


def _save(folder: Path, name: str, sample: Sample) -> None:
    np.savez(folder / f"{name}.npz", z_mm=sample.z_mm, valid=sample.valid,
             sim_distance=sample.sim_distance, lumi=sample.lumi)


def _load(folder: Path, name: str) -> Sample:
    with np.load(folder / f"{name}.npz") as data:
        return Sample(data["z_mm"], data["valid"], data["sim_distance"], data["lumi"])


def train(out_dir: str | os.PathLike[str], labels: Labels, open_raw: Any, sims: Simulations,
          params: dict[str, Any], ident: dict[str, Any]) -> None:
    """Train every group from the labelled scans and publish the cache under ``out_dir``.

    Args:
        out_dir: The processed output directory.
        labels: The label files.
        open_raw: ``open_raw(experiment_id)`` → the raw file (a context manager), or raises
            FileNotFoundError/KeyError when the experiment is not in the data directory.
        sims: The simulations.
        params: The complete ``[pointcloud]`` table.
        ident: :func:`identity` of this training.

    Raises:
        RuntimeError: A group has fewer than three labelled scans available.
    """
    folder = cache_dir(out_dir)
    folder.parent.mkdir(parents=True, exist_ok=True)
    recipe = {key: params[key] for key in ("lumi_min_patch_size", "icp_anchor_height_mm",
                                           "icp_max_iterations", "icp_sample_size")}
    recipe["sims"] = sims.source
    prepared = folder.parent / f"pointcloud_fin_rf.prepared-{digest(recipe)}"
    prepared.mkdir(exist_ok=True)
    members: dict[str, list[str]] = {g: [] for g in GROUPS}
    missing = []
    for task in labels.tasks():
        group_file = prepared / f"{task.name}.group"
        if not group_file.is_file():
            try:
                with open_raw(task.experiment) as raw:
                    group, sample = prepare_sample(raw, task.op, sims, params)
            except (FileNotFoundError, KeyError):
                missing.append(task.name)
                continue
            _save(prepared, task.name, sample)
            group_file.write_text(group)
        members.setdefault(group_file.read_text(), []).append(task.name)
    if missing:
        logger.warning("%d labelled scans not in the data directory: %s", len(missing),
                       ", ".join(missing[:8]) + (" ..." if len(missing) > 8 else ""))
    for group in GROUPS:
        if len(members[group]) < MIN_MEMBERS:
            raise RuntimeError(f"fin classifier {group}: {len(members[group])} of its labelled "
                               "scans are in the data directory, at least 3 are needed")
    import joblib

    staging = Path(tempfile.mkdtemp(prefix=".pointcloud_fin_rf.", dir=folder.parent))
    try:
        for group in GROUPS:
            logger.info("fin classifier %s: training on %d labelled scans", group,
                        len(members[group]))
            bundle = train_group(group, sorted(members[group]), labels, prepared, params)
            joblib.dump(bundle, staging / f"{group}.joblib")
        meta = {**ident, "groups": list(GROUPS), "labels": str(labels),
                "labels_used": {g: sorted(members[g]) for g in GROUPS}}
        (staging / "meta.json").write_text(json.dumps(meta, indent=2))
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(staging, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    if not params.get("keep_prepared", False):
        shutil.rmtree(prepared, ignore_errors=True)


def train_group(group: str, names: list[str], labels: Labels, prepared: Path,
                params: dict[str, Any]) -> dict[str, Any]:
    """One group's bundle: the position prior and consensus surface in the frame of its first
    scan, and a random forest on a seeded, balanced sample of its labelled pixels."""
    from sklearn.ensemble import RandomForestClassifier

    reference = _load(prepared, names[0]).valid[::registration.FACTOR, ::registration.FACTOR]
    moves: dict[str, tuple[int, float, float]] = {}
    targets: dict[str, np.ndarray] = {}
    sums: list[Any] = [None, None, None, None]
    for name in names:
        sample = _load(prepared, name)
        outlier = labels.mask(name) & sample.valid
        targets[name] = outlier
        xf = registration.register(sample.valid, reference)
        moves[name] = xf
        wall = sample.valid & ~outlier
        heights = np.nan_to_num(sample.z_mm.astype(np.float64), nan=0.0)
        parts = (registration.to_reference(outlier, *xf),
                 registration.to_reference(sample.valid, *xf),
                 registration.to_reference(np.where(wall, heights, 0.0), *xf, order=1),
                 registration.to_reference(wall.astype(float), *xf, order=1))
        sums = [p if s is None else s + p for s, p in zip(sums, parts, strict=True)]
    prior = np.clip(sums[0], 0, None) / np.clip(sums[1], 1, None)
    expected = sums[2] / np.clip(sums[3], 1e-3, None)

    rng = np.random.RandomState(SEED)
    y_parts = [targets[name][_load(prepared, name).valid].astype(np.int8) for name in names]
    offsets = np.concatenate([[0], np.cumsum([len(y) for y in y_parts])])
    y_all = np.concatenate(y_parts)
    outliers, inliers = np.nonzero(y_all == 1)[0], np.nonzero(y_all == 0)[0]
    if len(outliers) == 0:
        chosen = np.arange(len(y_all))
    else:
        n_in = min(len(inliers), int(len(outliers) * BALANCE_RATIO))
        chosen = np.concatenate([rng.choice(inliers, n_in, replace=False), outliers])
        if len(chosen) > MAX_TRAIN_ROWS:
            chosen = rng.choice(chosen, MAX_TRAIN_ROWS, replace=False)
    chosen.sort()

    x_train: np.ndarray | None = None
    names_out: list[str] = []
    for k, name in enumerate(names):
        local = chosen[(chosen >= offsets[k]) & (chosen < offsets[k + 1])]
        if len(local) == 0:
            continue
        sample = _load(prepared, name)
        base, base_names = features.base_matrix(
            features.base_features(sample.z_mm.astype(np.float64), sample.sim_distance,
                                   sample.lumi, sample.valid), sample.valid)
        extra = features.registered_matrix(sample.z_mm, sample.valid, prior, expected,
                                           moves[name], DX_MM, DY_MM)
        if x_train is None:
            names_out = base_names + list(features.REGISTERED)
            x_train = np.empty((len(chosen), len(names_out)), dtype=np.float32)
        x_train[np.searchsorted(chosen, local)] = np.hstack([base, extra])[local - offsets[k]]
    assert x_train is not None
    forest = RandomForestClassifier(n_estimators=int(params["rf_n_estimators"]),
                                    max_depth=int(params["rf_max_depth"]), n_jobs=-1,
                                    random_state=SEED)
    forest.fit(x_train, y_all[chosen])
    forest.set_params(n_jobs=1)
    return {"group": group, "model": forest, "feature_names": names_out,
            "prior_reg": prior.astype(np.float32), "expected_reg": expected.astype(np.float32),
            "ref_ds": reference}
