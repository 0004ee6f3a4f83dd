"""The manifest of a remote release, fetched by URL or through a DOI.

:func:`guideloom.load` calls :func:`remote_manifest` when ``data_dir`` (or ``source``) is an
``https://``/fsspec URL or a DOI: ``metadata.json`` is fetched whole (it is small; so is the
index table, fetched by :meth:`Dataset.index <guideloom.croissant.Dataset.index>`), the HDF5
archives are read later by byte ranges.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from guideloom.errors import ManifestError
from guideloom.remote.fetch import fetch_bytes
from guideloom.remote.root import RemoteRoot, is_remote_root, open_root


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
    root = open_root(data_dir, storage_options=storage_options)
    if isinstance(source, Mapping):
        return json.loads(json.dumps(source)), root
    where: Any
    if source is None:
        data, where = fetch_bytes(root, metadata_file, "the Croissant manifest")
    elif is_remote_root(source):
        parent, _, name = str(source).rpartition("/")
        data, where = fetch_bytes(open_root(parent, storage_options=root.options), name,
                                  "the Croissant manifest")
    else:
        where = Path(os.path.abspath(source))
        if not where.is_file():
            raise FileNotFoundError(f"Croissant manifest not found: {where}")
        data = where.read_bytes()
    try:
        return json.loads(data.decode("utf-8")), root
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ManifestError(f"{where}: not valid JSON ({exc})") from exc
