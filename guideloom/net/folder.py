"""The folders and files of a download, safe in a folder other users can write to.

``guideloom download`` may write into a shared project folder, which another local user can
write to as well (without the sticky bit, she may even rename and replace what is there). So:

* :func:`open_folder` opens ``OUT/h5`` (any folder below the output folder) creating what is
  missing, and refuses a symbolic link made by another user and a folder another user owns:
  the downloads never land outside ``OUT`` or where someone else can swap them. The caller then
  works in the open folder (``dir_fd``), so renaming the folder afterwards changes nothing.
* :func:`own_file` tells whether a file is a regular file of ours (not a link, not planted).
* :func:`file_mode` is the mode a finished download gets: what the umask allows, as every other
  file the user writes (so colleagues can read a shared copy), or ``0o600`` when asked.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Sequence
from pathlib import Path

from guideloom.errors import UnsafeFileError

_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)


def _me() -> int:
    return os.geteuid()


def _trusted(uid: int) -> bool:
    """Links made by us or by root may be followed."""
    return uid in (_me(), 0)


def user_umask() -> int:
    """The process's umask, read without changing it (``/proc/self/status`` on Linux)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o022)  # elsewhere: set and put back at once
    os.umask(old)
    return old


def file_mode(private: bool = False) -> int:
    """The mode of a finished download: ``0o666`` less the umask, or ``0o600`` if private."""
    return 0o600 if private else 0o666 & ~user_umask()


def open_folder(root: Path, parts: Sequence[str], *, private: bool = False) -> int:
    """An open descriptor of the folder ``root/parts[0]/parts[1]/…``, made where missing.

    ``root`` is the folder the user named (it may be a link of theirs). Each folder below it is
    created (mode ``0o777`` less the umask, ``0o700`` if ``private``) or accepted if it is a
    folder of ours, reached through no link that another user made.

    Raises:
        UnsafeFileError: A folder below ``root`` is a link made by another user, is not a
            folder, or belongs to another user (naming it).
    """
    if root.is_symlink() and not _trusted(root.lstat().st_uid):
        raise UnsafeFileError(f"the output folder {root} is a symbolic link made by user id "
                              f"{root.lstat().st_uid}, not by you; guideloom does not follow "
                              "it: remove it (or name the folder it leads to) and rerun")
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, _DIR_FLAGS)
    shown = root
    try:
        for name in parts:
            shown = shown / name
            sub = _open_sub(fd, name, shown, 0o700 if private else 0o777)
            os.close(fd)
            fd = sub
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_sub(fd: int, name: str, shown: Path, mode: int) -> int:
    with contextlib.suppress(FileExistsError):
        os.mkdir(name, mode, dir_fd=fd)
    info = os.stat(name, dir_fd=fd, follow_symlinks=False)
    flags = _DIR_FLAGS
    if stat.S_ISLNK(info.st_mode):
        if not _trusted(info.st_uid):
            raise UnsafeFileError(f"{shown} is a symbolic link made by user id {info.st_uid}, "
                                  "not by you; guideloom does not download through it: remove "
                                  "it and rerun")
    else:
        flags |= os.O_NOFOLLOW  # replaced by a link since the look: refused, not followed
    try:
        sub = os.open(name, flags, dir_fd=fd)
    except OSError as exc:
        raise UnsafeFileError(f"{shown} is not a folder guideloom can download into ({exc}); "
                              "remove it and rerun") from None
    info = os.fstat(sub)
    if info.st_uid != _me():
        os.close(sub)
        raise UnsafeFileError(f"{shown} belongs to user id {info.st_uid}, not to you; guideloom "
                              "downloads only into folders of yours (another user could swap "
                              "the files in it): remove it (or ask its owner to) and rerun")
    return sub


def own_file(path: Path) -> os.stat_result | None:
    """``path``'s status if it is a regular file of ours (not a link), else ``None``."""
    try:
        info = path.lstat()
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_uid != _me():
        return None
    return info
