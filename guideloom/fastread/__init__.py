"""A fast path for reading deflate-compressed chunked HDF5 datasets.

h5py opens the file and lists the chunk index; the chunks' stored bytes are then read with
``os.preadv`` and decoded by threads outside HDF5's global lock. Datasets the fast path does not
handle (other filters, contiguous or compact layouts, variable-length or converted types) are
read by h5py, which also stays the reference in tests.

Example:
    >>> import h5py, os
    >>> from guideloom import fastread
    >>> with h5py.File("x.h5") as f:                                      # doctest: +SKIP
    ...     data = fastread.read_dataset(f["force/data"], fastread.RawSource(
    ...         f.id.get_vfd_handle()))
"""

from __future__ import annotations

from collections.abc import Sequence

import h5py
import numpy as np

from guideloom.fastread.chunks import FastReadError, Plan, RawSource, plan, read
from guideloom.fastread.inflate import NAME as INFLATE_BACKEND
from guideloom.fastread.pool import decode_threads, set_decode_threads, share_cores

__all__ = [
    "INFLATE_BACKEND",
    "FastReadError",
    "Plan",
    "RawSource",
    "decode_threads",
    "plan",
    "read",
    "read_dataset",
    "set_decode_threads",
    "share_cores",
]


FAST_MIN_BYTES = 1 << 17  # stored bytes from which the fast path beats h5py (see benchmarks)


def read_dataset(
    dset: h5py.Dataset, source: RawSource | None, rows: Sequence[int] | np.ndarray | None = None,
    *, min_bytes: int = FAST_MIN_BYTES, out: np.ndarray | None = None,
) -> np.ndarray:
    """Read ``dset`` (or rows ``rows``, increasing and unique, of its first axis).

    With ``out`` (a C-contiguous array of the whole dataset's shape and dtype; only without
    ``rows``) the data is decoded into it and ``out`` is returned.

    Uses the fast path when ``source`` is given and the dataset qualifies and holds at least
    ``min_bytes`` (below that, h5py's own C loop costs less than planning), else h5py. A
    chunk the fast path cannot decode is read again by h5py, whose error reports damaged data.

    Raises:
        OSError: h5py cannot read the dataset (damaged file).
    """
    if out is not None and (rows is not None or out.shape != dset.shape
                            or out.dtype != dset.dtype or not out.flags.c_contiguous):
        out = None  # not a buffer for this read: allocate as usual
    if source is not None and dset.id.get_storage_size() >= min_bytes:
        p = plan(dset)
        if p is not None:
            try:
                return read(p, source, rows, out)
            except (FastReadError, OSError):
                pass  # h5py is the judge of damaged or unreadable data
    if rows is None:
        if out is not None and out.size:
            dset.read_direct(out)
            return out
        return dset[()]
    return dset[[int(r) for r in rows]]
