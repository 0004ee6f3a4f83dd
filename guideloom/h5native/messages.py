"""Decoding the object header messages a dataset or group read needs."""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from guideloom.h5native.errors import NativeFormatError, NativeUnsupported
from guideloom.h5native.objects import Message, Reader

DATASPACE, LINK_INFO, DATATYPE, FILL_OLD, FILL, LINK, EXTERNAL, LAYOUT = 1, 2, 3, 4, 5, 6, 7, 8
FILTERS, SYMBOL_TABLE = 11, 17
SHARED = 0x02  # message flag: the body is a reference to a shared message
MAX_RANK = 32
MAX_DIM = 1 << 62

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_LENGTH_CODES = {2: "H", 4: "I", 8: "Q"}
T = TypeVar("T")
_FLOATS = {  # size: (precision, exponent location, exponent size, mantissa size, bias, sign)
    2: (16, 10, 5, 10, 15, 15),
    4: (32, 23, 8, 23, 127, 31),
    8: (64, 52, 11, 52, 1023, 63),
}


MEMO_ENTRIES = 4096


def _memo(fn: Callable[..., T]) -> Callable[..., T]:
    """Remember ``fn``'s results by its (hashable) arguments: the same message bodies recur in
    every file of a dataset, and decoding one costs more than looking it up."""
    cache: dict[tuple, T] = {}

    def run(*key: object) -> T:
        found = cache.get(key)
        if found is None:
            found = fn(*key)
            if len(cache) >= MEMO_ENTRIES:
                cache.clear()
            cache[key] = found
        return found

    run.__doc__, run.__name__ = fn.__doc__, fn.__name__
    return run


def find(messages: list[Message], mtype: int) -> bytes | None:
    """The body of the first message of ``mtype``; a shared one is unsupported."""
    for t, flags, body in messages:
        if t == mtype:
            if flags & SHARED:
                raise NativeUnsupported(f"shared header message of type {mtype}")
            return body
    return None


def dataspace(r: Reader, body: bytes) -> tuple[tuple[int, ...], tuple[int | None, ...]]:
    """``(shape, maxshape)``; ``maxshape`` holds None for unlimited axes."""
    return _dataspace(r.lsz, body)


@_memo
def _dataspace(lsz: int, body: bytes) -> tuple[tuple[int, ...], tuple[int | None, ...]]:
    if len(body) < 4:
        raise NativeFormatError("short dataspace message")
    version, rank, flags = body[0], body[1], body[2]
    if version == 1:
        p = 8
    elif version == 2:
        if body[3] == 2:
            raise NativeUnsupported("a null dataspace")
        p = 4
    else:
        raise NativeFormatError(f"dataspace version {version}")
    if rank > MAX_RANK:
        raise NativeFormatError(f"dataspace of rank {rank}")
    need = p + rank * lsz * (2 if flags & 1 else 1)
    if len(body) < need:
        raise NativeFormatError("short dataspace message")
    fmt = f"<{rank}{_LENGTH_CODES[lsz]}"
    shape = struct.unpack_from(fmt, body, p)
    if any(n > MAX_DIM for n in shape):
        raise NativeFormatError(f"absurd dimensions {shape}")
    if flags & 1:
        q = p + rank * lsz
        unlimited = (1 << (8 * lsz)) - 1
        raw = struct.unpack_from(fmt, body, q)
        maxshape: tuple[int | None, ...] = tuple(None if m == unlimited else m for m in raw)
        if any(m is not None and n > m for n, m in zip(shape, maxshape, strict=True)):
            raise NativeFormatError(f"dimensions {shape} exceed the maximum {maxshape}")
    else:
        maxshape = shape
    return shape, maxshape


