"""Geometric outlier seeds on a scan's points and their closing: steep local planes, points
rising outward, small 3-D components; then dilation and erosion on the k-nearest-neighbour graph.

The neighbourhood work runs in blocks of :data:`BLOCK` points, and the neighbour lists of the
seeds and the pairs of the components are made block by block, so a worker's memory stays a
small multiple of the scan instead of growing with ``points x k``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components
from scipy.spatial import cKDTree

from guideloom.preprocess.pointcloud.graph import Neighbours

logger = logging.getLogger(__name__)

BLOCK = 1 << 14
#: Points whose pairs are found at once.
PAIR_BLOCK = 1 << 14
#: Points per y range kept for finding a block's neighbours (:func:`_around`).
CHUNK = 1024


def neighbours(tree: cKDTree, xy: np.ndarray, k: int) -> Neighbours:
    """Each point's ``k`` nearest neighbours in the plane after itself (the query's first),
    as 16-bit offsets (:class:`.graph.Neighbours`)."""
    return Neighbours.from_blocks(len(xy), k, ((start, block[:, 1:])
                                               for start, block in _blocks(tree, xy, k)))


def _blocks(tree: cKDTree, xy: np.ndarray, k: int) -> Iterator[tuple[int, np.ndarray]]:
    """``(start, indices)`` of the ``k + 1`` nearest neighbours of each :data:`BLOCK` of
    points: the neighbour lists are never held for all points at once."""
    for start in range(0, len(xy), BLOCK):
        yield start, tree.query(xy[start:start + BLOCK], k=k + 1)[1]


def steep_seeds(xy: np.ndarray, heights: np.ndarray, tree: cKDTree, k: int,
                max_angle_deg: float) -> np.ndarray:
    """Points (x and y in ``xy``, z in ``heights``) whose local plane (fitted to their ``k``
    nearest neighbours in the plane, ``tree`` holding ``xy``) tilts more than
    ``max_angle_deg``.

    The plane normal is the eigenvector of the smallest eigenvalue of the neighbourhood's
    scatter matrix (the last right-singular vector of the centred neighbours).
    """
    seeds = np.empty(len(xy), dtype=bool)
    for start, nbrs in _blocks(tree, xy, k):
        block = np.empty((*nbrs.shape, 3))
        block[..., :2] = xy[nbrs]
        block[..., 2] = heights[nbrs]
        del nbrs
        block -= block.mean(axis=1, keepdims=True)
        scatter = np.einsum("nki,nkj->nij", block, block)
        del block
        normal_z = np.linalg.eigh(scatter)[1][:, 2, 0]
        angle = np.degrees(np.arccos(np.clip(np.abs(normal_z), 0, 1)))
        seeds[start:start + len(angle)] = angle > max_angle_deg
    return seeds


def rising_seeds(xy: np.ndarray, heights: np.ndarray, tree: cKDTree, k: int,
                 tolerance_mm: float) -> np.ndarray:
    """Points (x and y in ``xy``, z in ``heights``) more than ``tolerance_mm`` above the median
    of their inward neighbours (more than two of their ``k`` nearest in the plane, ``tree``
    holding ``xy``), inward meaning closer to the centre of the highest fifth of the points."""
    top = heights >= np.percentile(heights, 80)
    centre = xy[top].mean(axis=0)
    del top
    radius = xy[:, 0] - centre[0]
    for start in range(0, len(xy), BLOCK):  # no second column of all points
        part = radius[start:start + BLOCK]
        np.hypot(part, xy[start:start + BLOCK, 1] - centre[1], out=part)
    seeds = np.empty(len(xy), dtype=bool)
    for start, nbrs in _blocks(tree, xy, k):
        stop = start + len(nbrs)
        others = nbrs[:, 1:]
        inward = radius[others] < (radius[start:stop, None] - 0.1)
        count = inward.sum(axis=1)
        ordered = np.sort(np.where(inward, heights[others], np.nan), axis=1)
        rows = np.arange(stop - start)
        low = ordered[rows, np.maximum(count - 1, 0) // 2]
        high = ordered[rows, np.maximum(count, 1) // 2 * (count > 0)]
        median = (low + high) / 2
        seeds[start:stop] = (count > 2) & (heights[start:stop] - median > tolerance_mm)
    return seeds


def small_component_seeds(points: np.ndarray, min_size: int) -> np.ndarray:
    """Points of 3-D components smaller than ``min_size``; points closer than three times the
    median nearest-neighbour distance are connected.

    The pairs are found per :data:`PAIR_BLOCK` points (among the points that can reach them)
    and merged into the components found so far, so the pair list never exists for the whole
    scan; the points that can reach a block are looked for only in the chunks of
    :data:`CHUNK` points whose y range meets the block's (a scan's points come row by row, so
    a block's neighbours are a few chunks, not the whole scan).
    """
    n = len(points)
    points = np.ascontiguousarray(points, dtype=np.float64)
    tree = cKDTree(points, copy_data=False)  # the tree reads the points: no copy of them
    nearest = np.empty(n)
    for start in range(0, n, BLOCK):
        nearest[start:start + BLOCK] = tree.query(points[start:start + BLOCK], k=2)[0][:, 1]
    del tree
    radius = float(np.median(nearest)) * 3
    del nearest
    chunks = _chunk_ranges(points[:, 1])
    component = np.arange(n, dtype=np.int64 if n > np.iinfo(np.int32).max else np.int32)
    for start in range(0, n, PAIR_BLOCK):
        near = _around(points, points[start:start + PAIR_BLOCK], radius, chunks)
        pairs = cKDTree(points[near]).query_pairs(r=radius, output_type="ndarray")
        first = component[near[pairs[:, 0]]]
        second = component[near[pairs[:, 1]]]
        del pairs, near
        _merge(component, first, second)
        del first, second
    return (np.bincount(component, minlength=n) < min_size)[component]


def _chunk_ranges(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The smallest and largest ``y`` of each :data:`CHUNK` of points, in order."""
    starts = np.arange(0, len(y), CHUNK)
    if not len(starts):
        return np.empty(0), np.empty(0)
    return np.minimum.reduceat(y, starts), np.maximum.reduceat(y, starts)


