"""Loading a dataset whose files are remote: the manifest and the index table by URL or DOI.

:func:`load_remote` is what :func:`guideloom.load` does when ``data_dir`` (or ``source``) is an
``https://``/fsspec URL or a DOI: ``metadata.json`` and ``process_parameters.csv`` are fetched
whole (they are small), the HDF5 archives are read later by byte ranges.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guideloom.errors import ManifestError
from guideloom.remote.root import RemotePath, RemoteRoot, is_remote_root, open_root

if TYPE_CHECKING:
    from guideloom.croissant import Dataset, DatasetSpec
    from guideloom.index_table import IndexTable


def fetch_bytes(root: RemoteRoot, relpath: str, what: str) -> tuple[bytes, RemotePath]:
    """The whole file ``relpath`` of ``root`` and its :class:`RemotePath`.

    Raises:
        FileNotFoundError: The root has no such file (naming its URL and ``what``).
    """
    from guideloom.remote.locations import source_of

    entry = root.entry(relpath)
    if entry is None:
        raise FileNotFoundError(f"{what} {relpath!r} is not in {root}")
    try:
        src = source_of(entry.url, entry.size, root.headers)
        return src.read(0, src.size()), RemotePath(entry.url)
    except (OSError, ValueError) as exc:
        raise FileNotFoundError(f"{what} not found or not readable: {entry.url} ({exc})") \
            from exc


def load_remote(data_dir: Any, source: Any, spec: DatasetSpec) -> Dataset:
    """The :class:`~guideloom.croissant.Dataset` of a remote release (see :func:`load`)."""
    from guideloom.croissant import _parse

    if data_dir is None:  # the manifest's URL names the folder
        text = str(source)
        data_dir = text.rsplit("/", 1)[0] if "/" in text.split("://", 1)[-1] else text
    root = open_root(data_dir)
    if isinstance(source, Mapping):
        return _parse(json.loads(json.dumps(source)), None, root, spec)  # type: ignore[arg-type]
    if source is None:
        data, where = fetch_bytes(root, spec.metadata_file, "the Croissant manifest")
    elif is_remote_root(source):
        parent, _, name = str(source).rpartition("/")
        data, where = fetch_bytes(open_root(parent), name, "the Croissant manifest")
    else:
        path = Path(os.path.abspath(source))
        if not path.is_file():
            raise FileNotFoundError(f"Croissant manifest not found: {path}")
        data, where = path.read_bytes(), path  # type: ignore[assignment]
    try:
        manifest = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ManifestError(f"{where}: not valid JSON ({exc})") from exc
    return _parse(manifest, None, root, spec)  # type: ignore[arg-type]


def read_remote_index(ds: Dataset, data_types: Mapping[str, str]) -> IndexTable:
    """The typed index table of a remote dataset (fetched whole)."""
    from guideloom.index_table import read_index_bytes

    root: RemoteRoot = ds.data_dir  # type: ignore[assignment]
    data, where = fetch_bytes(root, ds.index_file, "the index table (named by the manifest)")
    return read_index_bytes(data, where, ds.id_column, data_types)


def index_bytes(ds: Dataset) -> bytes:
    """The index table's bytes (for the job's fingerprint)."""
    return fetch_bytes(ds.data_dir, ds.index_file, "the index table")[0]  # type: ignore[arg-type]
