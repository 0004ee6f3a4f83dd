"""Memory-free random permutations of ``range(n)`` for shuffled, resumable loading.

:class:`FeistelShuffler` maps a *position* in an epoch to a *sample index* without ever
materialising a permutation. Two keyed Feistel networks are available:

* ``network="speck"`` (the default): GuideLoom 1.1's network (a generalized Feistel cipher on an
  ``a x a`` square with Speck64/128 round functions, :mod:`guideloom.shuffle.speck`), 5 rounds by
  default. The same seed gives GuideLoom 1.1's permutation, so a shuffled run checkpointed with
  1.1 resumes in the same order.
* ``network="mix"``: guideloom's own balanced network on the smallest ``2**(2k) >= n`` with a
  multiply-xorshift round function, 6 rounds by default (guideloom 0.1's order).

Both restrict the network to ``range(n)`` by cycle-walking, are vectorised over ``uint64``
arrays and use integer arithmetic only, so the same keys give the same order everywhere.

It answers GuideLoom 1.1's method set (``FeistelShuffler(length, rng, rounds)``, ``from_seed``,
``shuffle``, ``unshuffle``, ``length``, ``rounds``) as well as guideloom's own
(``shuffler(positions)``, ``inverse``, ``for_epoch``, ``len``).
"""

from __future__ import annotations

from typing import overload

import numpy as np

from guideloom.shuffle.speck import SpeckNetwork

__all__ = ["NETWORKS", "FeistelShuffler", "epoch_rng"]

#: The networks and their default number of rounds.
NETWORKS = {"speck": 5, "mix": 6}

_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30 = np.uint64(30)
_S27 = np.uint64(27)
_S31 = np.uint64(31)


def epoch_rng(seed: int | None, epoch: int, *, network: str = "speck") -> np.random.Generator:
    """Return the generator that keys the shuffle of ``epoch`` under ``seed``.

    With the default network this is GuideLoom 1.1's per-epoch generator (Philox keyed by
    ``SeedSequence(seed, spawn_key=(epoch,))``); with ``network="mix"`` it is guideloom 0.1's
    ``np.random.default_rng([seed, epoch])``. ``SeedSequence`` is specified bit for bit, so the
    order is the same on every machine.
    """
    if network == "mix":
        return np.random.default_rng([int(seed), int(epoch)])  # type: ignore[arg-type]
    sequence = np.random.SeedSequence(seed, spawn_key=(int(epoch),))
    return np.random.Generator(np.random.Philox(sequence))


def _mix(x: np.ndarray) -> np.ndarray:
    """Multiply-xorshift finaliser on ``uint64`` arrays (wrapping arithmetic)."""
    x = (x ^ (x >> _S30)) * _M1
    x = (x ^ (x >> _S27)) * _M2
    return x ^ (x >> _S31)


