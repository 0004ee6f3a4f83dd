"""Page-aligned numpy buffers, as direct I/O (``O_DIRECT``) needs them."""

from __future__ import annotations

import numpy as np

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
