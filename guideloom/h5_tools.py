"""One experiment's HDF5 file: open it by id (:func:`open_h5`) and print its tree
(:func:`inspect_h5`), the names rddac 2.0 and ddacs 3.2 expose in ``h5_tools``."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import h5py

from guideloom.errors import ExperimentNotFoundError
from guideloom.read.hdf5 import open_h5_file
from guideloom.read.roots import open_root
from guideloom.select.presets import DDACS_SPEC, RDDAC_SPEC, DatasetSpec

if TYPE_CHECKING:
    from guideloom.select.parse import Dataset

#: ``DDACS_SPEC``, ``RDDAC_SPEC`` and ``DatasetSpec`` are here because rddac's and ddacs'
#: ``h5_tools`` had them (their ``spec`` argument's default and type).
__all__ = ["DDACS_SPEC", "DEFAULT_DATA_DIR", "RDDAC_SPEC", "DatasetSpec", "inspect_h5", "open_h5"]

#: The data directory rddac and ddacs default to.
DEFAULT_DATA_DIR = "./data"


def open_h5(
    sim_id: Any,
    data_dir: str | Path | None = None,
    source: str | Path | None = None,
    dataset: Dataset | None = None,
    *,
    spec: DatasetSpec | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> h5py.File:
    """Open one experiment's HDF5 file, from a loose file or a zip member, read-only
    (rddac's ``open_h5(id, source, data_dir)`` order works too).

    A remote ``data_dir`` (an ``https://`` or fsspec URL, a DOI, or a dataset loaded from one;
    ``storage_options`` for fsspec) is read by byte ranges: h5py asks for the blocks it reads,
    so walking a whole file costs many requests (``iter_view`` reads a view's fields with a
    few).

    Raises:
        ExperimentNotFoundError: No file holds this experiment (a ``KeyError`` and a
            ``FileNotFoundError``).
        CorruptDataError: The file or member is damaged or not HDF5.
    """
    from guideloom.select.manifest import is_manifest, load

    if is_manifest(data_dir) and not is_manifest(source):
        data_dir, source = source, data_dir  # rddac's order: open_h5(id, source, data_dir)
    ds = dataset if dataset is not None else load(data_dir, source, spec=spec,
                                                    storage_options=storage_options)
    root = open_root(data_dir if data_dir is not None else ds.data_dir,
                     storage_options=storage_options)
    loc = root.locations(ds, [sim_id]).get(sim_id)
    if loc is None:
        raise ExperimentNotFoundError(root.missing_experiment(ds, sim_id))
    return open_h5_file(loc)


def inspect_h5(file_or_path: h5py.File | h5py.Group | str | Path) -> None:
    """Print the group/dataset tree of an HDF5 file: attributes as ``@name = value``, groups
    with a trailing ``/``, datasets with their shape (``scalar`` for none) and dtype.

    Args:
        file_or_path: An open ``h5py.File`` (e.g. from :func:`open_h5`) or a path to a file.
    """
    if isinstance(file_or_path, h5py.Group):
        member = getattr(getattr(file_or_path, "fileobj", None), "name", None)  # zip member
        _print_tree(file_or_path, Path(member or file_or_path.file.filename).name)
        return
    with h5py.File(file_or_path, "r") as f:
        _print_tree(f, Path(file_or_path).name)


def _print_tree(root: h5py.Group, title: str) -> None:
    print(title if root.name == "/" else f"{title}:{root.name}")
    for line in _lines(root, ""):
        print(line)


def _lines(node: h5py.HLObject, indent: str) -> list[str]:
    entries: list[tuple[str, h5py.HLObject | None]] = [
        (f"@{key} = {' '.join(str(value).split())}", None) for key, value in node.attrs.items()]
    if isinstance(node, h5py.Group):
        for key, child in node.items():
            if isinstance(child, h5py.Group):
                entries.append((f"{key}/", child))
            elif isinstance(child, h5py.Dataset):
                shape = str(child.shape) if child.shape else "scalar"
                entries.append((f"{key}  {shape} {child.dtype}", child))
    out: list[str] = []
    for n, (text, child) in enumerate(entries):
        last = n == len(entries) - 1
        out.append(f"{indent}{'└── ' if last else '├── '}{text}")
        if child is not None:
            out.extend(_lines(child, indent + ("    " if last else "│   ")))
    return out
