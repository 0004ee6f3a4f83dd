"""A small local cache of what reads learn once: remote archive directories and HDF5 metadata,
and the content digests of local inputs (:mod:`guideloom.read.content`: kept only for a file
last changed before its hash began, under a key of its full stat, as an update trusts evidence).

Where: ``$GUIDELOOM_CACHE_DIR``, else ``$XDG_CACHE_HOME/guideloom``, else
``~/.cache/guideloom``; entries go to its ``remote/`` folder (mode 0o700, files 0o600). Size:
``$GUIDELOOM_CACHE_MAX_MB`` (default 256 MiB); the entries used longest ago are removed first.
(An entry read is marked used at most every :data:`TOUCH_AFTER_S`.)
Clear it with ``guideloom cache clear`` (:func:`clear_cache`); an error the cache could cause
names it (:func:`cache_hint`).

Each entry is one JSON file named by a hash of its key (the file's URL, size and, when the
server gives them, ETag or Last-Modified; else a fingerprint of the archive's central
directory, read again on each scan), written to a temporary file and renamed into place.
An entry carries its key and a SHA-256 of its payload: one that does not parse, names another
key or fails the digest is ignored (and replaced when fetched again). Callers also check the
payload against the archive before using it, so an entry never makes a read leave the archive.
The cache never fails a read: when its folder is unusable, nothing is cached.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from guideloom.errors import UnsafeFileError
from guideloom.runtime.caches import BoundedCache, cache
from guideloom.runtime.private_files import private_dir

if TYPE_CHECKING:
    from guideloom.read.types import Located as Location

CACHE_ENV = "GUIDELOOM_CACHE_DIR"
SIZE_ENV = "GUIDELOOM_CACHE_MAX_MB"
DEFAULT_MAX_BYTES = 256 << 20
FORMAT = "guideloom-remote-cache/1"
SUBDIR = "remote"
_SUFFIX = ".json"
# An entry read is marked used (its mtime set: eviction removes the oldest first) only when
# it was last marked longer ago than this: a digest lookup per experiment of a re-export then
# dirties no inode, and the eviction order is the same to within this long.
TOUCH_AFTER_S = 600


def cache_root() -> Path:
    """The guideloom cache directory (not created here)."""
    from guideloom import config

    return _root_of(config.get("cache_dir"), os.environ.get("XDG_CACHE_HOME"),
                    os.environ.get("HOME"))  # CACHE_ENV and the others, read now


_ROOTS: dict[tuple[str | None, str | None, str | None], Path] = {}  # what each setting gives


def _root_of(explicit: Any, xdg: str | None, home: str | None) -> Path:
    """:func:`cache_root` for these settings, remembered (a lookup of the local inputs'
    digests asks for every experiment; building the path was most of its cost)."""
    key = (None if explicit is None else str(explicit), xdg, home)
    found = _ROOTS.get(key)
    if found is None:
        if explicit:
            found = Path(explicit)
        else:
            found = (Path(xdg) if xdg else Path.home() / ".cache") / "guideloom"
        if home is not None and len(_ROOTS) < 64:  # without HOME, the password database says
            _ROOTS[key] = found
    return found


def max_bytes() -> int:
    """The cache's size bound in bytes (``$GUIDELOOM_CACHE_MAX_MB``, default 256 MiB)."""
    from guideloom import config

    try:
        return max(0, int(config.get("cache_max_mb") * (1 << 20)))  # SIZE_ENV, read now
    except ValueError:  # a bad value: the default, as before
        return DEFAULT_MAX_BYTES


def _read_all(fd: int) -> bytes:
    """The rest of the open file ``fd`` (an entry: a few hundred bytes, one read)."""
    parts: list[bytes] = []
    while True:
        part = os.read(fd, 1 << 16)
        if not part:
            return b"".join(parts)
        parts.append(part)


def payload_digest(payload: Any) -> str:
    """The SHA-256 of ``payload`` as canonical JSON: the digest an entry is checked by."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _open_private_dir(path: Path) -> int:
    """A descriptor of the folder ``path`` just checked private: entries are opened relative
    to it, so a folder renamed away and replaced (by a symbolic link, in a folder others may
    write to) is never followed."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    info = os.fstat(fd)
    if info.st_uid != os.geteuid() or info.st_mode & 0o022:
        os.close(fd)
        raise UnsafeFileError(f"the guideloom cache directory {path} changed while checked")
    return fd


