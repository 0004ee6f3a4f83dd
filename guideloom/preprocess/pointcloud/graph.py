"""The k-nearest-neighbour graph of a scan's points, held small: each neighbour as a 16-bit
offset from its point.

A scan's points come row by row, so a point's nearest neighbours in the plane are a few rows
away at most: their indices differ from the point's by a few thousand. :class:`Neighbours` keeps
those differences as ``int16`` (2 bytes a neighbour instead of the 4 of ``int32`` indices, 8
of numpy's default ones); the rare neighbour farther away (across a gap in the surface) is kept
apart, as its row and its index. Dilation and erosion on the graph (:meth:`Neighbours.any_of`,
:meth:`Neighbours.all_of`) give what ``mask[indices].any(axis=1)`` / ``.all(axis=1)`` give on
the full index lists, with the point itself among its neighbours (see the methods).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

logger = logging.getLogger(__name__)

#: The largest offset kept in the table (one more stands for "look in the far list").
LIMIT = int(np.iinfo(np.int16).max)
#: Rows gathered at once by :meth:`Neighbours.any_of` / :meth:`Neighbours.all_of`.
ROWS = 1 << 14


@dataclass(frozen=True)
class Neighbours:
    """Each point's neighbours as offsets (``index - point``).

    Attributes:
        offsets: ``(points, k)`` int16; 0 (the point itself) where the neighbour is too far to
            fit, which is then in the far lists.
        far_rows: The points of the neighbours too far for ``offsets`` (ascending).
        far_cols: Their columns in ``offsets``.
        far_index: Those neighbours' indices.
    """

    offsets: np.ndarray
    far_rows: np.ndarray
    far_cols: np.ndarray
    far_index: np.ndarray

    @classmethod
    def from_blocks(cls, count: int, k: int, blocks: Iterable[tuple[int, np.ndarray]]
                    ) -> Neighbours:
        """The graph of ``count`` points from ``(start, indices)`` blocks covering them in
        order, ``indices`` being ``(rows, k)`` neighbour indices of points ``start..``."""
        offsets = np.empty((count, k), dtype=np.int16)
        far_rows: list[np.ndarray] = []
        far_cols: list[np.ndarray] = []
        far_index: list[np.ndarray] = []
        for start, indices in blocks:
            rows = np.arange(start, start + len(indices))
            delta = indices - rows[:, None]
            far = np.abs(delta) > LIMIT
            if far.any():
                where_row, where_col = np.nonzero(far)
                far_rows.append(rows[where_row])
                far_cols.append(where_col)
                far_index.append(indices[where_row, where_col])
                delta[far] = 0
            offsets[start:start + len(indices)] = delta
        found = sum(len(r) for r in far_rows)
        if found:
            logger.debug("%d neighbours too far for 16-bit offsets", found)
        return cls(offsets, *(np.concatenate(parts) if parts else np.empty(0, dtype=np.intp)
                              for parts in (far_rows, far_cols, far_index)))

    def __len__(self) -> int:
        return len(self.offsets)

    def indices(self) -> np.ndarray:
        """The full ``(points, k)`` neighbour indices (for tests and small graphs)."""
        out = self.offsets.astype(np.intp) + np.arange(len(self))[:, None]
        out[self.far_rows, self.far_cols] = self.far_index
        return out

    def any_of(self, mask: np.ndarray) -> np.ndarray:
        """Per point, whether ``mask`` holds for any neighbour or the point itself."""
        return self._each(mask, np.any, np.logical_or)

    def all_of(self, mask: np.ndarray) -> np.ndarray:
        """Per point, whether ``mask`` holds for every neighbour and the point itself."""
        return self._each(mask, np.all, np.logical_and)

    def _each(self, mask: np.ndarray, reduce: Callable[..., np.ndarray], join: np.ufunc
              ) -> np.ndarray:
        """``reduce`` over each point's neighbours (:data:`ROWS` points at a time), then
        ``join``-ed with the far neighbours and the point itself."""
        out = np.empty(len(self), dtype=bool)
        for start in range(0, len(self), ROWS):
            out[start:start + ROWS] = reduce(self._gather(mask, start), axis=1)
        join.at(out, self.far_rows, mask[self.far_index])
        join(out, mask, out=out)
        return out

    def _gather(self, mask: np.ndarray, start: int) -> np.ndarray:
        offsets = self.offsets[start:start + ROWS]
        index = offsets.astype(np.intp)
        index += np.arange(start, start + len(offsets))[:, None]
        return mask[index]
