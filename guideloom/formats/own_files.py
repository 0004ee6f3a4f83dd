"""The files of a published export as an update carries them: its own regular files only.

An update reads, links or appends to files of the previous generation. A symbolic link in it
(planted, or left by a user's tidy-up) would carry another file's bytes into the new
generation, or let an append in place grow a file of another export; a folder that is a link
would do the same for every file below it. So carrying never follows a link:

* :func:`check_tree` walks the previous generation (not following links) and refuses any entry
  that is not a regular file or a real directory, naming it, before anything is carried;
* :func:`open_file` opens a file relative to the export's directory descriptor, each folder
  with ``O_DIRECTORY | O_NOFOLLOW`` and the file with ``O_NOFOLLOW``, and checks that what it
  opened is a regular file (a link made after the walk is refused just the same);
* :func:`link_file` hard-links such a file into a staging area (the link is made from the
  open directory without following links, and checked to be the file that was opened), or
  copies it from its open descriptor where no link can be made.

A refusal is an :class:`~guideloom.errors.UpdateRefusedError`: the export is no longer only
guideloom's files, so it cannot be updated; a full export (``overwrite=True``) replaces it.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat

from guideloom.errors import UpdateRefusedError
from guideloom.runtime import os_support

logger = logging.getLogger(__name__)

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


def refused(root: str, rel: str, what: str) -> UpdateRefusedError:
    """The one-line refusal of carrying ``rel`` of the export at ``root``."""
    return UpdateRefusedError(
        f"cannot update {root}: {rel} {what}; an update carries only the export's own regular "
        "files and never follows a link: remove it, or export again with overwrite=True")


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "is a symbolic link"
    if stat.S_ISDIR(mode):
        return "is a directory"
    return "is not a regular file"


def check_tree(root: str) -> None:
    """Refuse the export at ``root`` if any entry below it is a link or neither a regular
    file nor a directory (``root`` itself may be a link: the user named it).

    Raises:
        UpdateRefusedError: Naming the first such entry.
    """
    pending = [""]
    while pending:
        rel = pending.pop()
        with os.scandir(os.path.join(root, rel) if rel else root) as entries:
            for entry in entries:
                name = f"{rel}/{entry.name}" if rel else entry.name
                if entry.is_symlink():
                    raise refused(root, name, "is a symbolic link")
                if entry.is_dir(follow_symlinks=False):
                    pending.append(name)
                elif not entry.is_file(follow_symlinks=False):
                    raise refused(root, name, "is not a regular file")


def _parts(rel: str) -> list[str]:
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise ValueError(f"not a path inside an export: {rel!r}")
    return parts


def open_dir(root: str, rel: str = "") -> int:
    """A descriptor of the folder ``rel`` of the export at ``root`` (``""``: the export's
    own), every component below ``root`` opened without following a link.

    Raises:
        UpdateRefusedError: A component is a link or not a directory.
    """
    fd = os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)
    if not rel:
        return fd
    done: list[str] = []
    try:
        for part in _parts(rel):
            done.append(part)
            try:
                child = os.open(part, os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC,
                                dir_fd=fd)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                    raise
                mode = os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode
                raise refused(root, "/".join(done), _kind(mode)) from None
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_file(root: str, rel: str, flags: int = os.O_RDONLY) -> int:
    """A descriptor of the regular file ``rel`` of the export at ``root`` (opened with
    ``flags``), never through a link.

    Raises:
        UpdateRefusedError: ``rel`` or a folder on its way is a link, or it is not a regular
            file.
        OSError: It cannot be opened (missing, permissions).
    """
    folder, _, name = rel.rpartition("/")
    dir_fd = open_dir(root, folder)
    try:
        return _open_in(dir_fd, name, flags, root, rel)
    finally:
        os.close(dir_fd)


def _open_in(dir_fd: int, name: str, flags: int, root: str, rel: str) -> int:
    try:
        fd = os.open(name, flags | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0),
                     dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.EISDIR, errno.ENXIO):
            raise
        mode = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode
        raise refused(root, rel, _kind(mode)) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise refused(root, rel, _kind(mode))
    return fd


def link_file(root: str, rel: str, target: str) -> bool:
    """Make ``target`` (absent) the regular file ``rel`` of the export at ``root``: a hard
    link (True), or where none can be made a copy, fsynced (False). Never through a link.

    Raises:
        UpdateRefusedError: As :func:`open_file`, or the entry changed while it was linked.
    """
    folder, _, name = rel.rpartition("/")
    dir_fd = open_dir(root, folder)
    try:
        fd = _open_in(dir_fd, name, os.O_RDONLY, root, rel)
        try:
            try:
                os.link(name, target, src_dir_fd=dir_fd, follow_symlinks=False)
            except OSError as exc:
                if exc.errno in (errno.ENOENT, errno.EEXIST):
                    raise
                logger.debug("guideloom: cannot link %s/%s (%s): copying it", root, rel, exc)
                copy_from(fd, target)
                return False
            if not os.path.samestat(os.stat(target, follow_symlinks=False), os.fstat(fd)):
                os.unlink(target)  # the entry was replaced between the open and the link
                raise refused(root, rel, "changed while the update linked it")
            return True
        finally:
            os.close(fd)
    finally:
        os.close(dir_fd)


def copy_from(src_fd: int, target: str) -> None:
    """Copy the open file ``src_fd`` whole into the new file ``target`` (created exclusively,
    never through a link), fsynced: a reflink where the file system has one (``FICLONE``),
    else ``copy_file_range``, else a copy in blocks (:func:`~guideloom.runtime.os_support.
    clone_file`)."""
    dst = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o644)
    try:
        os_support.clone_file(src_fd, dst, fallback="carry:reflink_refused")
        os.fsync(dst)
    except BaseException:
        os.close(dst)
        with contextlib.suppress(OSError):
            os.unlink(target)
        raise
    os.close(dst)


def fd_path(fd: int, fallback: str) -> str:
    """A path that opens the file of ``fd`` again (``/proc/self/fd/N`` where the platform has
    it, so that a second open cannot land on another file), else ``fallback``."""
    path = f"/proc/self/fd/{fd}"
    return path if os.path.isdir("/proc/self/fd") else fallback
