"""The pointcloud stage's neighbour graph held as 16-bit offsets (``pointcloud/graph.py``): the
same neighbours, the same dilation, erosion and closing as the full index lists give, neighbours
too far for 16 bits included."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial import cKDTree

from guideloom.preprocess.pointcloud import cleaning, graph


def _scan_like(rng: np.random.Generator) -> np.ndarray:
    """Points row by row on a jittered grid, and a few points listed after 40,000 others but
    lying next to the first ones: their neighbours are more than 32,767 indices away."""
    rows, cols = np.mgrid[0:250, 0:170]
    grid = np.column_stack([cols.ravel() * 0.077, rows.ravel() * 0.158])
    grid += rng.normal(scale=0.01, size=grid.shape)
    near_start = grid[:6] + rng.normal(scale=0.02, size=(6, 2))
    return np.vstack([grid, near_start])


def _reference_closing(seeds: np.ndarray, others: np.ndarray, max_iter: int
                       ) -> tuple[np.ndarray, int]:
    """The closing on full index lists: rddac's dilation and erosion, as written before."""
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


@pytest.fixture
def points() -> np.ndarray:
    return _scan_like(np.random.default_rng(39))


def test_offsets_hold_the_neighbours(points: np.ndarray, monkeypatch: pytest.MonkeyPatch
                                     ) -> None:
    """The graph's neighbours are the query's (after the point itself), in order, the far ones
    among them; the table is int16."""
    monkeypatch.setattr(cleaning, "BLOCK", 1000)
    tree = cKDTree(points)
    nbrs = cleaning.neighbours(tree, points, 8)
    assert nbrs.offsets.dtype == np.int16
    assert nbrs.offsets.shape == (len(points), 8)
    want = tree.query(points, k=9)[1][:, 1:]
    assert np.array_equal(nbrs.indices(), want)
    assert len(nbrs.far_rows) > 0  # the test holds far neighbours
    far = np.abs(want - np.arange(len(points))[:, None]) > graph.LIMIT
    assert int(far.sum()) == len(nbrs.far_rows)


@pytest.mark.parametrize("rows", [97, 1 << 14])
def test_dilation_erosion_and_closing_are_the_full_lists(points: np.ndarray, rows: int,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``any_of``/``all_of`` with the point itself are ``mask | mask[others].any(1)`` and
    ``mask & mask[others].all(1)``, and the closing is the full lists' closing (masks, rounds),
    whatever the rows gathered at once."""
    monkeypatch.setattr(graph, "ROWS", rows)
    tree = cKDTree(points)
    nbrs = cleaning.neighbours(tree, points, 8)
    others = tree.query(points, k=9)[1][:, 1:]
    rng = np.random.default_rng(rows)
    for share in (0.02, 0.3, 0.9):
        mask = rng.random(len(points)) < share
        mask[-6:] = [True, False, True, False, False, True]  # the far points vary too
        assert np.array_equal(nbrs.any_of(mask), mask | mask[others].any(axis=1))
        assert np.array_equal(nbrs.all_of(mask), mask & mask[others].all(axis=1))
        for max_iter in (1, 15):
            got, got_rounds = cleaning.closed(mask, nbrs, max_iter)
            want, want_rounds = _reference_closing(mask, others, max_iter)
            assert np.array_equal(got, want)
            assert got_rounds == want_rounds
