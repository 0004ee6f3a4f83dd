"""Damaging HDF5 files in place, for the tests of hostile input (real files written by h5py,
their bytes patched)."""

from __future__ import annotations

import struct
from pathlib import Path

import h5py


def patch_unique(data: bytes, old: bytes, new: bytes) -> bytes:
    """``data`` with its one occurrence of ``old`` replaced by ``new`` (as long)."""
    at = data.find(old)
    assert at > 0, "the pattern must be unique"
    assert data.find(old, at + 1) < 0, "the pattern must be unique"
    assert len(old) == len(new)
    return data[:at] + new + data[at + len(old):]


def point_chunk_at_another(path: Path, dataset: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Make the v1 B-tree entry of the second chunk of ``dataset`` (a chunked dataset of a
    file written with h5py's default format) point at the first chunk's bytes: its address,
    size and filter mask, its own coordinates kept. HDF5 then serves the first chunk's values
    in the second's place, without an error.

    Returns:
        The element offsets of the first and the second chunk.
    """
    with h5py.File(path) as f:
        dsid = f[dataset].id
        infos = sorted((dsid.get_chunk_info(i) for i in range(dsid.get_num_chunks())),
                       key=lambda c: c.chunk_offset)
    assert len(infos) >= 2, "the dataset needs two chunks"
    first, second = infos[0], infos[1]
    key = "<II" + "Q" * (len(second.chunk_offset) + 1) + "Q"  # sizes, offsets + 0, address

    def entry(size: int, mask: int, address: int) -> bytes:
        return struct.pack(key, size, mask, *second.chunk_offset, 0, address)

    path.write_bytes(patch_unique(
        path.read_bytes(), entry(second.size, second.filter_mask, second.byte_offset),
        entry(first.size, first.filter_mask, first.byte_offset)))
    return tuple(first.chunk_offset), tuple(second.chunk_offset)
