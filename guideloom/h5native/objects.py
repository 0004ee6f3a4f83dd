"""Superblock and object headers (versions 1 and 2, with continuation blocks)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from guideloom.h5native.blocks import Blocks
from guideloom.h5native.checksum import lookup3
from guideloom.h5native.errors import NativeFormatError, NativeUnsupported

SIGNATURE = b"\x89HDF\r\n\x1a\n"
CONTINUATION = 0x10
MAX_HEADER_BLOCKS = 64  # continuation blocks followed in one object header
MAX_MESSAGES = 4096

_V1_MSG = struct.Struct("<HHB3x")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_UINT = {2: struct.Struct("<H"), 4: _U32, 8: struct.Struct("<Q")}


@dataclass(frozen=True)
class Superblock:
    """What the rest of the file needs from its superblock."""

    offset_size: int
    length_size: int
    root: int  # address of the root group's object header
    root_btree: int | None = None  # v0/v1: the root symbol table's cached B-tree and heap
    root_heap: int | None = None


class Reader:
    """Decodes addresses and lengths of one file's sizes from its blocks."""

    def __init__(self, blocks: Blocks, offset_size: int = 8, length_size: int = 8):
        self.blocks = blocks
        self.set_sizes(offset_size, length_size)

    def set_sizes(self, offset_size: int, length_size: int) -> None:
        if offset_size not in (2, 4, 8) or length_size not in (2, 4, 8):
            raise NativeUnsupported(f"sizes of offsets/lengths {offset_size}/{length_size}")
        self.osz, self.lsz = offset_size, length_size
        self.undefined = (1 << (8 * offset_size)) - 1
        self._addr = _UINT[offset_size].unpack_from
        self._length = _UINT[length_size].unpack_from

    def addr(self, buf: bytes, off: int) -> int | None:
        """The address at ``buf[off:]``; None for HDF5's undefined address."""
        v = self._addr(buf, off)[0]
        return None if v == self.undefined else v

    def length(self, buf: bytes, off: int) -> int:
        return self._length(buf, off)[0]


def read_superblock(blocks: Blocks) -> Superblock:
    """Parse the superblock at the start of the file (versions 0 to 3).

    Raises:
        NativeUnsupported: A user block (the signature is not at the start), a non-zero base
            address or a driver information block.
        NativeFormatError: The signature, sizes or checksum are wrong, or the file is shorter
            than its end-of-file address.
    """
    buf, o = blocks.get(0, 48, "superblock")
    if buf[o:o + 8] != SIGNATURE:
        raise NativeUnsupported("no HDF5 signature at the start (a user block, or not HDF5)")
    version = buf[o + 8]
    if version in (0, 1):
        osz, lsz = buf[o + 13], buf[o + 14]
        r = Reader(blocks, osz, lsz)
        p = o + 24 + (4 if version == 1 else 0)
        need = p - o + 4 * osz + osz + osz + 24
        buf, o2 = blocks.get(0, need, "superblock")
        p = o2 + (p - o)
        base = r.addr(buf, p)
        eof = r.addr(buf, p + 2 * osz)
        driver = r.addr(buf, p + 3 * osz)
        entry = p + 4 * osz
        root = r.addr(buf, entry + osz)
        cache_type = _U32.unpack_from(buf, entry + 2 * osz)[0]
        btree = heap = None
        if cache_type == 1:
            btree = r.addr(buf, entry + 2 * osz + 8)
            heap = r.addr(buf, entry + 3 * osz + 8)
        if driver is not None:
            raise NativeUnsupported("a driver information block (multi/family file)")
    elif version in (2, 3):
        osz, lsz = buf[o + 9], buf[o + 10]
        r = Reader(blocks, osz, lsz)
        n = 12 + 4 * osz
        buf, o = blocks.get(0, n + 4, "superblock")
        if lookup3(buf[o:o + n]) != _U32.unpack_from(buf, o + n)[0]:
            raise NativeFormatError("superblock checksum mismatch")
        base = r.addr(buf, o + 12)
        eof = r.addr(buf, o + 12 + 2 * osz)
        root = r.addr(buf, o + 12 + 3 * osz)
        btree = heap = None
    else:
        raise NativeUnsupported(f"superblock version {version}")
    if base not in (0, None):
        raise NativeUnsupported(f"base address {base}")
    if eof is None or eof > blocks.size:
        raise NativeFormatError(f"the file is truncated: {blocks.size} bytes, its superblock "
                                f"says {eof}")
    if root is None:
        raise NativeFormatError("no root group address")
    return Superblock(osz, lsz, root, btree, heap)


Message = tuple[int, int, bytes]  # (type, flags, body)


