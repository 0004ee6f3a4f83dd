"""Exports written by rddac 2.0 / ddacs 3.2 ``export_to_numpy``: ``sim_ids.npy`` and one
``<field>.npy`` per field, no ``export.json``.

:func:`describe_rddac_export` reads the ``.npy`` headers (never the data) and returns the
``export.json``-shaped description guideloom's npy reader needs, marked ``"unverified"``: such a
directory records no checksums, so only its shapes and row counts can be checked.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from guideloom.errors import IncompleteExportError
from guideloom.formats.layout import EXPORT_MANIFEST, SIM_IDS_FILE
from guideloom.formats.npy_header import read_npy_header


def is_rddac_export(root: str | os.PathLike[str], *, only_npy: bool = False) -> bool:
    """True for a local directory with ``sim_ids.npy`` and no ``export.json``.

    With ``only_npy`` the directory must hold nothing but ``.npy`` files (what rddac writes), the
    test before guideloom may replace it.
    """
    path = os.fspath(root)
    if not (os.path.isdir(path) and os.path.isfile(os.path.join(path, SIM_IDS_FILE))
            and not os.path.exists(os.path.join(path, EXPORT_MANIFEST))):
        return False
    if only_npy:
        with os.scandir(path) as entries:
            return all(e.is_file(follow_symlinks=False) and e.name.endswith(".npy")
                       for e in entries)
    return True


def _header(path: str) -> tuple[tuple[int, ...], np.dtype]:
    try:
        with open(path, "rb") as fh:
            header = read_npy_header(fh)
            shape, dtype = header.shape, header.dtype
    except (OSError, ValueError) as exc:
        raise IncompleteExportError(f"{path} is not a readable .npy file ({exc})") from exc
    return tuple(shape), np.dtype(dtype)


def describe_rddac_export(root: str | os.PathLike[str]) -> dict[str, Any]:
    """The description of an rddac export directory, for :class:`guideloom.Export`.

    Raises:
        IncompleteExportError: No field file beside ``sim_ids.npy``, a file that is not
            ``.npy``, or a field whose row count differs from ``sim_ids``; names the file.
    """
    path = os.fspath(root)
    id_shape, id_dtype = _header(os.path.join(path, SIM_IDS_FILE))
    if len(id_shape) != 1:
        raise IncompleteExportError(f"{path}/{SIM_IDS_FILE} has shape {id_shape}, not (n,)")
    count = id_shape[0]
    fields: dict[str, Any] = {}
    for name in sorted(os.listdir(path)):
        stem, ext = os.path.splitext(name)
        if ext != ".npy" or name == SIM_IDS_FILE:
            continue
        shape, dtype = _header(os.path.join(path, name))
        if dtype.hasobject or not shape or shape[0] != count:
            raise IncompleteExportError(
                f"{path}/{name} has shape {shape} and dtype {dtype}; an rddac export field "
                f"holds {count} rows (one per id in {SIM_IDS_FILE}) of a plain dtype")
        fields[stem] = {"shape": list(shape[1:]), "dtype": dtype.str}
    if not fields:
        raise IncompleteExportError(f"{path} holds {SIM_IDS_FILE} but no field .npy files")
    return {"kind": "npy", "view": None, "count": count, "fields": fields,
            "sim_ids_dtype": id_dtype.str, "export_id": None, "unverified": True,
            "written_by": "rddac/ddacs export_to_numpy (no export.json)"}
