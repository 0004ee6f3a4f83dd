"""Byte ranges: merging neighbours into fewer requests and cutting the answers back apart."""

from __future__ import annotations

import bisect
from collections.abc import Sequence

COALESCE_GAP = 1 << 16  # ranges closer than this are fetched as one request


def coalesce_ranges(ranges: Sequence[tuple[int, int]], gap: int = COALESCE_GAP
                    ) -> list[tuple[int, int]]:
    """Merge ``(offset, size)`` ranges that overlap or lie within ``gap`` bytes of each other.

    Returns the merged ranges sorted by offset; :func:`split_coalesced` cuts their bytes back
    into the ranges asked for.
    """
    merged: list[list[int]] = []
    for offset, size in sorted(ranges):
        end = offset + size
        if merged and offset <= merged[-1][1] + gap:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([offset, end])
    return [(start, end - start) for start, end in merged]


def split_coalesced(ranges: Sequence[tuple[int, int]], merged: Sequence[tuple[int, int]],
                    blobs: Sequence[bytes]) -> list[bytes]:
    """The bytes of each of ``ranges`` cut out of the ``blobs`` fetched for ``merged``."""
    starts = [m[0] for m in merged]
    out: list[bytes] = []
    for offset, size in ranges:
        i = bisect.bisect_right(starts, offset) - 1
        start = starts[i]
        blob = blobs[i]
        piece = bytes(blob[offset - start: offset - start + size])
        if len(piece) != size:
            raise OSError(f"short read: {len(piece)} of {size} bytes at offset {offset}")
        out.append(piece)
    return out
