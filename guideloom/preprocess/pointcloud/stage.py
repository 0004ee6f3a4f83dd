"""One experiment's point clouds, cleaned and aligned: both operations of the raw scan in, the
``pointcloud`` group of the processed file out (rddac 2.0's schema)."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
from scipy.spatial import cKDTree

from guideloom.preprocess.pointcloud import cleaning, features, grid, icp, means, registration
from guideloom.preprocess.pointcloud.params import DX_MM, DY_MM, SEED
from guideloom.preprocess.pointcloud.simulations import Simulations
from guideloom.runtime import os_support

logger = logging.getLogger(__name__)

OPS = ("op10", "op20")
GZIP = {"compression": "gzip", "compression_opts": 4}
#: Rows the fin classifier predicts at once.
PREDICT_ROWS = 1 << 16


class Timings(dict[str, float]):
    """Seconds spent per phase (``filtering``, ``classifier``, ``icp``), summed over calls."""

    def add(self, phase: str, since: float) -> float:
        now = time.perf_counter()
        self[phase] = self.get(phase, 0.0) + now - since
        return now


def process(raw: Any, out: Any, params: Mapping[str, Any], sims: Simulations,
            bundles: Mapping[str, dict[str, Any]], timings: Timings | None = None) -> str:
    """Write ``out['pointcloud']`` from ``raw``; ``"no_group"`` when the raw file has no scans."""
    if "pointcloud" not in raw:
        return "no_group"
    geometry = str(raw.attrs["geometry"])
    sheet_mean, oil_mean, source = means.for_matching(raw, out)
    match = sims.match(geometry, int(raw.attrs["blankholder_force"]), sheet_mean, oil_mean)
    group = out.create_group("pointcloud")
    attrs = {"simulation_id": match["simulation_id"], "matched_shtk": match["matched_shtk"],
             "matched_fc": match["matched_fc"], "matching_error_shtk": match["error_shtk"],
             "matching_error_fc": match["error_fc"], "measured_sheet_thickness_mean": sheet_mean,
             "measured_oil_thickness_mean": oil_mean, "matching_means_source": source}
    group.attrs.update(attrs)
    for op in OPS:
        sim = sims.points(match["simulation_id"], op)
        clean_op(raw, group.create_group(op), op, geometry, sim, bundles[f"{geometry}_{op}"],
                 params, timings if timings is not None else Timings())
    return "processed"


def clean_op(raw: Any, target: Any, op: str, geometry: str, sim: np.ndarray,
             bundle: dict[str, Any], p: Mapping[str, Any], timings: Timings) -> None:
    """Clean and align one operation's scan into the group ``target``.

    Every array is dropped as soon as it is no longer needed (the raw luminescence once the
    packed and the scaled luminescence are made; the neighbour lists once used), and the
    classifier's features are made and predicted strip by strip (:func:`.features.strips`),
    :data:`PREDICT_ROWS` rows at a time at most. The raw heights (4 bytes a pixel) are kept
    instead of the points (24 bytes a point): the points are made from them where they are
    needed, as x/y and heights apart for the k-d trees in the plane (which then read them
    without a copy), and the aligned points are made again for the last sweep by replaying the
    alignment (:func:`.icp.replay`), so they do not exist while the classifier runs. Where a
    step has dropped arrays of all points, the heap's free pages go back to the operating
    system (:func:`guideloom.runtime.os_support.trim_heap`): glibc keeps the pages of freed
    blocks below its mapping threshold (which it raises to 32 MiB as large arrays come and
    go), and the next step's arrays, of other sizes, do not always fit where they were.
    """
    from guideloom.preprocess.pointcloud.model import read_scan

    started = time.perf_counter()
    z, lumi = read_scan(raw, op)
    max_angle = float(p["max_wall_angle_concave_deg"] if geometry == "concave"
                      else p["max_wall_angle_convex_deg"])
    min_component = int(p["min_component_size"])
    valid = grid.surface_mask(lumi, z, int(p["lumi_min_patch_size"]))
    if not valid.any():
        raise ValueError(f"pointcloud/{op}: no valid surface pixel")
    packed = grid.packed_luminescence(lumi, valid)
    lumi_grid = grid.luminescence_grid(lumi, valid)
    del lumi
    os_support.trim_heap()
    xy, heights = grid.scan_columns(z, valid)
    tree = cKDTree(xy, copy_data=False)  # the tree reads ``xy``: no copy of it
    steep = cleaning.steep_seeds(xy, heights, tree, int(p["k_angle"]), max_angle)
    del tree, xy, heights
    os_support.trim_heap()
    points = grid.scan_points(z, valid)
    small = cleaning.small_component_seeds(points, min_component)
    before_icp = steep | small
    started = timings.add("filtering", started)

    anchor = float(p["icp_anchor_height_mm"])
    fit = icp.align(points, sim, ~before_icp, anchor_height_mm=anchor,
                    iterations=int(p["icp_max_iterations"]), sample=int(p["icp_sample_size"]),
                    seed=SEED)
    del points
    os_support.trim_heap()
    rotation, translation, fit_stats, steps = fit.rotation, fit.translation, fit.stats, fit.steps
    # x and y apart, contiguous: the k-d tree reads them without a copy
    xy, heights = np.ascontiguousarray(fit.aligned[:, :2]), fit.aligned[:, 2].copy()
    del fit
    os_support.trim_heap()
    started = timings.add("icp", started)

    tree = cKDTree(xy, copy_data=False)
    rising = cleaning.rising_seeds(xy, heights, tree, int(p["k_mono"]),
                                   float(p["z_tolerance_mm"]))
    os_support.trim_heap()
    closing = cleaning.neighbours(tree, xy, int(p["k_closing"]))
    del tree
    geometric, rounds = cleaning.closed(before_icp | rising, closing, int(p["max_closing_iter"]))
    del closing
    os_support.trim_heap()
    started = timings.add("filtering", started)

    z_grid = grid.on_grid(heights, valid)
    sim_distance = grid.on_grid(icp.distances(cKDTree(sim), xy, heights), valid)
    del xy, heights  # made again from the raw heights for the last sweep (icp.replay)
    os_support.trim_heap()
    started = timings.add("icp", started)
    xf = registration.register(valid, bundle["ref_ds"])
    registered = features.registered_matrix(z_grid, valid, bundle["prior_reg"],
                                            bundle["expected_reg"], xf, DX_MM, DY_MM)
    fins = np.empty(len(registered), dtype=bool)
    done = 0
    for x in features.strips(z_grid, sim_distance, lumi_grid, valid, registered):
        fins[done:done + len(x)] = _predict(bundle["model"], x, float(p["rf_threshold"]))
        done += len(x)
        del x
    del z_grid, sim_distance, lumi_grid, registered
    os_support.trim_heap()
    started = timings.add("classifier", started)

    removed = geometric | fins
    aligned = icp.replay(grid.scan_points(z, valid), steps)
    del z
    kept = compact(aligned, ~removed)  # the aligned points' first rows: no second copy
    del aligned
    swept = cleaning.small_component_seeds(kept, min_component)
    final = np.empty((len(kept) - int(swept.sum()), 3), dtype=np.float32)
    for axis in range(3):  # a column at a time: no float64 copy of the kept points
        final[:, axis] = kept[~swept, axis]
    del kept
    os_support.trim_heap()
    timings.add("filtering", started)

    target.create_dataset("z", data=final, **GZIP)
    target.create_dataset("luminescence", data=packed, **GZIP)
    n_valid = int(valid.sum())
    target.attrs.update({
        "x_mm_per_pixel": grid.X_MM_PER_PIXEL, "y_mm_per_pixel": grid.Y_MM_PER_PIXEL,
        "z_mm_per_unit": grid.Z_MM_PER_UNIT, "icp_rotation": rotation,
        "icp_translation": translation, "icp_anchor_height_mm": anchor, **fit_stats,
        "n_valid_pixels": n_valid, "n_angle_seeds": int(steep.sum()),
        "n_component_seeds": int(small.sum()), "n_mono_seeds": int(rising.sum()),
        "n_geometric_outliers": int(geometric.sum()), "closing_iterations": rounds,
        "n_rf_removed": int(fins.sum()), "n_final_sweep": int(swept.sum()),
        "n_final_points": len(final),
        "outlier_pct": 100.0 * float(removed.sum()) / max(n_valid, 1),
        "rf_threshold": float(p["rf_threshold"]),
        "registration_theta_dy_dx": np.array(xf, dtype=np.float64)})
    logger.debug("%s: %d of %d points kept", op, len(final), n_valid)


def compact(rows: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The rows of ``rows`` where ``keep`` is true, in order, moved in place to its first rows
    (:data:`.cleaning.BLOCK` at a time): a view of ``rows``, whose other rows are left as
    they were. Equal to ``rows[keep]`` without a second copy of the kept rows."""
    written = 0
    for start in range(0, len(rows), cleaning.BLOCK):
        block = rows[start:start + cleaning.BLOCK][keep[start:start + cleaning.BLOCK]]
        rows[written:written + len(block)] = block  # written <= start: nothing unread is hit
        written += len(block)
    return rows[:written]


def _predict(forest: Any, x: np.ndarray, threshold: float) -> np.ndarray:
    """Rows of ``x`` whose fin probability reaches ``threshold``, :data:`PREDICT_ROWS` at a
    time (the forest's per-tree probabilities never exist for the whole scan)."""
    if getattr(forest, "n_jobs", 1) != 1:
        forest.set_params(n_jobs=1)
    fins = np.empty(len(x), dtype=bool)
    for start in range(0, len(x), PREDICT_ROWS):
        fins[start:start + PREDICT_ROWS] = (
            forest.predict_proba(x[start:start + PREDICT_ROWS])[:, 1] >= threshold)
    return fins