def _around(points: np.ndarray, block: np.ndarray, radius: float,
            chunks: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    """Indices (ascending) of the points within ``radius`` of the block's bounding box (every
    point that can pair with one of the block), looked for in the chunks whose y range
    (``chunks``: :func:`_chunk_ranges`) meets the box's."""
    low, high = block.min(axis=0) - radius, block.max(axis=0) + radius
    lowest, highest = chunks
    hit = np.flatnonzero((highest >= low[1]) & (lowest <= high[1]))
    candidates = (hit[:, None] * CHUNK + np.arange(CHUNK)).ravel()
    candidates = candidates[candidates < len(points)]
    inside = points[candidates]
    keep = ((inside[:, 1] >= low[1]) & (inside[:, 1] <= high[1])
            & (inside[:, 0] >= low[0]) & (inside[:, 0] <= high[0])
            & (inside[:, 2] >= low[2]) & (inside[:, 2] <= high[2]))
    return candidates[keep]


def _merge(component: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """Join, in place, the components of each pair ``(a[m], b[m])`` of representatives
    (``component`` maps each point to its component's representative, the component's
    smallest point index)."""
    differ = a != b
    if not differ.any():
        return
    nodes, inverse = np.unique(np.concatenate([a[differ], b[differ]]), return_inverse=True)
    half = int(differ.sum())
    graph = coo_matrix((np.ones(half, dtype=bool), (inverse[:half], inverse[half:])),
                       shape=(len(nodes), len(nodes)))
    count, joined = connected_components(graph.tocsr(), directed=False)
    representative = np.full(count, len(component), dtype=component.dtype)
    np.minimum.at(representative, joined, nodes)
    remap = np.arange(len(component), dtype=component.dtype)
    remap[nodes] = representative[joined]
    component[:] = remap[component]


def closed(seeds: np.ndarray, graph: Neighbours, max_iter: int) -> tuple[np.ndarray, int]:
    """Dilate then erode ``seeds`` on the neighbour graph until stable (at most ``max_iter``
    rounds); returns the mask and the rounds run.

    A round is ``mask |= mask[others].any(axis=1)`` then ``mask &= mask[others].all(axis=1)``
    on the neighbour lists ``others``; the graph's :meth:`~.graph.Neighbours.any_of` and
    :meth:`~.graph.Neighbours.all_of` count the point itself, which the ``|=`` and ``&=`` do.
    """
    mask = seeds.copy()
    rounds = 0
    while rounds < max_iter:
        rounds += 1
        before = int(mask.sum())
        mask = graph.any_of(mask)
        mask = graph.all_of(mask)
        if int(mask.sum()) == before:
            break
    return mask, rounds
