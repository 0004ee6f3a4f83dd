"""Where an export's files are, and its manifest: the names every format and tool shares.

A published export is a directory (or a zarr store URL) holding the format's data files,
``sim_ids`` and ``export.json``, written last. While a job runs, everything lives in a hidden
staging directory beside the target (``.NAME.guideloom-staging``). This module knows those names
and reads ``export.json``; it imports neither the executor nor Dask.
"""

from __future__ import annotations

import json
import os
import posixpath
from typing import NoReturn, cast

import fsspec
from fsspec.implementations.local import LocalFileSystem

from guideloom.errors import (
    CorruptExportError,
    IncompleteExportError,
    NotAnExportError,
    UnsafeNameError,
)
from guideloom.formats.manifest_types import ExportManifest
from guideloom.runtime.caches import memoize

EXPORT_MANIFEST = "export.json"
MANIFEST_FORMAT = "guideloom-export"
FORMAT_VERSION = 1
STAGING_SUFFIX = ".guideloom-staging"
SIM_IDS_FILE = "sim_ids.npy"
SIM_IDS_ARRAY = "sim_ids"
CROISSANT_FILE = "croissant.json"
PROVENANCE_FILE = "provenance.json"  # what each row came from (guideloom.export.provenance)
# the export's own files and arrays (an output name may equal none of them, nor their stems)
RESERVED_NAMES = frozenset({
    EXPORT_MANIFEST, SIM_IDS_FILE, SIM_IDS_ARRAY, "checksums.json", "croissant.json",
    "zarr.json", "record_offsets.npy", "record_offsets", PROVENANCE_FILE, "provenance",
})


def fail(root: str, name: str, what: str) -> NoReturn:
    """Raise :class:`CorruptExportError` for file ``name`` of the export at ``root``."""
    raise CorruptExportError(f"{root}/{name}: {what}; the export is damaged: export it again")


def unsafe_name_reason(name: object) -> str | None:
    """Why ``name`` cannot name an output file or array, or ``None`` when it can.

    A safe name is a non-empty string that is one plain path component: no ``/``, ``\\`` or
    NUL, not ``.``/``..`` and not starting with ``.`` (hidden and staging names), and none of
    :data:`RESERVED_NAMES`.
    """
    if not isinstance(name, str):
        return f"it is a {type(name).__name__}, not a string"
    if not name:
        return "it is empty"
    if "/" in name or "\\" in name or "\0" in name:
        return "it holds a path separator or NUL"
    if name.startswith("."):
        return "it starts with '.' (hidden names and '..' are not allowed)"
    if name in RESERVED_NAMES or name.lower() in RESERVED_NAMES:
        return "it is the name of one of the export's own files"
    return None


def check_output_name(name: object, where: str) -> str:
    """Return ``name`` if it is a safe output name (see :func:`unsafe_name_reason`).

    Raises:
        UnsafeNameError: Naming ``where`` (e.g. the experiment id) and the bad name.
    """
    reason = _reason_cached(name) if isinstance(name, str) else unsafe_name_reason(name)
    if reason is not None:
        raise UnsafeNameError(
            f"{where}: output name {name!r} cannot name a file or array of the export: "
            f"{reason}; rename it (a plain name such as 'force') in the view or transform")
    return name  # type: ignore[return-value]


@memoize("output_names")
def _reason_cached(name: str) -> str | None:
    return unsafe_name_reason(name)


def array_file(alias: str) -> str:
    """The file of one alias in an npy export: ``{alias}.npy``."""
    return f"{check_output_name(alias, 'npy export')}.npy"


def resolve_target(target: str | os.PathLike[str]) -> tuple[fsspec.AbstractFileSystem, str, str]:
    """``(filesystem, path on it, text for messages)`` of a local path or an fsspec URL."""
    text = os.fspath(target)
    fs, path = fsspec.core.url_to_fs(text)
    if isinstance(fs, LocalFileSystem):
        path = os.path.abspath(path)
        text = path
    return fs, path.rstrip("/") or "/", text


def directory_identity(root: str) -> tuple[int, int] | None:
    """``(device, inode)`` of a local export directory, or ``None`` for a URL.

    Publishing renames a new directory into place, so a replaced export has a new identity.
    """
    if "://" in root:
        return None
    try:
        st = os.stat(root)
    except FileNotFoundError:
        raise CorruptExportError(f"{root} was removed since it was opened") from None
    return st.st_dev, st.st_ino


def staging_dir(target_path: str) -> str:
    """The hidden staging directory beside ``target_path``."""
    parent, name = posixpath.split(target_path.rstrip("/"))
    return posixpath.join(parent, f".{name}{STAGING_SUFFIX}")


def target_of_staging_dir(path: str) -> str | None:
    """The target whose staging directory ``path`` is, or ``None``."""
    parent, name = posixpath.split(path.rstrip("/"))
    if name.startswith(".") and name.endswith(STAGING_SUFFIX):
        return posixpath.join(parent, name[1:-len(STAGING_SUFFIX)])
    return None


def read_export_manifest(root: str | os.PathLike[str]) -> tuple[str, ExportManifest]:
    """Return ``(root, export.json)`` of a published export.

    Raises:
        FileNotFoundError: Nothing is at ``root``.
        IncompleteExportError: ``root`` is unfinished, a staging area, damaged or foreign.
    """
    fs, path, text = resolve_target(root)
    if not fs.exists(path):
        if fs.exists(staging_dir(path)):
            raise IncompleteExportError(
                f"{text} is not published yet: its job is running or was interrupted "
                f"(staging area {staging_dir(path)}); rerun the export to resume it"
            )
        raise FileNotFoundError(f"no export at {text}")
    if target_of_staging_dir(path) is not None:
        raise IncompleteExportError(f"{text} is the staging area of an unfinished export")
    try:
        with fs.open(f"{path}/{EXPORT_MANIFEST}", "rb") as fh:
            manifest = json.loads(fh.read())
    except FileNotFoundError:
        raise NotAnExportError(
            f"{text} has no {EXPORT_MANIFEST}: not a complete guideloom export"
        ) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:  # written last: torn, or edited
        raise CorruptExportError(f"{text}/{EXPORT_MANIFEST} is damaged ({exc}); the export is "
                                 "damaged: export it again") from exc
    if manifest.get("format") != MANIFEST_FORMAT:
        raise IncompleteExportError(f"{text}/{EXPORT_MANIFEST} is not a guideloom export manifest")
    version = manifest.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise IncompleteExportError(f"{text}/{EXPORT_MANIFEST} has format version {version!r}; "
                                    f"this guideloom reads versions up to {FORMAT_VERSION}")
    missing = [k for k in ("kind", "count", "fields") if k not in manifest]
    if missing:
        raise CorruptExportError(f"{text}/{EXPORT_MANIFEST} lacks {', '.join(missing)}")
    fields = manifest["fields"]
    for name in fields if isinstance(fields, dict) else ():  # readers make paths of them
        reason = unsafe_name_reason(name)
        if reason is not None:
            raise CorruptExportError(f"{text}/{EXPORT_MANIFEST} names the field {name!r}, "
                                     f"which cannot be a file of the export ({reason})")
    # an ExportManifest as far as checked here (format, version, kind, count, fields); one of
    # an older guideloom may lack the keys ExportManifest marks NotRequired
    return (path if isinstance(fs, LocalFileSystem) else text), cast(ExportManifest, manifest)
