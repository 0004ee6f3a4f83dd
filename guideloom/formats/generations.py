"""How long a published export directory lives: readers pin it, a publish retires it.

A reader of a format that opens its files per read (npz, zarr) pins the directory it opened:
it holds the directory open with a shared ``flock`` and reads through that handle
(``/proc/self/fd/N``), so the files it reads are the generation whose ``export.json`` it
holds, even after an update or an overwrite published another one at the same path.

A publish that replaces an export retires the old directory: it is removed at once when no
reader pins it (an exclusive ``flock`` succeeds), and otherwise moved beside the target into
``.NAME.guideloom-retired/<time>-<export_id>``, where a later publish removes it once its last
reader has closed it. Memory-mapped readers (npy) need no pin: their maps keep the old files.

Anyone who can read the export can pin a generation, so at most ``keep_retired`` (a setting,
default 2) are kept: beyond that each publish removes the oldest even while pinned, its
``export.json`` first, so that its readers fail with an error (:meth:`Pin.removed`) and never
read other rows. The retired folder is the owner's alone: created with mode 0700 and used only
while it is a real directory of this user holding only retired generations; anything else at
that name (a link, another user's folder, a folder holding a link) is reported, never used,
followed or removed, and a fresh ``.NAME.guideloom-retired-<random>`` is created exclusively
instead (:func:`retired_dirs` finds both). Removal never follows a link.

Only where the platform has ``/proc/self/fd`` and ``flock`` (Linux); elsewhere readers are
not pinned and a replaced export is reported as replaced (``CorruptExportError``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import shutil
import stat
import time
import uuid

from guideloom.formats.layout import EXPORT_MANIFEST

logger = logging.getLogger(__name__)

RETIRED_SUFFIX = ".guideloom-retired"

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Linux
    fcntl = None  # type: ignore[assignment]


def retired_dir(target: str) -> str:
    """The folder beside ``target`` that holds its retired generations still being read (its
    usual name; see :func:`retired_dirs` for the ones actually used)."""
    parent, name = posixpath.split(target.rstrip("/"))
    return posixpath.join(parent, f".{name}{RETIRED_SUFFIX}")


def _problem(path: str) -> str | None:
    """Why the existing ``path`` is not a retired folder of ours (``None``: it is one): it
    must be a real directory (not a link) of this user, mode 0700, holding only real
    directories."""
    info = os.lstat(path)
    who = _owner(info.st_uid)
    if stat.S_ISLNK(info.st_mode):
        return f"a symbolic link made by {who}"
    if not stat.S_ISDIR(info.st_mode):
        return f"not a directory (made by {who})"
    if info.st_uid != _me():
        return f"a folder of {who}"
    if stat.S_IMODE(info.st_mode) != 0o700:
        return f"a folder others may write to (mode {stat.S_IMODE(info.st_mode):o})"
    with os.scandir(path) as entries:
        for entry in entries:
            if entry.is_symlink() or not entry.is_dir(follow_symlinks=False):
                return f"a folder holding {entry.name!r}, which is no retired generation"
    return None


def _me() -> int:
    return os.geteuid() if hasattr(os, "geteuid") else 0


def _owner(uid: int) -> str:
    try:
        import pwd

        return f"user {pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def _report(path: str, problem: str) -> None:
    logger.warning("guideloom: %s is %s: not used, not followed and not removed (planted by "
                   "someone?); retired generations go elsewhere. Remove it (or ask its owner "
                   "to)", path, problem)


def retired_dirs(target: str) -> list[str]:
    """The folders of ours beside ``target`` holding its retired generations: the usual one
    (:func:`retired_dir`) and any ``<it>-<random>`` made because the usual name was taken by
    something that is not ours (which is reported, and never used)."""
    usual = retired_dir(target)
    parent, base = posixpath.split(usual)
    try:
        names = os.listdir(parent or ".")
    except OSError:
        return []
    found = []
    for name in sorted(names):
        if name != base and not name.startswith(f"{base}-"):
            continue
        path = posixpath.join(parent, name)
        try:
            problem = _problem(path)
        except OSError:
            continue
        if problem is None:
            found.append(path)
        else:
            _report(path, problem)
    return found


def _make_retired_dir(target: str) -> str:
    """A retired folder of ours for ``target``: an existing one (:func:`retired_dirs`), else
    the usual name created exclusively with mode 0700, else (the name is taken) a fresh
    ``<usual>-<random>`` created exclusively."""
    found = retired_dirs(target)
    if found:
        return found[0]
    usual = retired_dir(target)
    for path in (usual, *(f"{usual}-{uuid.uuid4().hex[:12]}" for _ in range(8))):
        try:
            os.mkdir(path, 0o700)  # the umask can only take bits away
        except FileExistsError:
            continue  # reported by retired_dirs (or made this moment by someone else)
        if _problem(path) is None:
            return path
    raise FileExistsError(f"cannot create a retired folder beside {target}: every name taken")


class Pin:
    """A published directory held open for reading (see the module docstring).

    Attributes:
        path: The directory as this process reads it (``/proc/self/fd/N``).
    """

    def __init__(self, fd: int):
        self._fd: int | None = fd
        self.path = f"/proc/self/fd/{fd}"

    @classmethod
    def of(cls, root: str) -> Pin | None:
        """Pin the local directory ``root``; ``None`` where pins do not work (another
        platform, or the directory is being removed this moment)."""
        if fcntl is None or not os.path.isdir("/proc/self/fd"):
            return None
        try:
            fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:  # a publish is removing it
            os.close(fd)
            return None
        return cls(fd)

    def identity(self) -> tuple[int, int]:
        """``(device, inode)`` of the pinned directory."""
        assert self._fd is not None
        st = os.fstat(self._fd)
        return st.st_dev, st.st_ino

    def removed(self) -> bool:
        """Whether the pinned generation was removed, or is being removed (its
        ``export.json`` goes first: see :func:`remove_generation`)."""
        if self._fd is None:
            return False
        try:
            if os.fstat(self._fd).st_nlink == 0:
                return True
            os.stat(EXPORT_MANIFEST, dir_fd=self._fd, follow_symlinks=False)
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return False

    def close(self) -> None:
        """Release the pin (the directory may then be removed)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


