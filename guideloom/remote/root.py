# Generated from guideloom/compat/aliases.py by `python -m guideloom.compat.generate`.
"""guideloom's earlier read path: remote data roots, defined in :mod:`guideloom.read.roots`
(``open_root`` here is :func:`~guideloom.read.roots.open_remote_root`) and their file names in
:mod:`guideloom.read.files`."""

from guideloom.read.files import DOI_PREFIX, TOKEN_HEADER, RemoteFileEntry, RemotePath
from guideloom.read.roots import (
    VERSION_ENV,
    RemoteRoot,
    checked_relpath,
    checked_storage_options,
    is_remote_root,
    open_remote_root,
)

open_root = open_remote_root

__all__ = [
    "DOI_PREFIX",
    "RemoteFileEntry",
    "RemotePath",
    "RemoteRoot",
    "TOKEN_HEADER",
    "VERSION_ENV",
    "checked_relpath",
    "checked_storage_options",
    "is_remote_root",
    "open_root",
]
