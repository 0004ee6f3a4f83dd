"""What the native reader learns about a file: dataset descriptions and chunk indexes.

Both are plain data: picklable, and JSON-serialisable through :meth:`FileMeta.to_json` and
:meth:`FileMeta.from_json`, so that a cache can keep them and a later open reads no metadata.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from guideloom.h5native.errors import NativeFormatError

META_VERSION = 1


@dataclass(frozen=True)
class DatasetInfo:
    """One dataset: everything reading its values needs.

    Attributes:
        shape: The current shape.
        maxshape: The maximum shape (``None`` for an unlimited axis).
        dtype: The stored numpy dtype string (byte order explicit, e.g. ``">f8"``).
        layout: ``"compact"``, ``"contiguous"`` or ``"chunked"``.
        chunk_shape: Chunk shape (chunked layout), else None.
        filters: ``(filter id, client values)`` in the order they were applied on write.
        fill: The fill value's bytes (``itemsize`` of them).
        address: File address of contiguous data (None when not allocated).
        nbytes: Stored bytes of contiguous data.
        compact: The data of a compact dataset.
        chunks: Allocated chunks ``(element offset per axis, filter mask, address, size)``,
            by address.
    """

    shape: tuple[int, ...]
    maxshape: tuple[int | None, ...]
    dtype: str
    layout: str
    chunk_shape: tuple[int, ...] | None = None
    filters: tuple[tuple[int, tuple[int, ...]], ...] = ()
    fill: bytes = b""
    address: int | None = None
    nbytes: int = 0
    compact: bytes = b""
    chunks: tuple[tuple[tuple[int, ...], int, int, int], ...] = ()

    @property
    def np_dtype(self) -> np.dtype:
        return np.dtype(self.dtype)

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    def fill_value(self) -> np.ndarray:
        """The fill value as a 0-d array (zeros when the file defines none)."""
        dt = self.np_dtype
        if not self.fill:
            return np.zeros((), dt)
        return np.frombuffer(self.fill, dt, count=1).reshape(())

    def to_dict(self) -> dict[str, Any]:
        return {
            "shape": list(self.shape), "maxshape": list(self.maxshape), "dtype": self.dtype,
            "layout": self.layout,
            "chunk_shape": None if self.chunk_shape is None else list(self.chunk_shape),
            "filters": [[code, list(values)] for code, values in self.filters],
            "fill": self.fill.hex(), "address": self.address, "nbytes": self.nbytes,
            "compact": self.compact.hex(),
            "chunks": [[list(o), m, a, s] for o, m, a, s in self.chunks],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DatasetInfo:
        try:
            return cls(
                shape=tuple(int(n) for n in d["shape"]),
                maxshape=tuple(None if n is None else int(n) for n in d["maxshape"]),
                dtype=str(np.dtype(d["dtype"]).str), layout=str(d["layout"]),
                chunk_shape=None if d["chunk_shape"] is None else tuple(
                    int(n) for n in d["chunk_shape"]),
                filters=tuple((int(c), tuple(int(v) for v in vals)) for c, vals in d["filters"]),
                fill=bytes.fromhex(d["fill"]),
                address=None if d["address"] is None else int(d["address"]),
                nbytes=int(d["nbytes"]), compact=bytes.fromhex(d["compact"]),
                chunks=tuple((tuple(int(n) for n in o), int(m), int(a), int(s))
                             for o, m, a, s in d["chunks"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise NativeFormatError(f"damaged dataset metadata record ({exc})") from exc


@dataclass
class FileMeta:
    """What has been parsed of one file: its superblock's sizes and the datasets read so far.

    Attributes:
        offset_size: Bytes of a file address.
        length_size: Bytes of a length.
        root: Address of the root group's object header.
        datasets: ``{path: DatasetInfo}``; paths without a leading slash.
    """

    offset_size: int
    length_size: int
    root: int
    datasets: dict[str, DatasetInfo] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({
            "version": META_VERSION, "offset_size": self.offset_size,
            "length_size": self.length_size, "root": self.root,
            "datasets": {p: i.to_dict() for p, i in self.datasets.items()},
        }, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> FileMeta:
        try:
            d = json.loads(text)
            if d.get("version") != META_VERSION:
                raise NativeFormatError(f"metadata record version {d.get('version')!r}, "
                                        f"expected {META_VERSION}")
            return cls(int(d["offset_size"]), int(d["length_size"]), int(d["root"]),
                       {str(p): DatasetInfo.from_dict(i) for p, i in d["datasets"].items()})
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise NativeFormatError(f"damaged metadata record ({exc})") from exc
