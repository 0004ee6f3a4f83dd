"""Page-aligned numpy buffers, as direct I/O (``O_DIRECT``) needs them, and spare ones kept
for the next use in this process (:func:`take_aligned`, :func:`give_back`)."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable

import numpy as np

from guideloom.runtime.caches import cache

PAGE = 4096  # the alignment of direct I/O: buffer address, file offset and length


def aligned_empty(shape: tuple[int, ...], dtype: np.dtype | str, align: int = PAGE) -> np.ndarray:
    """An uninitialised C-contiguous array whose data starts on an ``align``-byte boundary."""
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + align, np.uint8)
    start = -raw.ctypes.data % align
    return raw[start:start + nbytes].view(dtype).reshape(shape)


def is_aligned(address: int, *sizes: int, align: int = PAGE) -> bool:
    """Whether ``address`` and every one of ``sizes`` are multiples of ``align``."""
    return all(v % align == 0 for v in (address, *sizes))


# Buffers given back, by (shape, dtype, serial): a large one taken again has its pages mapped
# already (a fresh 25 MB buffer costs ~6,000 page faults as it is first written: a quarter of
# the decode time of an op10 scan field). Bounded by the spare_buffers cache's entries and bytes.
_SPARE = cache("spare_buffers", weigh=lambda _key, buf: int(buf.nbytes))
_TAKING = threading.Lock()
_SERIAL = itertools.count()


def take_aligned(shape: tuple[int, ...], dtype: np.dtype | str) -> np.ndarray:
    """A page-aligned C-contiguous array of ``shape`` and ``dtype``: one given back earlier
    (:func:`give_back`; its contents are whatever it held) or a new one."""
    want = (tuple(int(n) for n in shape), np.dtype(dtype).str)
    with _TAKING:  # no two callers take the same buffer
        for key in _SPARE.keys():  # noqa: SIM118 - a BoundedCache is not iterable
            if key[:2] == want:
                buf = _SPARE.get(key)
                _SPARE.pop(key)
                if buf is not None:
                    return buf  # type: ignore[no-any-return]
    return aligned_empty(want[0], want[1])


def give_back(buffers: Iterable[np.ndarray]) -> None:
    """Keep ``buffers``, which nothing uses or refers to any more, for :func:`take_aligned`."""
    for buf in buffers:
        _SPARE.put((tuple(buf.shape), buf.dtype.str, next(_SERIAL)), buf)