class FeistelShuffler:
    """A seeded bijection ``range(n) -> range(n)`` in O(1) memory.

    Args:
        length: Size of the permuted range (``length >= 0``).
        rng: Source of the round keys; the permutation is fully determined by its state.
        rounds: Feistel rounds, at least 3 (default: 5 for ``"speck"``, 6 for ``"mix"``).
        network: ``"speck"`` (GuideLoom 1.1's permutation, the default) or ``"mix"``
            (guideloom 0.1's).

    Example:
        >>> s = FeistelShuffler(10, np.random.default_rng(0))
        >>> [s.shuffle(i) for i in range(10)]  # GuideLoom 1.1's order for this generator
        [0, 3, 7, 8, 2, 6, 4, 1, 5, 9]
        >>> s.unshuffle(s.shuffle(3))
        3
    """

    def __init__(
        self,
        length: int,
        rng: np.random.Generator,
        rounds: int | None = None,
        *,
        network: str = "speck",
    ) -> None:
        n = int(length)
        if n < 0:
            raise ValueError(f"length must be >= 0, got {n}")
        if network not in NETWORKS:
            raise ValueError(f"network must be one of {NETWORKS}, got {network!r}")
        rounds = NETWORKS[network] if rounds is None else int(rounds)
        if rounds < 3:
            raise ValueError(f"rounds must be >= 3, got {rounds}")
        self.n = n
        self._rounds = rounds
        self.network = network
        self._speck: SpeckNetwork | None = None
        if network == "speck":  # one 32-bit draw seeds the key schedule, as in GuideLoom 1.1
            seed = int(rng.integers(low=0, high=2**32, dtype=np.uint64))
            self._speck = SpeckNetwork(n, seed, rounds)
            return
        bits = max(int(n - 1).bit_length(), 2) if n > 1 else 2
        bits += bits % 2  # balanced halves
        self._half = np.uint64(bits // 2)
        self._mask = np.uint64((1 << (bits // 2)) - 1)
        self._keys = rng.integers(0, 2**63, size=rounds, dtype=np.int64).astype(np.uint64)

    @classmethod
    def for_epoch(
        cls, n: int, seed: int | None, epoch: int, *, network: str = "speck"
    ) -> FeistelShuffler:
        """Return the shuffler of ``epoch`` for ``seed`` (see :func:`epoch_rng`).

        With the default network this is the order GuideLoom 1.1's ``StatefulDataLoader`` used
        for that seed and epoch.
        """
        return cls(n, epoch_rng(seed, epoch, network=network), network=network)

    @classmethod
    def from_seed(
        cls,
        length: int,
        seed: int | None = None,
        rounds: int | None = None,
        *,
        network: str = "speck",
    ) -> FeistelShuffler:
        """Return a shuffler keyed by an integer seed (``None``: fresh OS entropy).

        Args:
            length: Size of the permuted range.
            seed: Seed of ``np.random.default_rng``; the same seed gives the same order.
            rounds: Feistel rounds (the network's default when ``None``).
            network: ``"speck"`` (GuideLoom 1.1's) or ``"mix"``.
        """
        return cls(length, np.random.default_rng(seed), rounds, network=network)

    @property
    def length(self) -> int:
        """Size of the permuted range (GuideLoom 1.1's name for ``len(shuffler)``)."""
        return self.n

    @property
    def rounds(self) -> int:
        """Number of Feistel rounds."""
        return self._rounds

    def __len__(self) -> int:
        return self.n

    def __repr__(self) -> str:
        return f"FeistelShuffler(length={self.n}, rounds={self._rounds}, network={self.network!r})"

    def _encrypt(self, x: np.ndarray) -> np.ndarray:
        left = x >> self._half
        right = x & self._mask
        for key in self._keys:
            left, right = right, left ^ (_mix(right ^ key) & self._mask)
        return (left << self._half) | right

    def _decrypt(self, x: np.ndarray) -> np.ndarray:
        left = x >> self._half
        right = x & self._mask
        for key in self._keys[::-1]:
            left, right = right ^ (_mix(left ^ key) & self._mask), left
        return (left << self._half) | right

    def _walk(self, positions: np.ndarray | int, step) -> np.ndarray | int:
        scalar = np.ndim(positions) == 0
        pos = np.asarray(positions)
        if pos.size and (pos.min() < 0 or pos.max() >= self.n):
            raise IndexError(f"positions must lie in range({self.n})")
        if self._speck is not None:
            if scalar:
                one = self._speck.forward_int if step == self._encrypt else self._speck.inverse_int
                return one(int(pos))
            walk = self._speck.forward if step == self._encrypt else self._speck.inverse
            result = walk(pos.astype(np.uint64).reshape(-1)).astype(np.int64).reshape(pos.shape)
            return int(result) if scalar else result
        out = step(pos.astype(np.uint64).reshape(-1))
        limit = np.uint64(self.n)
        todo = np.flatnonzero(out >= limit)
        while todo.size:  # cycle-walking: only the values still outside range(n)
            out[todo] = step(out[todo])
            todo = todo[out[todo] >= limit]
        result = out.astype(np.int64).reshape(pos.shape)
        return int(result) if scalar else result

    @overload
    def __call__(self, positions: int) -> int: ...
    @overload
    def __call__(self, positions: np.ndarray) -> np.ndarray: ...

    def __call__(self, positions: np.ndarray | int) -> np.ndarray | int:
        """Map positions in ``range(n)`` to sample indices (array in, ``int64`` array out)."""
        return self._walk(positions, self._encrypt)

    def inverse(self, indices: np.ndarray | int) -> np.ndarray | int:
        """Map sample indices back to their positions (the inverse permutation)."""
        return self._walk(indices, self._decrypt)

    def shuffle(self, i: int) -> int:
        """Return the shuffled index of ``i`` (GuideLoom 1.1's name; arrays work too).

        Raises:
            IndexError: ``i`` is outside ``range(length)``.
        """
        return self._walk(i, self._encrypt)  # type: ignore[return-value]

    def unshuffle(self, y: int) -> int:
        """Return the index whose shuffled index is ``y``: the inverse of :meth:`shuffle`.

        Raises:
            IndexError: ``y`` is outside ``range(length)``.
        """
        return self._walk(y, self._decrypt)  # type: ignore[return-value]
