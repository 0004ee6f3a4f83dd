"""What an export may write: a target that is safe to replace, held by one run at a time.

* :func:`check_target` refuses, before any work, a target that is ``/``, the home directory,
  the data directory or one of its parents, and a target that exists but is neither an empty
  directory nor a guideloom export (valid manifest) holding only its own files (with or without
  ``overwrite``: guideloom replaces only what it wrote; see :mod:`guideloom.export.ownership`).
* :class:`TargetLock` holds an exclusive lock (``flock``, or what
  :mod:`guideloom.runtime.os_support` has instead) on ``.NAME.guideloom-lock`` beside the target
  for the whole run (created ``O_NOFOLLOW`` with mode 0o600; a symlink, hard link or another
  user's file there is refused, see :mod:`guideloom.runtime.private_files`), and refuses a
  staging directory that is a symlink or another user's; a second run on the same target fails
  at once, naming the holder (pid, host, start time). The kernel releases the lock when its
  process dies, so a lock left by a killed run is simply taken over. Local targets only
  (fsspec URLs are not locked).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from pathlib import Path
from types import TracebackType

from guideloom.errors import TargetBusyError, UnsafeTargetError
from guideloom.export.ownership import why_not_replaceable
from guideloom.export.staging import Staging
from guideloom.formats.layout import EXPORT_MANIFEST
from guideloom.formats.rddac_layout import is_rddac_export
from guideloom.read.roots import DataRoot
from guideloom.runtime.os_support import is_locked, pread, pwrite, try_lock, unlock
from guideloom.runtime.private_files import check_private_dir, open_private_file

LOCK_SUFFIX = ".guideloom-lock"


def check_target(staging: Staging, data_dir: DataRoot, overwrite: bool) -> None:
    """Raise unless the export may be written at ``staging.target``.

    Raises:
        UnsafeTargetError: The target is protected, or holds something guideloom did not write.
        FileExistsError: A complete export is there and ``overwrite`` is false.
    """
    folder = data_dir.local_folder()  # None: data read by URL, nothing to protect
    if staging.is_local and folder is not None:
        target = Path(staging.target).resolve()
        data = folder.resolve()
        protected = {Path("/"): "the root directory", Path.home().resolve(): "your home directory",
                     data: "the data directory"}
        protected.update(dict.fromkeys(data.parents, "a parent of the data directory"))
        if target in protected:
            raise UnsafeTargetError(f"refusing to write an export to {target}: it is "
                                    f"{protected[target]}; choose another output path")
    if not staging.fs.exists(staging.target):
        return
    if staging.fs.isdir(staging.target) and not staging.fs.ls(staging.target, detail=False):
        return  # an empty directory: nothing to lose
    rddac = staging.is_local and is_rddac_export(staging.target, only_npy=True)
    if not staging.target_complete() and not rddac:
        raise UnsafeTargetError(
            f"{staging.url} exists and is not a guideloom export (no {EXPORT_MANIFEST}); "
            "guideloom replaces only exports it wrote: remove it yourself or choose another "
            "output path")
    reason = why_not_replaceable(staging.fs, staging.target, staging.url)
    if reason is not None:
        raise UnsafeTargetError(
            f"refusing to replace {staging.url}: {reason}; guideloom replaces only a guideloom "
            "export holding nothing but its own files: remove it yourself or choose another "
            "output path")
    if not overwrite and rddac:  # rddac wrote over it silently; guideloom asks first
        raise FileExistsError(
            f"{staging.url} already holds an export written by rddac/ddacs (sim_ids.npy and "
            f"its .npy fields, no {EXPORT_MANIFEST}); pass overwrite=True to replace it")
    if not overwrite:
        raise FileExistsError(
            f"{staging.url} already holds a complete export; pass overwrite=True to replace it")


class TargetLock:
    """An exclusive lock on a local export target for the length of a ``with`` block."""

    def __init__(self, staging: Staging):
        self.target = staging.url
        self.path: str | None = None
        self._staging_root = staging.root
        if staging.is_local:
            parent, name = os.path.split(staging.target)
            self.path = os.path.join(parent, f".{name}{LOCK_SUFFIX}")
        self._fd: int | None = None

    def __enter__(self) -> TargetLock:
        if self.path is None:
            return self
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        while True:
            fd = open_private_file(self.path, "the lock file")
            if not try_lock(fd, self.path):
                holder = _read_holder(fd)
                os.close(fd)
                raise TargetBusyError(f"another run is writing {self.target}: {holder}; wait "
                                      "for it to end, or stop it") from None
            try:
                same = os.fstat(fd).st_ino == os.lstat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:  # not a file that its last holder unlinked while we waited
                break
            os.close(fd)
        self._fd = fd
        try:
            if os.path.lexists(self._staging_root):  # never resume or remove another's staging
                check_private_dir(self._staging_root, "the staging directory", shared_write=True)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        os.ftruncate(fd, 0)
        pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                               "started": time.strftime("%Y-%m-%dT%H:%M:%S")}).encode(), 0)
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._fd is None or self.path is None:  # the path is set with the fd
            return
        with contextlib.suppress(FileNotFoundError):  # unlinked while still holding the lock:
            os.unlink(self.path)  # see the inode check above
        unlock(self._fd, self.path)
        os.close(self._fd)
        self._fd = None


def _read_holder(fd: int) -> str:
    try:
        doc = json.loads(pread(fd, 4096, 0) or b"{}")
        return f"pid {doc['pid']} on {doc['host']}, started {doc['started']}"
    except (ValueError, KeyError):
        return "a run that is starting"




def running_holder(staging: Staging) -> str | None:
    """Who is running the job of a local target right now (``"pid … on …, started …"``), or
    ``None`` when no run holds its lock (nothing runs; a remote target is never known)."""
    if not staging.is_local:
        return None
    parent, name = os.path.split(staging.target)
    path = os.path.join(parent, f".{name}{LOCK_SUFFIX}")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        return _read_holder(fd) if is_locked(fd, path) else None
    finally:
        os.close(fd)
