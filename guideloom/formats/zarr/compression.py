"""The chunks' codecs: the ``compressor`` option's values and the zarr codec for each."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:  # zarr is imported where it is used (import guideloom stays cheap)
    from zarr.codecs import BloscCodec, GzipCodec


DEFAULT_COMPRESSOR = "lz4"
BLOSC_LEVEL = 5
GZIP_LEVEL = 4
ZARR_COMPRESSORS = ("lz4", "zstd", "gzip", "none")  # the default first
_BLOSC_CNAMES: dict[str, Literal["lz4", "zstd"]] = {"lz4": "lz4", "zstd": "zstd"}


def zarr_compressor(name: str | None) -> BloscCodec | GzipCodec | None:
    """A zarr v3 codec for ``"lz4"`` (default), ``"zstd"``, ``"gzip"`` or ``None``."""
    from zarr.codecs import BloscCodec, GzipCodec

    if name is None or name == "none":
        return None
    cname = _BLOSC_CNAMES.get(name)
    if cname is not None:
        return BloscCodec(cname=cname, clevel=BLOSC_LEVEL, shuffle="shuffle")
    if name == "gzip":
        return GzipCodec(level=GZIP_LEVEL)
    raise ValueError(f"unknown zarr compressor {name!r}; use 'lz4', 'zstd', 'gzip' or None")