class MetaCache:
    """The entries of one cache folder (one instance per process: :func:`process_cache`)."""

    def __init__(self, root: Path | None = None, limit: int | None = None):
        self.root = (root or cache_root()) / SUBDIR
        self.limit = max_bytes() if limit is None else limit
        self._lock = threading.Lock()
        self._ready: bool | None = None
        self._dir_fd = -1  # the folder checked, held open: names are opened relative to it
        self._total: int | None = None

    def _folder(self) -> Path | None:
        if self._ready is None:
            with self._lock:  # archives are listed on several threads: check the folder once
                self._check_folder()
        return self.root if self._ready else None

    def _check_folder(self) -> None:
        if self._ready is None:
            try:
                self.root.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
                private_dir(self.root.parent, "the guideloom cache directory")
                private_dir(self.root, "the guideloom cache directory")
                self._dir_fd = _open_private_dir(self.root)
                self._ready = True
            except (OSError, UnsafeFileError):
                self._ready = False

    def _file(self, kind: str, key: str) -> Path | None:
        folder = self._folder()
        if folder is None:
            return None
        return folder / (hashlib.sha256(f"{kind}\0{key}".encode()).hexdigest() + _SUFFIX)

    def get(self, kind: str, key: str) -> Any | None:
        """The payload stored for ``(kind, key)``, or ``None`` (absent, damaged or foreign)."""
        path = self._file(kind, key)
        if path is None or self.limit <= 0:
            return None
        try:
            fd = os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=self._dir_fd)
            try:
                doc = json.loads(_read_all(fd))
                if (not isinstance(doc, dict) or doc.get("format") != FORMAT
                        or doc.get("kind") != kind or doc.get("key") != key
                        or doc.get("digest") != payload_digest(doc.get("payload"))):
                    return None
                if os.fstat(fd).st_mtime < time.time() - TOUCH_AFTER_S:
                    os.utime(fd)  # recently used: evicted last
            finally:
                os.close(fd)
        except (OSError, ValueError):
            return None
        return doc["payload"]

    def put(self, kind: str, key: str, payload: Any) -> None:
        """Store ``payload`` (JSON-able) for ``(kind, key)``; evict old entries past the bound."""
        path = self._file(kind, key)
        if path is None or self.limit <= 0:
            return
        data = json.dumps({"format": FORMAT, "kind": kind, "key": key,
                           "digest": payload_digest(payload), "payload": payload}).encode()
        dfd = self._dir_fd
        tmp = f".tmp-{os.getpid()}-{secrets.token_hex(6)}{_SUFFIX}"
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600,
                         dir_fd=dfd)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(data)
                os.replace(tmp, path.name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                os.unlink(tmp, dir_fd=dfd)
                raise
        except OSError:
            return
        with self._lock:
            if self._total is None:
                self._total = self._scan_total()
            self._total += len(data)
            if self._total > self.limit:
                self._total = self._evict()

    def _entries(self) -> list[tuple[float, int, Path]]:
        out = []
        for entry in os.scandir(self._dir_fd):
            if entry.name.endswith(_SUFFIX) and not entry.name.startswith("."):
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                out.append((st.st_mtime, st.st_size, self.root / entry.name))
        return out

    def _scan_total(self) -> int:
        return sum(size for _, size, _ in self._entries())

    def _evict(self) -> int:
        """Remove the least recently used entries until the cache is at 3/4 of its bound."""
        entries = sorted(self._entries())
        total = sum(size for _, size, _ in entries)
        for _, size, path in entries:
            if total <= self.limit * 3 // 4:
                break
            try:
                os.unlink(path.name, dir_fd=self._dir_fd)
                total -= size
            except OSError:
                pass
        return total

    def clear(self) -> tuple[int, int]:
        """Remove every entry; returns how many were removed and their bytes."""
        if self._folder() is None:
            return 0, 0
        count = size = 0
        for _, nbytes, path in self._entries():
            try:
                os.unlink(path.name, dir_fd=self._dir_fd)
            except FileNotFoundError:
                continue
            count, size = count + 1, size + nbytes
        with self._lock:
            self._total = 0
        return count, size


_PROCESS: BoundedCache[tuple[str, int], MetaCache] = cache("remote_meta_dirs")


def process_cache() -> MetaCache:
    """This process's cache for the current ``$GUIDELOOM_CACHE_DIR`` and size bound."""
    key = (str(cache_root()), max_bytes())
    return _PROCESS.get_or_create(key, lambda: MetaCache(Path(key[0]), key[1]))


def clear_cache() -> tuple[Path, int, int]:
    """Remove every entry of this user's cache (``guideloom cache clear``): its folder, and how
    many entries of how many bytes were removed."""
    cache = process_cache()
    return (cache.root, *cache.clear())


def cache_hint(loc: Location) -> str:
    """What an error about the remote file of ``loc`` adds: the cache holds what was learnt of
    it ('' for a local file)."""
    if loc.is_local:
        return ""
    return (f" (if it was replaced on the server: guideloom cache clear forgets what guideloom "
            f"learnt of it, in {cache_root() / SUBDIR})")