@_memo
def datatype(body: bytes) -> np.dtype:
    """The numpy dtype of a fixed-point or IEEE floating-point datatype message."""
    if len(body) < 8:
        raise NativeFormatError("short datatype message")
    cls, bits = body[0] & 0x0F, body[1] | body[2] << 8 | body[3] << 16
    if not 1 <= body[0] >> 4 <= 5:  # HDF5 refuses the others: a flipped nibble, not a type
        raise NativeFormatError(f"datatype message of version {body[0] >> 4}")
    size = _U32.unpack_from(body, 4)[0]
    order = ">" if bits & 1 else "<"
    if cls == 0:  # fixed-point
        if len(body) < 12 or size not in (1, 2, 4, 8) or bits & 0x06:
            raise NativeUnsupported(f"fixed-point type of size {size}, bits {bits:#x}")
        offset, precision = struct.unpack_from("<HH", body, 8)
        if offset != 0 or precision != 8 * size:
            raise NativeUnsupported(f"fixed-point type of precision {precision}")
        return np.dtype(f"{order}{'i' if bits & 0x08 else 'u'}{size}")
    if cls == 1:  # floating-point
        if len(body) < 20 or size not in _FLOATS or bits & 0x4E:
            raise NativeUnsupported(f"floating-point type of size {size}, bits {bits:#x}")
        offset, precision, e_loc, e_size, m_loc, m_size, bias = struct.unpack_from(
            "<HHBBBBI", body, 8)
        want = _FLOATS[size]
        if (offset, m_loc, (bits >> 4) & 3) != (0, 0, 2) or (
                precision, e_loc, e_size, m_size, bias, (bits >> 8) & 0xFF) != want:
            raise NativeUnsupported("a floating-point type that is not IEEE 754")
        return np.dtype(f"{order}f{size}")
    raise NativeUnsupported(f"datatype class {cls}")


def fill_value(messages: list[Message], dtype: np.dtype) -> bytes:
    """The fill value's bytes (empty for the default, zeros).

    Raises:
        NativeUnsupported: The fill value is undefined or never written.
    """
    body = find(messages, FILL)
    if body is not None:
        if not body:
            raise NativeFormatError("empty fill value message")
        version = body[0]
        if version in (1, 2):
            if len(body) < 4:
                raise NativeFormatError("short fill value message")
            write_time, defined = body[2], body[3]
            if write_time == 1:
                raise NativeUnsupported("fill value never written")
            if version == 1 or defined:
                return _sized(body, 4, dtype)
            return b""
        if version == 3:
            flags = body[1]
            if (flags >> 2) & 3 == 1:
                raise NativeUnsupported("fill value never written")
            if flags & 0x10:
                raise NativeUnsupported("an undefined fill value")
            return _sized(body, 2, dtype) if flags & 0x20 else b""
        raise NativeFormatError(f"fill value message version {version}")
    body = find(messages, FILL_OLD)
    if body is not None:
        return _sized(body, 0, dtype)
    return b""


def _sized(body: bytes, p: int, dtype: np.dtype) -> bytes:
    if len(body) < p + 4:
        raise NativeFormatError("short fill value message")
    n = _U32.unpack_from(body, p)[0]
    if n == 0:
        return b""
    if n != dtype.itemsize or len(body) < p + 4 + n:
        raise NativeFormatError(f"fill value of {n} bytes for a {dtype.itemsize}-byte type")
    return bytes(body[p + 4:p + 4 + n])


