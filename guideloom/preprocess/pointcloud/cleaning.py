"""Geometric outlier seeds on a scan's points and their closing: steep local planes, points
rising outward, small 3-D components; then dilation and erosion on the k-nearest-neighbour graph.

The neighbourhood work runs in blocks of :data:`BLOCK` points, so a worker's memory stays a
small multiple of the scan instead of growing with ``points x k``.
"""

from __future__ import annotations

import logging

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

logger = logging.getLogger(__name__)

BLOCK = 1 << 17


def neighbours(tree: cKDTree, xy: np.ndarray, k: int) -> np.ndarray:
    """``(N, k + 1)`` int32 indices of each point's nearest neighbours in the plane (itself
    first)."""
    out = np.empty((len(xy), k + 1), dtype=np.int32)
    for start in range(0, len(xy), BLOCK):
        out[start:start + BLOCK] = tree.query(xy[start:start + BLOCK], k=k + 1)[1]
    return out


def steep_seeds(points: np.ndarray, nbrs: np.ndarray, max_angle_deg: float) -> np.ndarray:
    """Points whose local plane (fitted to their neighbours) tilts more than ``max_angle_deg``.

    The plane normal is the eigenvector of the smallest eigenvalue of the neighbourhood's
    scatter matrix (the last right-singular vector of the centred neighbours).
    """
    seeds = np.empty(len(points), dtype=bool)
    for start in range(0, len(points), BLOCK):
        block = points[nbrs[start:start + BLOCK]]
        block -= block.mean(axis=1, keepdims=True)
        scatter = np.einsum("nki,nkj->nij", block, block)
        normal_z = np.linalg.eigh(scatter)[1][:, 2, 0]
        angle = np.degrees(np.arccos(np.clip(np.abs(normal_z), 0, 1)))
        seeds[start:start + BLOCK] = angle > max_angle_deg
    return seeds


def rising_seeds(points: np.ndarray, nbrs: np.ndarray, tolerance_mm: float) -> np.ndarray:
    """Points more than ``tolerance_mm`` above the median of their inward neighbours (more than
    two of them), inward meaning closer to the centre of the highest fifth of the points."""
    top = points[:, 2] >= np.percentile(points[:, 2], 80)
    centre = points[top, :2].mean(axis=0)
    radius = np.hypot(points[:, 0] - centre[0], points[:, 1] - centre[1])
    seeds = np.empty(len(points), dtype=bool)
    for start in range(0, len(points), BLOCK):
        stop = min(start + BLOCK, len(points))
        others = nbrs[start:stop, 1:]
        inward = radius[others] < (radius[start:stop, None] - 0.1)
        count = inward.sum(axis=1)
        heights = np.sort(np.where(inward, points[others, 2], np.nan), axis=1)
        rows = np.arange(stop - start)
        low = heights[rows, np.maximum(count - 1, 0) // 2]
        high = heights[rows, np.maximum(count, 1) // 2 * (count > 0)]
        median = (low + high) / 2
        seeds[start:stop] = (count > 2) & (points[start:stop, 2] - median > tolerance_mm)
    return seeds


def small_component_seeds(points: np.ndarray, min_size: int) -> np.ndarray:
    """Points of 3-D components smaller than ``min_size``; points closer than three times the
    median nearest-neighbour distance are connected."""
    n = len(points)
    tree = cKDTree(points)
    nearest = np.empty(n)
    for start in range(0, n, BLOCK):
        nearest[start:start + BLOCK] = tree.query(points[start:start + BLOCK], k=2)[0][:, 1]
    pairs = tree.query_pairs(r=float(np.median(nearest)) * 3, output_type="ndarray")
    graph = coo_matrix((np.ones(len(pairs), dtype=bool), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    _, labels = connected_components(graph.tocsr(), directed=False)
    return (np.bincount(labels) < min_size)[labels]


def closed(seeds: np.ndarray, nbrs: np.ndarray, max_iter: int) -> tuple[np.ndarray, int]:
    """Dilate then erode ``seeds`` on the neighbour graph until stable (at most ``max_iter``
    rounds); returns the mask and the rounds run."""
    others = nbrs[:, 1:]
    mask = seeds.copy()
    rounds = 0
    while rounds < max_iter:
        rounds += 1
        before = int(mask.sum())
        mask |= mask[others].any(axis=1)
        mask &= mask[others].all(axis=1)
        if int(mask.sum()) == before:
            break
    return mask, rounds