def read_object_header(r: Reader, addr: int) -> list[Message]:
    """The messages of the object header at ``addr``, continuation blocks followed.

    Raises:
        NativeFormatError: Bad version or signature, checksum mismatch, messages running past
            their block, or too many continuation blocks (a cycle).
    """
    blocks = r.blocks
    buf, o = blocks.get(addr, 16, "object header")
    messages: list[Message] = []
    pending: list[tuple[int, int]] = []
    seen: set[int] = {addr}
    if buf[o:o + 4] == b"OHDR":
        version, flags = buf[o + 4], buf[o + 5]
        if version != 2:
            raise NativeFormatError(f"object header version {version} at {addr}")
        p = 6 + (16 if flags & 0x20 else 0) + (4 if flags & 0x10 else 0)
        width = 1 << (flags & 3)
        buf, o = blocks.get(addr, p + width, "object header")
        size0 = int.from_bytes(buf[o + p:o + p + width], "little")
        start = p + width
        total = start + size0 + 4
        buf, o = blocks.get(addr, total, "object header")
        _check_sum(buf, o, total, addr)
        order = 2 if flags & 0x04 else 0
        _v2_messages(r, buf, o + start, o + start + size0, order, messages, pending)
        while pending:
            c_addr, c_len = pending.pop(0)
            if c_addr in seen or len(seen) > MAX_HEADER_BLOCKS:
                raise NativeFormatError(f"object header at {addr}: continuation cycle")
            seen.add(c_addr)
            if c_len < 8:
                raise NativeFormatError(f"object header continuation of {c_len} bytes")
            buf, o = blocks.get(c_addr, c_len, "object header continuation")
            if buf[o:o + 4] != b"OCHK":
                raise NativeFormatError(f"bad continuation block signature at {c_addr}")
            _check_sum(buf, o, c_len, c_addr)
            _v2_messages(r, buf, o + 4, o + c_len - 4, order, messages, pending)
        return messages
    version = buf[o]
    if version != 1:
        raise NativeFormatError(f"object header version {version} at {addr}")
    n_messages = _U16.unpack_from(buf, o + 2)[0]
    size0 = _U32.unpack_from(buf, o + 8)[0]
    buf, o = blocks.get(addr, 16 + size0, "object header")
    _v1_messages(r, buf, o + 16, o + 16 + size0, messages, pending)
    while pending:
        c_addr, c_len = pending.pop(0)
        if c_addr in seen or len(seen) > MAX_HEADER_BLOCKS:
            raise NativeFormatError(f"object header at {addr}: continuation cycle")
        seen.add(c_addr)
        buf, o = blocks.get(c_addr, c_len, "object header continuation")
        _v1_messages(r, buf, o, o + c_len, messages, pending)
    if len(messages) > n_messages + len(seen):  # continuation messages are counted too
        raise NativeFormatError(f"object header at {addr}: more messages than declared")
    return messages


def _check_sum(buf: bytes, o: int, total: int, addr: int) -> None:
    if lookup3(buf[o:o + total - 4]) != _U32.unpack_from(buf, o + total - 4)[0]:
        raise NativeFormatError(f"object header checksum mismatch at {addr}")


def _v1_messages(r: Reader, buf: bytes, p: int, end: int, out: list[Message],
                 pending: list[tuple[int, int]]) -> None:
    while p + 8 <= end:
        mtype, size, flags = _V1_MSG.unpack_from(buf, p)
        p += 8
        if p + size > end:
            raise NativeFormatError("object header message runs past its block")
        _take(r, mtype, flags, buf[p:p + size], out, pending)
        p += size


def _v2_messages(r: Reader, buf: bytes, p: int, end: int, order: int, out: list[Message],
                 pending: list[tuple[int, int]]) -> None:
    head = 4 + order
    while p + head <= end:
        mtype = buf[p]
        size = _U16.unpack_from(buf, p + 1)[0]
        flags = buf[p + 3]
        p += head
        if p + size > end:
            raise NativeFormatError("object header message runs past its block")
        _take(r, mtype, flags, buf[p:p + size], out, pending)
        p += size


def _take(r: Reader, mtype: int, flags: int, body: bytes, out: list[Message],
          pending: list[tuple[int, int]]) -> None:
    if len(out) >= MAX_MESSAGES:
        raise NativeFormatError("too many object header messages")
    if mtype == CONTINUATION:
        if len(body) < r.osz + r.lsz:
            raise NativeFormatError("short continuation message")
        c_addr = r.addr(body, 0)
        if c_addr is None:
            raise NativeFormatError("continuation to an undefined address")
        pending.append((c_addr, r.length(body, r.osz)))
        return
    if mtype != 0:
        out.append((mtype, flags, body))
