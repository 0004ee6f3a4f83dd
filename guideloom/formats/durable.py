"""Making written files durable: fsync files and the directories that name them.

A file's data and its directory entry are separate on disk: after a power loss a file that was
written but not fsynced comes back empty, and one whose directory was not fsynced may be gone.
Writers call these before the marker that says their work is done; the fsyncs of one call are
issued together (:mod:`guideloom.runtime.flush`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from guideloom.runtime.flush import fsync_paths


def fsync_path(path: str) -> None:
    """fsync one file or directory."""
    fd = os.open(path, os.O_RDONLY)  # a directory opens read-only too
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_files(files: Iterable[str], top: str, linked: Iterable[str] = ()) -> None:
    """fsync ``files`` and every directory from their folders (and those of ``linked``:
    new names of files already durable, such as hard links) up to ``top`` (included), each
    once, all together (:mod:`guideloom.runtime.flush`: one journal commit for the lot
    instead of one per file; every one of them is durable when this returns, which is all
    that the marker or manifest written next needs)."""
    top = os.path.abspath(top)
    folders: set[str] = set()
    files = list(files)
    for path in (*files, *linked):
        folder = os.path.dirname(os.path.abspath(path))
        while folder.startswith(top) and folder not in folders:
            folders.add(folder)
            if folder == top:
                break
            folder = os.path.dirname(folder)
    fsync_paths([*files, *sorted(folders, key=len, reverse=True)])


def fsync_tree(top: str) -> None:
    """fsync every file and directory under ``top`` (and ``top``), all together."""
    files = [os.path.join(d, f) for d, _, names in os.walk(top) for f in names]
    folders = [d for d, _, _ in os.walk(top)]
    fsync_paths([*files, *sorted(folders, key=len, reverse=True)])
