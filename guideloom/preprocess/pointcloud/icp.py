"""Rigid alignment of a scan to its simulation: point-to-point ICP in two passes (all points,
then the cup alone) and a final centring of the top deck, as rddac 2.0 aligns."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.spatial import cKDTree

logger = logging.getLogger(__name__)

VOXEL_MM = 0.35
#: Points moved at once by :func:`move` (in place: no second copy of the scan).
MOVE_BLOCK = 1 << 16
MIN_CUP_POINTS = 1000
MIN_SIM_CUP_POINTS = 100


#: One in-place step of an alignment: ``("move", (rotation, translation))``, ``("lower",
#: (dz,))`` (heights minus ``dz``) or ``("shift", (dxy,))`` (x and y plus ``dxy``).
Step = tuple[str, tuple[Any, ...]]


@dataclass(frozen=True)
class Alignment:
    """The aligned points and the one transform that gives them:
    ``points @ rotation.T + translation``; ``steps``, replayed on the same points
    (:func:`replay`), give ``aligned`` again bit for bit."""

    aligned: np.ndarray
    rotation: np.ndarray
    translation: np.ndarray
    stats: dict[str, Any]
    steps: tuple[Step, ...]


def apply(points: np.ndarray, step: Step) -> None:
    """Apply one :data:`Step` to ``points`` in place."""
    kind, args = step
    if kind == "move":
        move(points, *args)
    elif kind == "lower":
        points[:, 2] -= args[0]
    elif kind == "shift":
        points[:, :2] += args[0]
    else:
        raise ValueError(f"unknown alignment step {kind!r}")


def replay(points: np.ndarray, steps: tuple[Step, ...]) -> np.ndarray:
    """The steps of an :class:`Alignment` applied again to ``points`` in place (returned): the
    same operations in the same order, so the same ``aligned`` as the alignment's when
    ``points`` are the ones it aligned (a scan's points are made again from its grid, which
    costs less memory than keeping the aligned ones)."""
    for step in steps:
        apply(points, step)
    return points


def voxel_representatives(points: np.ndarray, voxel_mm: float = VOXEL_MM,
                          among: np.ndarray | None = None) -> np.ndarray:
    """The first point of every occupied ``voxel_mm`` voxel, in the points' order, among the
    points ``among`` selects (all without it; the selected points are never copied whole).

    A voxel's key is ``(x * span_y + y) * span_z + z`` of its cells counted from the lowest;
    the cells are made :data:`MOVE_BLOCK` points at a time, so only the keys exist for all.
    """
    count = len(points) if among is None else int(among.sum())
    keys = np.zeros(count, dtype=np.int64)
    for axis in range(3):
        lowest, highest = None, None
        for cells in _cells(points, axis, voxel_mm, among):
            if len(cells):
                low, high = int(cells.min()), int(cells.max())
                lowest = low if lowest is None else min(lowest, low)
                highest = high if highest is None else max(highest, high)
        if lowest is None or highest is None:
            continue
        keys *= highest - lowest + 1
        done = 0
        for cells in _cells(points, axis, voxel_mm, among):
            cells -= lowest
            keys[done:done + len(cells)] += cells
            done += len(cells)
    first = _first_of_each(keys)
    del keys
    return points[first if among is None else np.flatnonzero(among)[first]]


def _cells(points: np.ndarray, axis: int, voxel_mm: float, among: np.ndarray | None
           ) -> Iterator[np.ndarray]:
    """The voxel cells (int64) of the selected points along ``axis``, in order, in blocks."""
    for start in range(0, len(points), MOVE_BLOCK):
        column = points[start:start + MOVE_BLOCK, axis]
        if among is not None:
            column = column[among[start:start + MOVE_BLOCK]]
        yield np.round(column / voxel_mm).astype(np.int64)


def _first_of_each(keys: np.ndarray) -> np.ndarray:
    """Ascending positions of the first occurrence of each distinct key (``np.unique``'s
    ``return_index``, sorted); ``keys`` (non-negative) is overwritten.

    Each key becomes ``key * len(keys) + position`` and is sorted in place: the first of each
    run of equal keys is then its smallest position. Keys too large for that go through
    ``np.unique``.
    """
    count = len(keys)
    if count == 0:
        return np.empty(0, dtype=np.intp)
    if int(keys.max()) >= np.iinfo(np.int64).max // count - 1:
        return np.sort(np.unique(keys, return_index=True)[1])
    keys *= count
    for start in range(0, count, MOVE_BLOCK):
        keys[start:start + MOVE_BLOCK] += np.arange(start, min(start + MOVE_BLOCK, count))
    keys.sort()
    found = []
    previous = -1
    for start in range(0, count, MOVE_BLOCK):
        block = keys[start:start + MOVE_BLOCK]
        group = block // count
        new = np.empty(len(block), dtype=bool)
        new[0] = group[0] != previous
        np.not_equal(group[1:], group[:-1], out=new[1:])
        found.append(block[new] % count)
        previous = int(group[-1])
    return np.sort(np.concatenate(found))


def distance_stats(distances: np.ndarray) -> dict[str, float]:
    """Mean, spread, quartiles and box-plot whiskers of nearest-neighbour distances."""
    q1, q2, q3 = (float(np.percentile(distances, p)) for p in (25, 50, 75))
    iqr = q3 - q1
    return {
        "icp_mean_distance": float(np.mean(distances)),
        "icp_std_distance": float(np.std(distances)),
        "icp_median_distance": q2,
        "icp_q1_distance": q1,
        "icp_q3_distance": q3,
        "icp_whisker_low": float(max(np.min(distances), q1 - 1.5 * iqr)),
        "icp_whisker_high": float(min(np.max(distances), q3 + 1.5 * iqr)),
    }


def icp(source: np.ndarray, target_tree: cKDTree, iterations: int, sample: int, seed: int,
        among: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """``(R, t)`` moving ``source`` onto the tree's points: Kabsch updates on nearest pairs of
    a seeded sample of the voxel representatives of ``source`` (of its points ``among``
    selects, all without it)."""
    target = target_tree.data
    pool = voxel_representatives(source, among=among)
    rng = np.random.RandomState(seed)
    if len(pool) > sample:
        moving = pool[rng.choice(len(pool), sample, replace=False)]
    else:
        moving = pool.copy()
    rotation, translation = np.eye(3), np.zeros(3)
    for _ in range(iterations):
        matched = target[target_tree.query(moving)[1]]
        mean_src, mean_dst = moving.mean(axis=0), matched.mean(axis=0)
        u, _, vt = np.linalg.svd((moving - mean_src).T @ (matched - mean_dst))
        step = vt.T @ u.T
        if np.linalg.det(step) < 0:
            vt[-1, :] *= -1
            step = vt.T @ u.T
        shift = mean_dst - step @ mean_src
        moving = moving @ step.T + shift
        rotation = step @ rotation
        translation = step @ translation + shift
    return rotation, translation


def move(points: np.ndarray, rotation: np.ndarray, translation: np.ndarray) -> np.ndarray:
    """``points @ rotation.T + translation`` written over ``points`` (returned),
    :data:`MOVE_BLOCK` rows at a time: the same values as the whole product, row by row."""
    turn = rotation.T
    for start in range(0, len(points), MOVE_BLOCK):
        block = points[start:start + MOVE_BLOCK]
        block[...] = block @ turn
        block += translation
    return points


def distances(tree: cKDTree, xy: np.ndarray, heights: np.ndarray) -> np.ndarray:
    """Each point's (x and y in ``xy``, z in ``heights``) distance to the tree's nearest point,
    as float32, :data:`MOVE_BLOCK` points at a time (the query's float64 distances and indices
    never exist for all)."""
    out = np.empty(len(xy), dtype=np.float32)
    for start in range(0, len(xy), MOVE_BLOCK):
        stop = start + MOVE_BLOCK
        out[start:stop] = tree.query(np.column_stack((xy[start:stop], heights[start:stop])))[0]
    return out


def centre_height(points: np.ndarray, radius: float = 5.0, among: np.ndarray | None = None
                  ) -> float:
    """Median height within ``radius`` mm of the z axis (the nearest point's if none), of the
    points ``among`` selects (all without it; no copy of the selected points is made: the
    others' distances are set to infinity, which selects the same heights in the same order)."""
    dist = np.hypot(points[:, 0], points[:, 1])
    if among is not None:
        dist[~among] = np.inf
    near = dist < radius
    if not near.any():  # the first nearest of the selected (none selected: argmin raises)
        nearest = (np.argmin(dist) if among is None
                   else np.flatnonzero(among)[np.argmin(dist[among])])
        return float(points[nearest, 2])
    del dist
    return float(np.median(points[near, 2]))


def deck_centre(points: np.ndarray, above: float, among: np.ndarray | None = None
                ) -> np.ndarray | None:
    """Midpoint of the 0.5/99.5 percentile x/y extents of the points above ``above`` (None if
    fewer than 100), of the points ``among`` selects (all without it)."""
    high = points[:, 2] > above
    if among is not None:
        high &= among
    deck = points[high, :2]
    if len(deck) < 100:
        return None
    low, top = np.percentile(deck, [0.5, 99.5], axis=0)
    return np.asarray((low + top) / 2.0)


def align(points: np.ndarray, sim: np.ndarray, inlier: np.ndarray, *, anchor_height_mm: float,
          iterations: int, sample: int, seed: int) -> Alignment:
    """Align a scan to its simulation (all points move; only ``inlier`` ones are fitted). The
    points are moved in place: ``points`` is the returned alignment's ``aligned``.

    Pass 1 fits all inliers; pass 2 only the cup (points above the simulation's flange level,
    its 0.5th height percentile, plus ``anchor_height_mm``) on both sides; then the x/y centres of
    both top decks (2 mm below the simulation's top) are matched. After each step the height at
    the centre is set to the simulation's. A scan with too small a cup keeps pass 1.
    """
    up = np.array([0.0, 0.0, 1.0])
    steps: list[Step] = []

    def step(kind: str, *args: Any) -> None:
        steps.append((kind, args))
        apply(points, steps[-1])

    sim_tree = cKDTree(sim)
    sim_centre = centre_height(sim)
    rot1, t1 = icp(points, sim_tree, iterations, sample, seed, among=inlier)
    step("move", rot1, t1)
    dz1 = centre_height(points, among=inlier) - sim_centre
    step("lower", dz1)

    flange = float(np.percentile(sim[:, 2], 0.5)) + anchor_height_mm
    cup = inlier & (points[:, 2] > flange)
    sim_cup = sim[sim[:, 2] > flange]
    if cup.sum() < MIN_CUP_POINTS or len(sim_cup) < MIN_SIM_CUP_POINTS:
        logger.debug("cup of %d points: the first pass stands", int(cup.sum()))
        return Alignment(points, rot1, t1 - dz1 * up, {"n_anchor_points": int(cup.sum())},
                         tuple(steps))

    cup_tree = cKDTree(sim_cup)
    rot2, t2 = icp(points, cup_tree, iterations, sample, seed, among=cup)
    step("move", rot2, t2)
    dz2 = centre_height(points, among=inlier) - sim_centre
    step("lower", dz2)

    deck = float(sim[:, 2].max()) - 2.0
    scan_deck, sim_deck = deck_centre(points, deck, inlier), deck_centre(sim, deck)
    shift = np.zeros(2) if scan_deck is None or sim_deck is None else sim_deck - scan_deck
    step("shift", shift)
    dz3 = centre_height(points, among=inlier) - sim_centre
    step("lower", dz3)

    rotation = rot2 @ rot1
    translation = rot2 @ (t1 - dz1 * up) + t2 - dz2 * up + np.append(shift, -dz3)
    distances = cup_tree.query(voxel_representatives(points, among=cup))[0]
    stats: dict[str, Any] = {**distance_stats(distances), "n_anchor_points": int(cup.sum()),
                             "deck_shift_x": float(shift[0]), "deck_shift_y": float(shift[1])}
    return Alignment(points, rotation, translation, stats, tuple(steps))
