"""How long a published export directory lives: readers pin it, a publish retires it.

A reader of a format that opens its files per read (npz, zarr) pins the directory it opened:
it holds the directory open with a shared ``flock`` and reads through that handle
(``/proc/self/fd/N``), so the files it reads are the generation whose ``export.json`` it
holds, even after an update or an overwrite published another one at the same path.

A publish that replaces an export retires the old directory: it is removed at once when no
reader pins it (an exclusive ``flock`` succeeds), and otherwise moved beside the target into
``.NAME.guideloom-retired/<export_id>``, where a later publish removes it once its last reader
has closed it. Memory-mapped readers (npy) need no pin: their maps keep the old files.

Only where the platform has ``/proc/self/fd`` and ``flock`` (Linux); elsewhere readers are
not pinned and a replaced export is reported as replaced (``CorruptExportError``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import posixpath
import shutil
import uuid

logger = logging.getLogger(__name__)

RETIRED_SUFFIX = ".guideloom-retired"

try:
    import fcntl
except ImportError:  # pragma: no cover - not on Linux
    fcntl = None  # type: ignore[assignment]


def retired_dir(target: str) -> str:
    """The folder beside ``target`` that holds its retired generations still being read."""
    parent, name = posixpath.split(target.rstrip("/"))
    return posixpath.join(parent, f".{name}{RETIRED_SUFFIX}")


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

    def close(self) -> None:
        """Release the pin (the directory may then be removed)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()


def _unpinned(path: str) -> int | None:
    """An open descriptor of ``path`` holding its exclusive lock, or ``None`` when a reader
    pins it."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    if fcntl is None:
        return fd
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def retire(old: str, target: str, export_id: str = "") -> str:
    """Remove the replaced generation ``old`` (a local directory), or keep it in
    :func:`retired_dir` while readers pin it; say which."""
    fd = _unpinned(old)
    if fd is not None:
        try:
            shutil.rmtree(old)
        finally:
            os.close(fd)
        return "removed"
    keep = retired_dir(target)
    os.makedirs(keep, mode=0o700, exist_ok=True)
    dest = posixpath.join(keep, export_id or uuid.uuid4().hex)
    if os.path.exists(dest):
        dest = f"{dest}-{uuid.uuid4().hex[:8]}"
    os.replace(old, dest)
    logger.info("guideloom: kept the replaced export of %s at %s while a reader has it open",
                target, dest)
    return "kept"


def sweep(target: str) -> int:
    """Remove the retired generations of ``target`` that no reader pins any more; return how
    many were removed."""
    keep = retired_dir(target)
    if not os.path.isdir(keep):
        return 0
    removed = 0
    for name in os.listdir(keep):
        path = posixpath.join(keep, name)
        try:
            fd = _unpinned(path)
        except OSError:
            continue
        if fd is None:
            continue
        try:
            shutil.rmtree(path)
            removed += 1
        finally:
            os.close(fd)
    with contextlib.suppress(OSError):
        os.rmdir(keep)  # only when empty
    return removed
