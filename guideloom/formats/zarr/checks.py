"""Open-time and verify checks of a published zarr export: group and array metadata, and
every chunk having its file."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from guideloom.formats.base import fail
from guideloom.formats.zarr.store import UNREADABLE_METADATA, as_array, fs_of, zarr_store

if TYPE_CHECKING:  # zarr is imported where it is used (import guideloom stays cheap)
    from zarr import Array, Group

ALL_CHUNKS_KEY = "zarr_all_chunks"  # export.json: every chunk has its file (B7)
ZARR_GROUP_FILE = "zarr.json"
ARRAY_ENTRY = re.compile(r"^(zarr\.json|c(/\d+)+)$")


def expected_chunk_keys(arr: Any) -> set[str]:
    """The key (relative to the array) of every chunk of ``arr``."""
    import itertools
    import math

    grid = [math.ceil(s / c) if s else 0 for s, c in zip(arr.shape, arr.chunks, strict=True)]
    return {arr.metadata.encode_chunk_key(coords)
            for coords in itertools.product(*(range(g) for g in grid))}


def check_chunk_files(root: str, name: str, arr: Any) -> None:
    """Raise :class:`CorruptExportError` unless every chunk of array ``name`` has its file
    (one listing of the array's folder)."""
    fs, path = fs_of(root)
    folder = f"{path.rstrip('/')}/{name}"
    present = {f[len(folder) + 1:] for f in fs.find(folder)}
    missing = sorted(expected_chunk_keys(arr) - present)
    if missing:
        fail(root, f"{name}/{missing[0]}", f"the chunk file is missing ({len(missing)} of "
                                           f"{arr.nchunks} chunks of {name!r} are)")


def open_group_checked(root: str) -> Group:
    """The zarr group at ``root``, or :class:`CorruptExportError` naming its ``zarr.json``."""
    import zarr

    try:
        # each array's own metadata, not the consolidated copy (that one is for xarray)
        return zarr.open_group(zarr_store(root, strict=True), mode="r", use_consolidated=False)
    except FileNotFoundError:
        fail(root, "zarr.json", "missing")
    except UNREADABLE_METADATA as exc:
        fail(root, "zarr.json", f"unreadable zarr metadata ({type(exc).__name__}: {exc})")


def array_checked(root: str, group: Group, name: str) -> Array[Any]:
    """``group[name]``, or :class:`CorruptExportError` naming ``name`` (missing) or
    ``name/zarr.json`` (unreadable, or a group's)."""
    try:
        node = group[name]
    except KeyError:
        fail(root, name, "missing")
    except UNREADABLE_METADATA as exc:
        fail(root, f"{name}/zarr.json", f"unreadable zarr metadata ({type(exc).__name__}: {exc})")
    return as_array(node, root, name)