def _unpinned(path: str) -> int | None:
    """An open descriptor of the directory ``path`` (never through a link) holding its
    exclusive lock, or ``None`` when a reader pins it."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0))
    if fcntl is None:
        return fd
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def remove_generation(path: str) -> None:
    """Remove the retired generation ``path`` (a directory of ours; never through a link):
    its ``export.json`` first, so that a reader still pinning it sees it removed
    (:meth:`Pin.removed`) before any of its files is missing."""
    if stat.S_ISLNK(os.lstat(path).st_mode):
        os.unlink(path)  # the link only, never what it points to
        return
    with contextlib.suppress(FileNotFoundError):
        os.unlink(posixpath.join(path, EXPORT_MANIFEST))
    shutil.rmtree(path)  # fd-based on Linux: links inside are removed, never followed


def retire(old: str, target: str, export_id: str = "") -> str:
    """Remove the replaced generation ``old`` (a local directory), or keep it in a retired
    folder of ours (:func:`retired_dirs`) while readers pin it; say which."""
    fd = _unpinned(old)
    if fd is not None:
        try:
            remove_generation(old)
        finally:
            os.close(fd)
        return "removed"
    keep = _make_retired_dir(target)
    name = f"{time.time_ns():020d}-{export_id or uuid.uuid4().hex}"
    # moved in through the folder's descriptor, checked to be ours: never through a link
    # someone put in its place meanwhile
    dir_fd = os.open(keep, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0))
    try:
        info = os.fstat(dir_fd)
        if info.st_uid != _me() or stat.S_IMODE(info.st_mode) != 0o700:
            raise FileExistsError(f"{keep} changed owner or mode while {target} was retired")
        os.replace(old, name, dst_dir_fd=dir_fd)
    finally:
        os.close(dir_fd)
    dest = posixpath.join(keep, name)
    logger.info("guideloom: kept the replaced export of %s at %s while a reader has it open",
                target, dest)
    return "kept"


def _age(path: str) -> tuple[int, str]:
    """Sort key, oldest first: the retiring time its name starts with (older names, one
    export id each, count as oldest)."""
    name = posixpath.basename(path)
    stamp = name.split("-", 1)[0]
    return (int(stamp) if stamp.isdigit() and len(stamp) == 20 else 0, name)


def sweep(target: str, keep_retired: int | None = None) -> int:
    """Remove the retired generations of ``target`` that no reader pins any more, then the
    oldest pinned ones beyond ``keep_retired`` (default: the ``keep_retired`` setting), and
    the retired folders left empty; return how many generations were removed.

    Only folders of ours are swept (:func:`retired_dirs`); an entry in one that is not a
    directory (a link) is removed as the entry it is, never followed.
    """
    if keep_retired is None:
        from guideloom import config

        keep_retired = int(config.get("keep_retired"))
    removed = 0
    pinned: list[str] = []
    folders = retired_dirs(target)
    for keep in folders:
        for name in os.listdir(keep):
            path = posixpath.join(keep, name)
            try:
                if not stat.S_ISDIR(os.lstat(path).st_mode):
                    logger.warning("guideloom: removed %s from the retired folder: not a "
                                   "retired generation", path)
                    os.unlink(path)
                    continue
                fd = _unpinned(path)
            except OSError:
                continue
            if fd is None:
                pinned.append(path)
                continue
            try:
                remove_generation(path)
                removed += 1
            finally:
                os.close(fd)
    pinned.sort(key=_age)
    for path in pinned[:max(0, len(pinned) - keep_retired)]:
        logger.warning("guideloom: removed the retired generation %s although a reader still "
                       "has it open (keep_retired=%d); that reader now fails with an error",
                       path, keep_retired)
        try:
            remove_generation(path)
        except OSError as exc:
            logger.warning("guideloom: cannot remove %s: %s", path, exc)
            continue
        removed += 1
    for keep in folders:
        with contextlib.suppress(OSError):
            os.rmdir(keep)  # only when empty
    return removed