@_memo
def filters(body: bytes | None) -> tuple[tuple[int, tuple[int, ...]], ...]:
    """``((filter id, client values), ...)`` in write order."""
    if body is None:
        return ()
    if len(body) < 2:
        raise NativeFormatError("short filter pipeline message")
    version, n = body[0], body[1]
    if version not in (1, 2):
        raise NativeFormatError(f"filter pipeline version {version}")
    p = 8 if version == 1 else 2
    out = []
    try:
        for _ in range(n):
            code = _U16.unpack_from(body, p)[0]
            if version == 1 or code >= 256:
                name_len = _U16.unpack_from(body, p + 2)[0]
                p += 4
            else:
                name_len = 0
                p += 2
            _flags, nvalues = struct.unpack_from("<HH", body, p)
            p += 4
            if version == 1:
                name_len = -(-name_len // 8) * 8
            p += name_len
            values = struct.unpack_from(f"<{nvalues}I", body, p)
            p += 4 * nvalues
            if version == 1 and nvalues % 2:
                p += 4
            out.append((code, tuple(values)))
    except struct.error as exc:
        raise NativeFormatError(f"short filter pipeline message ({exc})") from exc
    return tuple(out)


@dataclass(frozen=True)
class Layout:
    """A data layout message, decoded."""

    kind: str  # compact, contiguous, chunked
    address: int | None = None
    nbytes: int = 0
    compact: bytes = b""
    chunk_shape: tuple[int, ...] = ()
    index: int = 0  # chunk index type: 0 v1 B-tree (v3), 1 single, 2 implicit, 3 fixed, 4 ext.
    index_params: tuple[int, ...] = ()
    single_filtered: tuple[int, int] | None = None  # (stored size, filter mask)


def layout(r: Reader, body: bytes, rank: int) -> Layout:
    """Decode a layout message of version 3, 4 or 5 (others unsupported).

    Version 5 (HDF5 2.0) has version 4's encoding; only the width of filtered chunk sizes in
    the chunk index differs, and that is read from the index's entry size.
    """
    if len(body) < 2:
        raise NativeFormatError("short layout message")
    version, cls = body[0], body[1]
    if version not in (3, 4, 5):
        raise NativeUnsupported(f"layout message version {version}")
    try:
        if cls == 0:
            n = _U16.unpack_from(body, 2)[0]
            if len(body) < 4 + n:
                raise NativeFormatError("short compact layout message")
            return Layout("compact", compact=bytes(body[4:4 + n]), nbytes=n)
        if cls == 1:
            return Layout("contiguous", r.addr(body, 2), r.length(body, 2 + r.osz))
        if cls == 3:
            raise NativeUnsupported("a virtual dataset")
        if cls != 2:
            raise NativeFormatError(f"layout class {cls}")
        if version == 3:
            ndims = body[2]
            addr = r.addr(body, 3)
            dims = struct.unpack_from(f"<{ndims}I", body, 3 + r.osz)
            return Layout("chunked", addr, chunk_shape=_chunk_dims(dims, rank), index=0)
        flags, ndims, width = body[2], body[3], body[4]
        if width not in (1, 2, 4, 8):
            raise NativeFormatError(f"chunk dimension width {width}")
        p = 5
        dims = tuple(int.from_bytes(body[p + i * width:p + (i + 1) * width], "little")
                     for i in range(ndims))
        p += ndims * width
        index = body[p]
        p += 1
        params: tuple[int, ...] = ()
        single = None
        if index == 1:
            if flags & 2:
                single = (r.length(body, p), _U32.unpack_from(body, p + r.lsz)[0])
                p += r.lsz + 4
        elif index == 2:
            pass
        elif index == 3:
            params = (body[p],)
            p += 1
        elif index == 4:
            params = tuple(body[p:p + 5])
            p += 5
        elif index == 5:
            raise NativeUnsupported("a version-2 B-tree chunk index")
        else:
            raise NativeFormatError(f"chunk index type {index}")
        if len(body) < p + r.osz:
            raise NativeFormatError("short layout message")
        return Layout("chunked", r.addr(body, p), chunk_shape=_chunk_dims(dims, rank),
                      index=index, index_params=params, single_filtered=single)
    except struct.error as exc:
        raise NativeFormatError(f"short layout message ({exc})") from exc


def _chunk_dims(dims: tuple[int, ...], rank: int) -> tuple[int, ...]:
    """Chunk shape from the layout's dimensions (the last is the element size)."""
    if len(dims) != rank + 1 or any(d == 0 for d in dims):
        raise NativeFormatError(f"chunk dimensions {dims} for a rank-{rank} dataset")
    return tuple(int(d) for d in dims[:-1])


def symbol_table(r: Reader, body: bytes) -> tuple[int, int]:
    """``(B-tree address, local heap address)`` of an old-style group."""
    if len(body) < 2 * r.osz:
        raise NativeFormatError("short symbol table message")
    btree, heap = r.addr(body, 0), r.addr(body, r.osz)
    if btree is None or heap is None:
        raise NativeFormatError("symbol table with an undefined address")
    return btree, heap


def dense_storage(r: Reader, body: bytes) -> bool:
    """Whether a link info message points at dense link storage (a fractal heap)."""
    if len(body) < 2:
        raise NativeFormatError("short link info message")
    p = 2 + (8 if body[1] & 1 else 0)
    if len(body) < p + r.osz:
        raise NativeFormatError("short link info message")
    return r.addr(body, p) is not None


def link(r: Reader, body: bytes) -> tuple[str, int | None, int]:
    """``(name, address of a hard link's target or None, link type)``."""
    try:
        if body[0] != 1:
            raise NativeFormatError(f"link message version {body[0]}")
        flags = body[1]
        p = 2
        kind = 0
        if flags & 0x08:
            kind = body[p]
            p += 1
        if flags & 0x04:
            p += 8
        if flags & 0x10:
            p += 1
        width = 1 << (flags & 3)
        n = int.from_bytes(body[p:p + width], "little")
        p += width
        if len(body) < p + n:
            raise NativeFormatError("short link message")
        name = bytes(body[p:p + n]).decode("utf-8", "replace")
        p += n
        if kind == 0:
            if len(body) < p + r.osz:
                raise NativeFormatError("short link message")
            return name, r.addr(body, p), kind
        return name, None, kind
    except IndexError as exc:
        raise NativeFormatError("short link message") from exc
