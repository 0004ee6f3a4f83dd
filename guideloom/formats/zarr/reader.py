"""Rows of a published zarr export, read chunk-wise through zarr's slices."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from guideloom.formats.base import FormatReader
from guideloom.formats.layout import SIM_IDS_ARRAY
from guideloom.formats.zarr.checks import array_checked, open_group_checked


class ZarrReader(FormatReader):
    """Rows read from the group's arrays, opened once (their metadata read at open)."""

    reads_lazily = True

    def __init__(self, root: str, manifest: Mapping[str, Any]):
        super().__init__(root, manifest)

        self._group = open_group_checked(root)
        self._arrays: dict[str, Any] = {}

    def array(self, name: str) -> Any:
        """The export's array ``name`` (checked when first asked for)."""
        arr = self._arrays.get(name)
        if arr is None:
            arr = self._arrays[name] = array_checked(self.root, self._group, name)
        return arr

    def sim_ids(self) -> np.ndarray:
        ids: np.ndarray = self.array(SIM_IDS_ARRAY)[...]
        return ids

    def row(self, i: int, fields: Sequence[str]) -> dict[str, np.ndarray]:
        return {f: np.asarray(self.array(f)[i]) for f in fields}

    def batch(self, idx: np.ndarray, fields: Sequence[str]) -> dict[str, np.ndarray]:
        return {f: take_rows(self.array(f), idx) for f in fields}


def take_rows(arr: Any, idx: np.ndarray) -> np.ndarray:
    """Rows ``idx`` of zarr array ``arr``, read through zarr's fast path, slices: one slice
    for a run of consecutive rows, else one slice per chunk touched (spanning the rows wanted
    there), so each chunk is decoded once; rows are reordered only when ``idx`` is not sorted
    and distinct. (zarr's orthogonal selection of integer rows is far slower on large rows.)"""
    n = len(idx)
    if n == 0:
        return np.empty((0, *arr.shape[1:]), dtype=arr.dtype)
    first, last = int(idx[0]), int(idx[-1])
    if last - first + 1 == n and (n == 1 or bool(np.all(np.diff(idx) == 1))):
        run: np.ndarray = arr[first:last + 1]
        return run
    if not bool(np.all(np.diff(idx) > 0)):
        unique, inverse = np.unique(idx, return_inverse=True)
        return take_rows(arr, unique)[inverse]
    out = np.empty((n, *arr.shape[1:]), dtype=arr.dtype)
    chunk = idx // max(1, arr.chunks[0])
    starts = [0, *(np.flatnonzero(np.diff(chunk)) + 1).tolist(), n]
    for a, b in itertools.pairwise(starts):
        lo, hi = int(idx[a]), int(idx[b - 1])
        block = arr[lo:hi + 1]
        out[a:b] = block if hi - lo + 1 == b - a else block[idx[a:b] - lo]
    return out
