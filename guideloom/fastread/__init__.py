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

import logging
from collections.abc import Sequence

import h5py
import numpy as np

from guideloom.fastread import inflate as _inflate_module
from guideloom.fastread.chunks import Chunk, FastReadError, Plan, RawSource, plan, read
from guideloom.fastread.pool import decode_threads, set_decode_threads, share_cores
from guideloom.runtime import fallbacks

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


def __getattr__(name: str) -> object:
    if name == "INFLATE_BACKEND":  # the inflate back end in use, picked on first use
        return _inflate_module.backend()[0]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


logger = logging.getLogger(__name__)
FAST_MIN_BYTES = 1 << 17  # stored bytes from which the fast path beats h5py (see benchmarks)


def read_dataset(
    dset: h5py.Dataset | h5py.h5d.DatasetID, source: RawSource | None,
    rows: Sequence[int] | np.ndarray | None = None,
    *, min_bytes: int = FAST_MIN_BYTES, out: np.ndarray | None = None,
    shape: tuple[int, ...] | None = None, dcpl: h5py.h5p.PropDCID | None = None,
    chunks: Sequence[Chunk] | None = None,
) -> np.ndarray:
    """Read ``dset`` (or rows ``rows``, increasing and unique, of its first axis).

    ``dset`` is an :class:`h5py.Dataset` or its low-level ``DatasetID`` (the record path opens
    datasets with :func:`h5py.h5d.open`, which costs a fraction of ``group[path]``).

    With ``out`` (a C-contiguous array of the whole dataset's shape and dtype; only without
    ``rows``) the data is decoded into it and ``out`` is returned.

    Uses the fast path when ``source`` is given and the dataset qualifies and holds at least
    ``min_bytes`` (below that, h5py's own C loop costs less than planning), else h5py. A
    chunk the fast path cannot decode is read again by h5py, whose error reports damaged data.
    ``shape``, the dataset's shape when the caller already has it, saves asking HDF5 again;
    so do ``dcpl``, its creation property list, and ``chunks``, its chunk index.

    Raises:
        OSError: h5py cannot read the dataset (damaged file).
    """
    dsid = dset.id if isinstance(dset, h5py.Dataset) else dset
    if shape is None:
        shape = dsid.shape
    dtype = dsid.dtype
    if out is not None and (rows is not None or out.shape != shape
                            or out.dtype != dtype or not out.flags.c_contiguous):
        out = None  # not a buffer for this read: allocate as usual
    if source is not None and dsid.get_storage_size() >= min_bytes:
        p = plan(dsid, dcpl, chunks)
        if p is None:
            _fell_back("fastread:unsupported", dsid, "a layout or filter the fast path lacks")
        else:
            try:
                return read(p, source, rows, out)
            except (FastReadError, OSError) as exc:  # h5py judges damaged or unreadable data
                _fell_back("fastread:error", dsid, f"{type(exc).__name__}: {exc}")
    if rows is None and shape and 0 not in shape and _plain(dtype):
        # a whole dataset of plain numbers: HDF5's read straight into the array, without
        # the high-level selection machinery (the same call h5py makes for dset[()])
        if out is None:
            out = np.empty(shape, dtype)
        dsid.read(h5py.h5s.ALL, h5py.h5s.ALL, out)
        return out
    hl = dset if isinstance(dset, h5py.Dataset) else h5py.Dataset(dsid)
    if rows is None:
        if out is not None and out.size:
            hl.read_direct(out)
            return out
        return hl[()]
    return hl[[int(r) for r in rows]]


def _fell_back(kind: str, dsid: h5py.h5d.DatasetID, why: str) -> None:
    """Count and log (DEBUG) a read that h5py does instead of the fast path."""
    fallbacks.count(kind)
    if logger.isEnabledFor(logging.DEBUG):
        name = h5py.h5i.get_name(dsid) or b"a dataset"
        logger.debug("%s: h5py reads %s (%s)", kind, name.decode(errors="replace"), why)


def _plain(dtype: np.dtype) -> bool:
    """Numbers or fixed-size bytes with no special h5py mapping (enum, references, vlen)."""
    return (dtype.kind in "biufcS" and not dtype.hasobject and dtype.metadata is None
            and dtype.fields is None)
