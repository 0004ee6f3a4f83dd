"""The header of an ``.npy`` file, read without loading its data (numpy's own parser)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import BinaryIO

import numpy as np


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


def read_npy_header(fh: BinaryIO) -> NpyHeader:
    """Read the header of the ``.npy`` file open at its start as ``fh``.

    Raises:
        ValueError: Not an ``.npy`` header (numpy's ``read_magic``/``read_array_header_*``
            also raise ``SyntaxError``, ``TokenError`` or ``EOFError`` on some damage).
    """
    major, _ = np.lib.format.read_magic(fh)
    read = (np.lib.format.read_array_header_1_0 if major == 1
            else np.lib.format.read_array_header_2_0)
    shape, fortran, dtype = read(fh)
    return NpyHeader(tuple(int(d) for d in shape), bool(fortran), dtype, fh.tell(), major)
