"""Metadata bytes of one HDF5 file, read from a :class:`ByteSource` in few round trips.

The first block (64 KiB by default) is read speculatively at the first metadata access: in
files written by h5py the superblock, the root group and most object headers sit there. A
metadata read outside the blocks already held fetches one more block around it. Every
address is checked against ``[0, size)`` of the HDF5 file, which starts at ``base`` of the
source.
"""

from __future__ import annotations

import bisect

from guideloom.h5native.errors import NativeFormatError
from guideloom.read.byte_source import ByteSource

FIRST_BLOCK = 1 << 16
MISS_BLOCK = 1 << 14  # bytes fetched around a metadata read outside the blocks held
MAX_METADATA_READ = 1 << 26  # one metadata structure larger than this is not believed


class Blocks:
    """Cached blocks of one HDF5 file's bytes; ``get`` hands out ``(block, offset)``."""

    def __init__(self, source: ByteSource, base: int, size: int,
                 first_block: int = FIRST_BLOCK, miss_block: int = MISS_BLOCK):
        self.source, self.base, self.size = source, base, size
        self.first_block, self.miss_block = first_block, miss_block
        self._starts: list[int] = []
        self._blocks: list[bytes] = []
        self._first = b""  # the block at address 0 (most metadata is there)
        self.fetches = 0

    def check(self, addr: int, n: int, what: str = "data") -> None:
        """Raise unless ``[addr, addr + n)`` lies inside the file."""
        if addr < 0 or n < 0 or addr + n > self.size:
            raise NativeFormatError(f"{what} at address {addr} (+{n} bytes) lies outside the "
                                    f"file's {self.size} bytes")

    def held(self, addr: int, n: int) -> tuple[bytes, int] | None:
        """``(block, offset)`` when a held block covers ``[addr, addr + n)``, else None."""
        if addr >= 0 and n >= 0 and addr + n <= len(self._first):
            return self._first, addr
        i = bisect.bisect_right(self._starts, addr) - 1
        if i >= 0:
            start = self._starts[i]
            block = self._blocks[i]
            if addr + n <= start + len(block):
                return block, addr - start
        return None

    def get(self, addr: int, n: int, what: str = "metadata") -> tuple[bytes, int]:
        """The block holding ``[addr, addr + n)`` and the offset of ``addr`` in it."""
        if addr >= 0 and n >= 0 and addr + n <= len(self._first):
            return self._first, addr
        self.check(addr, n, what)
        if n > MAX_METADATA_READ:
            raise NativeFormatError(f"{what} at address {addr} claims {n} bytes")
        found = self.held(addr, n)
        if found is not None:
            return found
        if not self._blocks:
            start = 0 if addr < self.first_block else addr
            want = max(self.first_block, addr + n - start)
        else:
            start, want = addr, max(n, self.miss_block)
        want = min(want, self.size - start)
        try:
            block = self.source.read(self.base + start, want)
        except OSError as exc:
            raise NativeFormatError(f"reading {what} at address {addr}: {exc}") from exc
        if len(block) != want:
            raise NativeFormatError(f"short read of {what} at address {addr}")
        self.fetches += 1
        i = bisect.bisect_right(self._starts, start)
        self._starts.insert(i, start)
        self._blocks.insert(i, block)
        if start == 0:
            self._first = block
        return block, addr - start

    def prefetch(self, ranges: list[tuple[int, int]]) -> None:
        """Fetch the ranges ``(addr, n)`` not yet held in one ``read_ranges`` call (clipped to
        the file), e.g. the child nodes of a B-tree level, which a remote source then issues
        concurrently. A failure is ignored: the reads that need the bytes fetch them again and
        word their error."""
        want = []
        for addr, n in ranges:
            n = min(n, self.size - addr)
            if 0 <= addr < self.size and n > 0 and self.held(addr, n) is None:
                want.append((addr, n))
        if len(want) < 2:
            return
        try:
            blobs = self.source.read_ranges([(self.base + a, n) for a, n in want])
        except OSError:
            return
        for (addr, n), block in zip(want, blobs, strict=True):
            if len(block) != n:
                continue
            self.fetches += 1
            i = bisect.bisect_right(self._starts, addr)
            self._starts.insert(i, addr)
            self._blocks.insert(i, block)

    def bytes(self, addr: int, n: int, what: str = "metadata") -> bytes:
        """``n`` bytes at ``addr`` as a new bytes object."""
        block, off = self.get(addr, n, what)
        return block[off:off + n]
