"""Superblock and object headers (versions 1 and 2, with continuation blocks)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from guideloom.h5native.blocks import Blocks
from guideloom.h5native.checksum import lookup3
from guideloom.h5native.errors import NativeFormatError, NativeUnsupported
from guideloom.runtime.caches import BoundedCache, cache

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

    Each block's bytes are decoded (and a v2 block's checksum verified) once per process: the
    same headers recur in every file of a dataset.

    Raises:
        NativeFormatError: Bad version or signature, checksum mismatch, messages running past
            their block, or too many continuation blocks (a cycle).
    """
    blocks = r.blocks
    buf, o = blocks.get(addr, 16, "object header")
    messages: list[Message] = []
    seen: set[int] = {addr}
    if buf[o:o + 4] == b"OHDR":
        version, flags = buf[o + 4], buf[o + 5]
        if version != 2:
            raise NativeFormatError(f"object header version {version} at {addr}")
        p = 6 + (16 if flags & 0x20 else 0) + (4 if flags & 0x10 else 0)
        width = 1 << (flags & 3)
        buf, o = blocks.get(addr, p + width, "object header")
        size0 = int.from_bytes(buf[o + p:o + p + width], "little")
        total = p + width + size0 + 4
        kind, order, n_messages = _V2_FIRST, (2 if flags & 0x04 else 0), MAX_MESSAGES
        buf, o = blocks.get(addr, total, "object header")
        found, pending = _block(kind, buf[o:o + total], r.osz, r.lsz, order, p + width)
        kind = _V2_NEXT
    else:
        version = buf[o]
        if version != 1:
            raise NativeFormatError(f"object header version {version} at {addr}")
        n_messages = _U16.unpack_from(buf, o + 2)[0]
        size0 = _U32.unpack_from(buf, o + 8)[0]
        order = 0
        buf, o = blocks.get(addr, 16 + size0, "object header")
        found, pending = _block(_V1, buf[o + 16:o + 16 + size0], r.osz, r.lsz, 0, 0)
        kind = _V1
    messages.extend(found)
    todo = list(pending)
    while todo:
        c_addr, c_len = todo.pop(0)
        if c_addr in seen or len(seen) > MAX_HEADER_BLOCKS:
            raise NativeFormatError(f"object header at {addr}: continuation cycle")
        seen.add(c_addr)
        buf, o = blocks.get(c_addr, c_len, "object header continuation")
        found, pending = _block(kind, buf[o:o + c_len], r.osz, r.lsz, order, 0)
        messages.extend(found)
        todo.extend(pending)
        if len(messages) > MAX_MESSAGES:
            raise NativeFormatError("too many object header messages")
    if len(messages) > n_messages + len(seen):  # continuation messages are counted too
        raise NativeFormatError(f"object header at {addr}: more messages than declared")
    return messages


_V1, _V2_FIRST, _V2_NEXT = 1, 2, 3
_BLOCK_MEMO_BYTES = 4096
_blocks_seen: BoundedCache[tuple, tuple[tuple[Message, ...], tuple[tuple[int, int], ...]]] = \
    cache("h5_header_blocks", weigh=lambda key, _: len(key[1]))


def _block(kind: int, data: bytes, osz: int, lsz: int, order: int, start: int
           ) -> tuple[tuple[Message, ...], tuple[tuple[int, int], ...]]:
    """The messages and continuations ``(address, length)`` of one header block, remembered
    by its bytes."""
    if len(data) > _BLOCK_MEMO_BYTES:
        return _decode_block(kind, data, osz, lsz, order, start)
    key = (kind, data, osz, lsz, order, start)
    found = _blocks_seen.get(key)
    if found is None:
        found = _decode_block(kind, data, osz, lsz, order, start)
        _blocks_seen.put(key, found)
    return found


def _decode_block(kind: int, data: bytes, osz: int, lsz: int, order: int, start: int
                  ) -> tuple[tuple[Message, ...], tuple[tuple[int, int], ...]]:
    out: list[Message] = []
    pending: list[tuple[int, int]] = []
    if kind == _V1:
        p, end = 0, len(data)
        while p + 8 <= end:
            mtype, size, flags = _V1_MSG.unpack_from(data, p)
            p += 8
            if p + size > end:
                raise NativeFormatError("object header message runs past its block")
            _take(osz, lsz, mtype, flags, data[p:p + size], out, pending)
            p += size
        return tuple(out), tuple(pending)
    n = len(data)
    if kind == _V2_NEXT:
        if n < 8 or data[:4] != b"OCHK":
            raise NativeFormatError("bad object header continuation block")
        start = 4
    if lookup3(data[:n - 4]) != _U32.unpack_from(data, n - 4)[0]:
        raise NativeFormatError("object header checksum mismatch")
    head = 4 + order
    p, end = start, n - 4
    while p + head <= end:
        mtype = data[p]
        size = _U16.unpack_from(data, p + 1)[0]
        flags = data[p + 3]
        p += head
        if p + size > end:
            raise NativeFormatError("object header message runs past its block")
        _take(osz, lsz, mtype, flags, data[p:p + size], out, pending)
        p += size
    return tuple(out), tuple(pending)


def _take(osz: int, lsz: int, mtype: int, flags: int, body: bytes, out: list[Message],
          pending: list[tuple[int, int]]) -> None:
    if len(out) >= MAX_MESSAGES:
        raise NativeFormatError("too many object header messages")
    if mtype == CONTINUATION:
        if len(body) < osz + lsz:
            raise NativeFormatError("short continuation message")
        c_addr = _UINT[osz].unpack_from(body, 0)[0]
        if c_addr == (1 << (8 * osz)) - 1:
            raise NativeFormatError("continuation to an undefined address")
        pending.append((c_addr, _UINT[lsz].unpack_from(body, osz)[0]))
        return
    if mtype != 0:
        out.append((mtype, flags, body))
