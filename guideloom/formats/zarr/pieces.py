"""Pieces: the raw rows of a chunk a placed partition only partly fills, kept in staging
until the next partition or finalize completes the chunk."""

from __future__ import annotations

import posixpath
from typing import Any

import numpy as np

from guideloom.formats.base import Stage
from guideloom.formats.zarr.store import fs_of

PIECES_DIR = "pieces"  # staging: raw rows of the partly filled chunks at placed partitions' ends


def _piece_url(stage: Stage, alias: str, lo: int, hi: int) -> str:
    return stage.url_of(PIECES_DIR, alias, f"{lo}-{hi}.npy")


def save_piece(stage: Any, alias: str, lo: int, rows: np.ndarray) -> tuple[str, list[int]]:
    """Store final rows ``lo…lo+len(rows)-1`` of ``alias`` raw (a chunk they only partly fill,
    finished by the next partition or at finalize); return the file and ``[lo, hi]``."""
    import io

    hi = lo + len(rows)
    url = _piece_url(stage, alias, lo, hi)
    fs, path = fs_of(url)
    fs.makedirs(posixpath.dirname(path), exist_ok=True)
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(rows), allow_pickle=False)
    tmp = f"{path}.partial"
    fs.pipe_file(tmp, buf.getvalue())
    stage.move(tmp, path)
    return path, [lo, hi]


def load_piece(stage: Any, alias: str, lo: int, hi: int) -> np.ndarray:
    import io

    fs, path = fs_of(_piece_url(stage, alias, lo, hi))
    piece: np.ndarray = np.load(io.BytesIO(fs.cat_file(path)), allow_pickle=False)
    return piece
