"""Files and folders guideloom creates in places other local users can write to.

Another user of a group- or world-writable folder may plant a symlink, a hard link or a folder
of their own where guideloom is about to create one. Everything here refuses to follow or reuse
what is not ours:

* :func:`open_private_file` opens (creating with mode ``0o600``) a regular file with
  ``O_NOFOLLOW``, and refuses a symlink, a hard-linked file or a file owned by someone else;
  it never truncates a file that it has not checked.
* :func:`private_dir` creates a folder with mode ``0o700``, or accepts an existing one only if
  it is a real directory (not a symlink) owned by us that nobody else can write to.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from guideloom.errors import UnsafeFileError

PRIVATE_FILE_MODE = 0o600
PRIVATE_DIR_MODE = 0o700


def _me() -> int:
    return os.geteuid()


def open_private_file(path: str | os.PathLike[str], what: str, *, dir_fd: int | None = None,
                      shown: str | None = None) -> int:
    """A read-write descriptor of the regular file ``path`` that we own (created if absent).

    Args:
        dir_fd: ``path`` is a name in this open directory (see :func:`os.open`).
        shown: How errors name the file (default ``path``).

    Raises:
        UnsafeFileError: ``path`` is a symlink, not a regular file, has other hard links, or is
            owned by another user (naming ``what`` and the path).
    """
    path = os.fspath(path)
    name = shown or path
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0), PRIVATE_FILE_MODE,
                     dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP or _is_link(path, dir_fd):
            raise UnsafeFileError(f"{what} {name} is a symbolic link (planted by someone?); "
                                  "guideloom does not follow it: remove it and rerun") from None
        raise
    try:
        _check_owned_file(fd, name, what)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _is_link(path: str, dir_fd: int | None) -> bool:
    try:
        return stat.S_ISLNK(os.stat(path, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _check_owned_file(fd: int, path: str, what: str) -> None:
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise UnsafeFileError(f"{what} {path} is not a regular file; remove it and rerun")
    if info.st_uid != _me():
        raise UnsafeFileError(f"{what} {path} belongs to user id {info.st_uid}, not to you; "
                              "guideloom does not write into another user's file: remove it "
                              "(or ask its owner to) and rerun")
    if info.st_nlink != 1:
        raise UnsafeFileError(f"{what} {path} has {info.st_nlink} hard links; guideloom does "
                              "not write into a file that is also elsewhere: remove it and rerun")


def private_dir(path: str | os.PathLike[str], what: str) -> Path:
    """``path`` as a directory only we can write to: created with mode 0o700 if absent.

    Raises:
        UnsafeFileError: ``path`` exists and is a symlink, not a directory, owned by another
            user, or writable by group or others.
    """
    path = Path(path)
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=PRIVATE_DIR_MODE)
    check_private_dir(path, what)
    return path


def check_private_dir(path: str | os.PathLike[str], what: str, *,
                      shared_write: bool = False) -> None:
    """Raise :class:`UnsafeFileError` unless ``path`` is a real directory of ours that nobody
    else can write to (with ``shared_write``, group and others may: the umask decides)."""
    info = os.lstat(path)
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeFileError(f"{what} {path} is a symbolic link; guideloom does not follow it: "
                              "remove it and rerun")
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafeFileError(f"{what} {path} is not a directory; remove it and rerun")
    if info.st_uid != _me():
        raise UnsafeFileError(f"{what} {path} belongs to user id {info.st_uid}, not to you; "
                              "guideloom keeps private files only in a directory it owns: remove "
                              "it (or ask its owner to) and rerun")
    if info.st_mode & 0o022 and not shared_write:
        raise UnsafeFileError(f"{what} {path} is writable by other users (mode "
                              f"{stat.S_IMODE(info.st_mode):o}); guideloom keeps private files "
                              f"only in a directory nobody else can write to: chmod go-w {path}")
