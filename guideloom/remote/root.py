"""Compatibility stub: remote data roots now live in guideloom.read.roots (and their file
names in guideloom.read.files); ``open_root`` here is
:func:`guideloom.read.roots.open_remote_root`, which returns a
:class:`~guideloom.read.roots.RemoteRoot` for a URL or DOI."""

from __future__ import annotations

from guideloom.read.files import DOI_PREFIX, TOKEN_HEADER, RemoteFileEntry, RemotePath
from guideloom.read.roots import (
    VERSION_ENV,
    RemoteRoot,
    checked_relpath,
    checked_storage_options,
    is_remote_root,
)
from guideloom.read.roots import open_remote_root as open_root

__all__ = ["DOI_PREFIX", "TOKEN_HEADER", "VERSION_ENV", "RemoteFileEntry", "RemotePath",
           "RemoteRoot", "checked_relpath", "checked_storage_options", "is_remote_root",
           "open_root"]
