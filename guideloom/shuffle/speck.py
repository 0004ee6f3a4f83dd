"""The Feistel network GuideLoom 1.1 shuffles with, vectorised over NumPy ``uint64`` arrays.

An index ``x < a * a`` (``a = isqrt(n - 1) + 1``) is split into ``x % a`` and ``x // a``; each
round adds, modulo ``a``, the Speck64/128 encryption of one half (under that round's key
schedule) to the other half. Indices that land at or beyond ``n`` are encrypted again
(cycle-walking). The round keys expand a 64-bit seed with the Speck64/128 key schedule, the key
words being ``(seed, round)`` as two little-endian 64-bit integers. This is the construction of
the ``gfc`` generalized Feistel cipher (Maxime Mouchet, MIT licence) that GuideLoom 1.1 uses; the
same seed, size and rounds give the same permutation, which a test checks against GuideLoom 1.1.

All arithmetic wraps like C's unsigned integers, as the original does.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["SpeckNetwork"]

_M32 = 0xFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF
_STEPS = 27  # Speck64/128 rounds per block encryption


def _ror8(x: int) -> int:
    return ((x >> 8) | (x << 24)) & _M32


def _rol3(x: int) -> int:
    return ((x << 3) | (x >> 29)) & _M32


def round_keys(seed: int, rounds: int) -> np.ndarray:
    """Return the ``(rounds, 27)`` uint32 Speck key schedules for ``seed`` (one per round)."""
    keys = np.empty((rounds, _STEPS), dtype=np.uint32)
    for j in range(rounds):
        words = [(seed >> 32) & _M32, j & _M32, (j >> 32) & _M32]  # l0, l1, l2
        k = seed & _M32
        keys[j, 0] = k
        for i in range(_STEPS - 1):
            slot = i % 3
            word = ((_ror8(words[slot]) + k) & _M32) ^ i
            k = _rol3(k) ^ word
            words[slot] = word
            keys[j, i + 1] = k
    return keys


def _speck(block: np.ndarray, keys: np.ndarray) -> np.ndarray:
    """Encrypt ``uint64`` blocks with one 27-step Speck64 key schedule."""
    lo = (block & np.uint64(_M32)).astype(np.uint32)
    hi = (block >> np.uint64(32)).astype(np.uint32)
    eight, twenty_four, three, twenty_nine = (np.uint32(v) for v in (8, 24, 3, 29))
    for key in keys:
        hi = (((hi >> eight) | (hi << twenty_four)) + lo) ^ key
        lo = ((lo << three) | (lo >> twenty_nine)) ^ hi
    return (hi.astype(np.uint64) << np.uint64(32)) | lo.astype(np.uint64)


class SpeckNetwork:
    """The permutation of ``range(n)`` for a seed and a number of rounds.

    Args:
        n: Size of the permuted range.
        seed: The 64-bit seed of the round keys.
        rounds: Feistel rounds.
    """

    def __init__(self, n: int, seed: int, rounds: int) -> None:
        self.n = n
        self._a = math.isqrt(n - 1) + 1 if n else 0
        self._side = np.uint64(self._a)
        self._keys = round_keys(int(seed), rounds)
        self._key_lists = [[int(k) for k in keys] for keys in self._keys]
        self._odd = rounds % 2 == 1

    # ---- one index at a time, in Python integers (much faster than size-1 arrays)
    @staticmethod
    def _speck_int(block: int, keys: list[int]) -> int:
        lo, hi = block & _M32, block >> 32
        for key in keys:
            hi = ((((hi >> 8) | (hi << 24)) + lo) & _M32) ^ key
            lo = (((lo << 3) | (lo >> 29)) & _M32) ^ hi
        return (hi << 32) | lo

    def _forward_int_once(self, x: int) -> int:
        a = self._a
        left, right = x % a, x // a
        for keys in self._key_lists:
            left, right = right, ((left + self._speck_int(right, keys)) & _M64) % a
        return a * left + right if self._odd else a * right + left

    def _inverse_int_once(self, y: int) -> int:
        a = self._a
        if self._odd:
            right, left = y % a, y // a
        else:
            left, right = y % a, y // a
        for keys in reversed(self._key_lists):
            step = self._speck_int(left, keys) % a
            left, right = (right + a - step) % a, left
        return a * right + left

    def forward_int(self, x: int) -> int:
        """:meth:`forward` of one index (``0 <= x < n``)."""
        x = self._forward_int_once(x)
        while x >= self.n:
            x = self._forward_int_once(x)
        return x

    def inverse_int(self, y: int) -> int:
        """:meth:`inverse` of one index."""
        y = self._inverse_int_once(y)
        while y >= self.n:
            y = self._inverse_int_once(y)
        return y

    def _forward_once(self, x: np.ndarray) -> np.ndarray:
        a = self._side
        left, right = x % a, x // a
        with np.errstate(over="ignore"):
            for keys in self._keys:
                left, right = right, (left + _speck(right, keys)) % a
        return a * left + right if self._odd else a * right + left

    def _inverse_once(self, y: np.ndarray) -> np.ndarray:
        a = self._side
        if self._odd:
            right, left = y % a, y // a
        else:
            left, right = y % a, y // a
        with np.errstate(over="ignore"):
            for keys in self._keys[::-1]:
                step = _speck(left, keys) % a
                left, right = (right + a - step) % a, left
        return a * right + left

    def _walk(self, x: np.ndarray, once) -> np.ndarray:
        out = once(x)
        limit = np.uint64(self.n)
        todo = np.flatnonzero(out >= limit)
        while todo.size:  # cycle-walking: re-encrypt only what is still outside range(n)
            out[todo] = once(out[todo])
            todo = todo[out[todo] >= limit]
        return out

    def forward(self, x: np.ndarray) -> np.ndarray:
        """Map ``uint64`` positions (all ``< n``) to their shuffled indices."""
        return self._walk(x, self._forward_once)

    def inverse(self, y: np.ndarray) -> np.ndarray:
        """Map shuffled indices back to positions."""
        return self._walk(y, self._inverse_once)
