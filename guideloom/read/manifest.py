"""A dataset's manifest, from its local folder or fetched by URL or through a DOI.

:func:`guideloom.load` calls :func:`read_manifest`. When ``data_dir`` (or ``source``) is an
``https://``/fsspec URL or a DOI (:func:`remote_manifest`), ``metadata.json`` is fetched whole
(it is small; so is the index table, fetched by :meth:`Dataset.index
<guideloom.select.manifest.Dataset.index>`), the HDF5 archives are read later by byte ranges.
"""

from __future__ import annotations

import copy
import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from guideloom.errors import ManifestError
from guideloom.read.access import read_bytes
from guideloom.read.roots import (
    DataRoot,
    LocalRoot,
    RemoteRoot,
    is_remote_root,
    open_remote_root,
    refuse_local_storage_options,
)

logger = logging.getLogger(__name__)


def read_manifest(data_dir: Any, source: Any, metadata_file: str, default_data_dir: str | Path,
                  storage_options: Mapping[str, Any] | None = None
                  ) -> tuple[dict[str, Any], Path | None, DataRoot]:
    """The parsed manifest, its file (``None`` for a parsed dict or a remote one) and the
    root of the data directory: the :class:`LocalRoot` of an absolute folder, or the
    :class:`RemoteRoot` of a URL or DOI (``data_dir`` may be a root already).

    ``data_dir`` ``None`` is the folder of ``source`` (its URL's folder for a remote one), else
    ``default_data_dir``; ``source`` ``None`` is ``data_dir/metadata_file``.

    Raises:
        FileNotFoundError: The data directory or the manifest does not exist.
        ManifestError: The manifest is not valid JSON.
        TypeError: ``data_dir`` is a mapping.
        ValueError: ``storage_options`` with a local ``data_dir``.
    """
    if is_remote_root(data_dir) or (data_dir is None and is_remote_root(source)):
        manifest, root = remote_manifest(data_dir, source, metadata_file, storage_options)
        return manifest, None, root
    refuse_local_storage_options(storage_options, data_dir)
    if data_dir is None:  # beside the manifest file, else the spec's default (./data)
        data_dir = (Path(source).parent if isinstance(source, str | os.PathLike)
                    else default_data_dir)
    if isinstance(data_dir, Mapping):
        raise TypeError("load() takes one manifest: give data_dir as a path, not a mapping")
    if isinstance(data_dir, DataRoot):
        data_dir = data_dir.local_folder()
    folder = Path(os.path.abspath(data_dir))  # absolute here: Dask workers run elsewhere
    if isinstance(source, Mapping):
        return copy.deepcopy(dict(source)), None, LocalRoot(folder)
    if source is None and not folder.is_dir():
        raise FileNotFoundError(f"data directory not found: {folder}")
    manifest_path = (Path(os.path.abspath(source)) if source is not None
                     else folder / metadata_file)
    if not manifest_path.is_file():
        raise FileNotFoundError(f"Croissant manifest not found: {manifest_path}")
    try:
        manifest = json.loads(read_bytes(manifest_path).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ManifestError(f"{manifest_path}: not valid JSON ({exc})") from exc
    return manifest, manifest_path, LocalRoot(folder)


def remote_manifest(data_dir: Any, source: Any, metadata_file: str,
                    storage_options: Mapping[str, Any] | None = None
                    ) -> tuple[dict[str, Any], RemoteRoot]:
    """The parsed manifest and the :class:`RemoteRoot` its files are read from.

    ``data_dir`` is the release's URL or DOI (``None``: the folder of ``source``'s URL);
    ``source`` the manifest (a URL, a local path, a parsed dict, or ``None`` for
    ``data_dir/metadata_file``); ``storage_options`` the fsspec options of the root (and of
    a manifest URL).

    Raises:
        FileNotFoundError: The manifest is not there.
        ManifestError: It is not valid JSON.
    """
    if data_dir is None:  # the manifest's URL names the folder
        data_dir = str(source).rsplit("/", 1)[0]
    root = open_remote_root(data_dir, storage_options=storage_options)
    if isinstance(source, Mapping):
        return json.loads(json.dumps(source)), root
    where: Any
    if source is None:
        data, where = root.read_bytes(metadata_file, "the Croissant manifest")
    elif is_remote_root(source):
        parent, _, name = str(source).rpartition("/")
        data, where = open_remote_root(parent, storage_options=root.options).read_bytes(
            name, "the Croissant manifest")
    else:
        where = Path(os.path.abspath(source))
        if not where.is_file():
            raise FileNotFoundError(f"Croissant manifest not found: {where}")
        data = read_bytes(where)
    try:
        return json.loads(data.decode("utf-8")), root
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ManifestError(f"{where}: not valid JSON ({exc})") from exc
