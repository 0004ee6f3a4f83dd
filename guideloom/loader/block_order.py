"""An epoch's shuffled order computed a block of positions at a time.

The shuffle (:class:`~guideloom.shuffle.FeistelShuffler`) maps positions to sample indices with
a few vectorised rounds per call; each call costs about a millisecond whatever its size, so a
batch of 256 positions paid more for its order than for reading its rows. :class:`BlockOrder`
asks the shuffle for :data:`BLOCK` positions at once and serves the batches of that block from
the result. The order is the same function of the position (nothing is stored in the loader's
state), so resuming is unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import numpy as np

logger = logging.getLogger(__name__)

BLOCK = 1 << 14  # positions mapped per call of the shuffle (128 KiB of indices)


class BlockOrder:
    """``order(positions)`` of a shuffle over ``n`` samples, one block of positions mapped
    at a time (the last block kept).

    Args:
        order: The epoch's map from positions (``int64`` array) to sample indices.
        n: The number of positions it maps (``range(n)``).
        block: Positions per block.
    """

    def __init__(self, order: Callable[[np.ndarray], np.ndarray], n: int, block: int = BLOCK):
        self._order, self._n, self._block = order, n, max(1, block)
        self._first = -1  # the first position of the block held
        self._indices = np.empty(0, dtype=np.int64)

    def __call__(self, positions: np.ndarray) -> np.ndarray:
        """Sample indices of ``positions`` (ascending, as a loader's step has them)."""
        if not len(positions):
            return self._order(positions)
        first = int(positions[0]) // self._block * self._block
        if int(positions[-1]) >= first + self._block:  # spans two blocks: mapped directly
            return self._order(positions)
        if first != self._first:
            span = np.arange(first, min(first + self._block, self._n), dtype=np.int64)
            self._indices, self._first = self._order(span), first
            logger.debug("order of positions %d..%d mapped", first, first + len(span) - 1)
        return self._indices[positions - first]
