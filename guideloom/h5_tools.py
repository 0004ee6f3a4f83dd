"""One experiment's HDF5 file: open it by id (:func:`open_h5`) and print its tree
(:func:`inspect_h5`), the names rddac 2.0 and ddacs 3.2 expose in ``h5_tools``."""

from __future__ import annotations

from pathlib import Path

import h5py

from guideloom.sources import open_h5

__all__ = ["DEFAULT_DATA_DIR", "inspect_h5", "open_h5"]

#: The data directory rddac and ddacs default to.
DEFAULT_DATA_DIR = "./data"


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
