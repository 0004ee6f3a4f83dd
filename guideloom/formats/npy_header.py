"""The header of an ``.npy`` file, read without loading its data (numpy's own parser)."""

from __future__ import annotations

import io
from dataclasses import dataclass, replace
from tokenize import TokenError
from typing import BinaryIO

import numpy as np

from guideloom.runtime.caches import memoize


@dataclass(frozen=True)
class NpyHeader:
    """What an ``.npy`` header says.

    Attributes:
        shape: The array's shape.
        fortran: Fortran (column-major) order.
        dtype: The element type.
        offset: Where the data starts (the header's length).
        major: The format's major version (1: a 2-byte header length, 2 and 3: 4 bytes).
    """

    shape: tuple[int, ...]
    fortran: bool
    dtype: np.dtype
    offset: int
    major: int


MAGIC = b"\x93NUMPY"


def read_npy_header(fh: BinaryIO) -> NpyHeader:
    """Read the header of the ``.npy`` file open at its start as ``fh``.

    The header's bytes are parsed by numpy once per process (an export reads the same few
    headers at every partition): the parse is kept by the bytes themselves.

    Raises:
        ValueError: Not an ``.npy`` header (numpy's ``read_magic``/``read_array_header_*``
            also raise ``SyntaxError``, ``TokenError`` or ``EOFError`` on some damage).
    """
    start = fh.tell()
    prefix = fh.read(8)
    if len(prefix) == 8 and prefix[:6] == MAGIC and prefix[6] in (1, 2, 3):
        width = 2 if prefix[6] == 1 else 4
        size = fh.read(width)
        text = fh.read(int.from_bytes(size, "little")) if len(size) == width else b""
        if len(size) == width and len(text) == int.from_bytes(size, "little"):
            header = _parsed(prefix + size + text)
            if header is not None:
                return header if not start else replace(header, offset=start + header.offset)
    fh.seek(start)  # damaged or unknown: numpy's own parser raises what it raises
    return _parse(fh)


def _parse(fh: BinaryIO) -> NpyHeader:
    major, _ = np.lib.format.read_magic(fh)
    read = (np.lib.format.read_array_header_1_0 if major == 1
            else np.lib.format.read_array_header_2_0)
    shape, fortran, dtype = read(fh)
    return NpyHeader(tuple(int(d) for d in shape), bool(fortran), dtype, fh.tell(), major)


@memoize("npy_headers")
def _parsed(blob: bytes) -> NpyHeader | None:
    """numpy's parse of a whole header's bytes, or ``None`` when it refuses them (the caller
    then parses the file again, to raise numpy's own error)."""
    try:
        return _parse(io.BytesIO(blob))
    except (ValueError, SyntaxError, TokenError, EOFError):
        return None
