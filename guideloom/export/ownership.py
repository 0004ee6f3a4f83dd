"""Whether a published directory is a guideloom export made only of its own files.

``overwrite=True`` replaces a target only when this module says so: the directory's
``export.json`` is a valid guideloom manifest, and every entry in it is one of the files its
format writes (see :meth:`~guideloom.formats.base.ExportFormat.own_entries`), or it is an
export rddac/ddacs wrote (``sim_ids.npy`` and other ``.npy`` files, nothing else). Anything else
(another tool's ``export.json``, a photo copied into an export) makes guideloom refuse.
"""

from __future__ import annotations

import fsspec
from fsspec.implementations.local import LocalFileSystem

from guideloom.errors import IncompleteExportError
from guideloom.formats.layout import read_export_manifest

SHOWN = 5  # foreign entries named in a message


def why_not_replaceable(fs: fsspec.AbstractFileSystem, path: str, url: str) -> str | None:
    """Why the directory at ``path`` may not be replaced by an export, or ``None`` if it may."""
    from guideloom.formats import get_format
    from guideloom.formats.rddac_layout import is_rddac_export

    if isinstance(fs, LocalFileSystem) and is_rddac_export(path, only_npy=True):
        return None  # rddac's own layout: .npy files only, sim_ids.npy among them
    try:
        _, manifest = read_export_manifest(url)
    except (IncompleteExportError, FileNotFoundError) as exc:
        return str(exc)
    try:
        fmt = get_format(str(manifest["kind"]))
    except ValueError as exc:
        return str(exc)
    try:
        foreign = fmt.foreign_entries(fs, path, manifest)
    except (OSError, ValueError) as exc:  # e.g. a damaged sim_ids.npy of an npz export
        return f"its files cannot be listed against export.json ({exc})"
    if foreign:
        more = f" and {len(foreign) - SHOWN} more" if len(foreign) > SHOWN else ""
        return (f"it holds entries that are not its export's own files: "
                f"{', '.join(foreign[:SHOWN])}{more}")
    return None
