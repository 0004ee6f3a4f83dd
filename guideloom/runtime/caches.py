"""Every in-process cache of guideloom, owned in one place: :func:`cache` and :func:`clear_caches`.

Each cache is a :class:`BoundedCache` registered here by name: least recently used entries go
first once it holds more than its bound (a count of entries and, optionally, of bytes), and an
entry leaving it — evicted, replaced, popped or cleared — is handed to the cache's ``close``
hook, so open descriptors, sockets and files are closed and never pile up. The bounds are the
configuration keys ``cache_<name>_entries`` and ``cache_<name>_bytes`` of
:mod:`guideloom.config` (``GUIDELOOM_CACHE_<NAME>_ENTRIES`` / ``_BYTES``; defaults
:data:`DEFAULTS`), read by :func:`_limit` when an entry is added, so a change takes effect at
the next miss.

After ``fork`` a child must not use its parent's descriptors and connections, nor wait on a lock
a parent thread held at that moment: every cache gets a fresh lock, and one that closes its
values forgets them (plain values are kept). Its ``fork`` hook says what happens to each
inherited value in the child first: ``os.close`` of a plain descriptor in the child is harmless
to the parent (each process has its own descriptor table), so the archive descriptors are
closed there; connections are only forgotten (garbage collection closes the child's copy of the
socket, which does not touch the parent's connection: nothing is shut down or sent).

:func:`clear_caches` empties every cache and closes what they held; the next read opens afresh.
The on-disk cache of remote metadata (:mod:`guideloom.read.metacache`) is not deleted by it
(``guideloom.read.metacache.process_cache().clear()`` does that).
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Any, Generic, TypeVar

from guideloom.runtime.cache_bounds import DEFAULTS, CacheBound

__all__ = ["DEFAULTS", "BoundedCache", "CacheBound", "cache", "caches", "clear_caches",
           "memoize"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
F = TypeVar("F", bound=Callable[..., Any])


def _limit(name: str) -> tuple[int | None, int | None]:
    """``(entries, bytes)`` bounding the cache ``name`` (``None``: no bound), from the
    configuration keys ``cache_<name>_entries`` / ``cache_<name>_bytes`` of
    :mod:`guideloom.config` (variables ``GUIDELOOM_CACHE_<NAME>_ENTRIES`` / ``_BYTES``; ``0`` or
    ``none``: unbounded), whose defaults are :data:`DEFAULTS`.

    Raises:
        ConfigError: A value is not a whole number (naming the key or the variable); a
            ``ValueError``.
    """
    from guideloom import config

    bound = DEFAULTS.get(name, CacheBound(None))
    out: list[int | None] = []
    for suffix, default in (("entries", bound.entries), ("bytes", bound.nbytes)):
        key = f"cache_{name}_{suffix}"
        if key not in config.KNOBS:
            out.append(default)
            continue
        value = config.get(key)
        out.append(value if value else None)
    return out[0], out[1]


class BoundedCache(Generic[K, V]):
    """A thread-safe LRU map bounded by entries and bytes, closing what leaves it.

    Args:
        name: Its name in the registry and in ``GUIDELOOM_CACHE_<NAME>_*``.
        close: Called with each value that leaves the cache (outside the lock).
        weigh: Bytes one value counts for the byte bound (default: 0).
        fork: Called in a forked child with each inherited value, which is then forgotten.
            Without it a cache that closes its values forgets them in the child unclosed,
            and a cache of plain values keeps them.
    """

    def __init__(self, name: str, *, close: Callable[[V], None] | None = None,
                 weigh: Callable[[K, V], int] | None = None,
                 fork: Callable[[V], None] | None = None) -> None:
        self.name = name
        self._close = close
        self._weigh = weigh
        self._fork = fork
        self._lock = threading.Lock()
        self._data: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self.hits = self.misses = self.evictions = 0

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    @property
    def nbytes(self) -> int:
        """Bytes held, as ``weigh`` counts them."""
        return self._bytes

    def keys(self) -> list[K]:
        """The keys, least recently used first."""
        with self._lock:
            return list(self._data)

    def get(self, key: K, default: Any = None) -> Any:
        """The value of ``key`` (now the most recently used), else ``default``."""
        with self._lock:
            found = self._data.get(key)
            if found is None:
                self.misses += 1
                return default
            self._data.move_to_end(key)
            self.hits += 1
            return found[0]

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` for ``key`` (closing the value it replaces), then evict to the bound."""
        self._close_all(self._insert(key, value, replace=True)[1])

    def get_or_create(self, key: K, make: Callable[[], V]) -> V:
        """The value of ``key``, made by ``make()`` (outside the lock) when absent; when two
        threads make one at once the first kept wins and the other's value is closed."""
        found = self.get(key, _MISSING)
        if found is not _MISSING:
            return found  # type: ignore[no-any-return]
        value = make()
        kept, leaving = self._insert(key, value, replace=False)
        self._close_all(leaving)
        return kept

    def pop(self, key: K) -> None:
        """Remove ``key`` and close its value (nothing when absent)."""
        with self._lock:
            found = self._data.pop(key, None)
            if found is not None:
                self._bytes -= found[1]
        if found is not None:
            self._close_all([found[0]])

    def pop_where(self, keep: Callable[[K], bool]) -> int:
        """Remove and close every entry whose key ``keep`` refuses; the count removed."""
        with self._lock:
            gone = [k for k in self._data if not keep(k)]
            values = []
            for k in gone:
                value, weight = self._data.pop(k)
                self._bytes -= weight
                values.append(value)
        self._close_all(values)
        return len(gone)

    def clear(self) -> None:
        """Remove and close every entry."""
        with self._lock:
            values = [v for v, _ in self._data.values()]
            self._data.clear()
            self._bytes = 0
        self._close_all(values)

    def _insert(self, key: K, value: V, *, replace: bool) -> tuple[V, list[V]]:
        entries, nbytes = _limit(self.name)
        weight = self._weigh(key, value) if self._weigh is not None else 0
        leaving: list[V] = []
        with self._lock:
            old = self._data.get(key)
            if old is not None and not replace:
                self._data.move_to_end(key)
                return old[0], [value]
            if old is not None:
                self._bytes -= old[1]
                leaving.append(old[0])
            self._data[key] = (value, weight)
            self._data.move_to_end(key)
            self._bytes += weight
            while self._data and ((entries is not None and len(self._data) > entries)
                                  or (nbytes is not None and self._bytes > nbytes)):
                _, (gone, w) = self._data.popitem(last=False)
                self._bytes -= w
                self.evictions += 1
                leaving.append(gone)
        return value, leaving

    def _close_all(self, values: list[V]) -> None:
        if self._close is None:
            return
        for value in values:
            self._close(value)

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()
        if self._close is None and self._fork is None:
            return  # plain values: the child's copy of them is as good as the parent's
        inherited = [v for v, _ in self._data.values()]
        self._data = OrderedDict()
        self._bytes = 0
        if self._fork is not None:
            for value in inherited:
                with contextlib.suppress(OSError):
                    self._fork(value)

    def __repr__(self) -> str:
        entries, nbytes = _limit(self.name)
        return (f"BoundedCache({self.name!r}, {len(self)} of {entries} entries, "
                f"{self._bytes} of {nbytes} bytes)")


_MISSING: Any = object()
_REGISTRY: dict[str, BoundedCache[Any, Any]] = {}
_CLEARERS: dict[str, Callable[[], None]] = {}
_REGISTRY_LOCK = threading.Lock()


def cache(name: str, *, close: Callable[[Any], None] | None = None,
          weigh: Callable[[Any, Any], int] | None = None,
          fork: Callable[[Any], None] | None = None) -> BoundedCache[Any, Any]:
    """The process's cache called ``name`` (made and registered on first call; arguments as
    :class:`BoundedCache`). A module keeps the returned object as its cache.

    Raises:
        ValueError: ``name`` has no bound in :data:`DEFAULTS` (add one there, documented).
    """
    if name not in DEFAULTS:
        raise ValueError(f"cache {name!r} has no entry in guideloom.runtime.caches.DEFAULTS; "
                         "add its bound there")
    with _REGISTRY_LOCK:
        found = _REGISTRY.get(name)
        if found is None:
            found = _REGISTRY[name] = BoundedCache(name, close=close, weigh=weigh, fork=fork)
        return found


def memoize(name: str) -> Callable[[F], F]:
    """``functools.lru_cache`` bounded by the cache ``name`` and emptied by
    :func:`clear_caches`, for pure functions of hashable arguments. The bound is read at the
    first call and again after each :func:`clear_caches` (never at import)."""
    if name not in DEFAULTS:
        raise ValueError(f"cache {name!r} has no entry in guideloom.runtime.caches.DEFAULTS")

    def decorate(fn: F) -> F:
        current: list[Any] = []

        def impl() -> Any:
            try:
                return current[0]
            except IndexError:
                made = functools.lru_cache(maxsize=_limit(name)[0])(fn)
                current.append(made)
                return made

        @functools.wraps(fn)
        def memoized(*args: Any) -> Any:
            try:  # (a clear_caches in another thread may empty ``current`` at any moment)
                cached = current[0]
            except IndexError:
                cached = impl()
            return cached(*args)

        memoized.cache_info = lambda: impl().cache_info()  # type: ignore[attr-defined]
        with _REGISTRY_LOCK:
            _CLEARERS[name] = current.clear
        return memoized  # type: ignore[return-value]

    return decorate


def on_clear(name: str, clear: Callable[[], None]) -> None:
    """Have :func:`clear_caches` also call ``clear`` (per-thread state a cache feeds)."""
    with _REGISTRY_LOCK:
        _CLEARERS[name] = clear


def caches() -> Iterator[BoundedCache[Any, Any]]:
    """The registered caches (those of the modules imported so far)."""
    with _REGISTRY_LOCK:
        found = list(_REGISTRY.values())
    yield from found


def clear_caches() -> None:
    """Empty every in-process cache of guideloom and close what they held (archive
    descriptors, HTTP connections, ...); the next read opens afresh and reads the same data.

    A descriptor an open file still reads through (an ``h5py.File`` from
    :func:`guideloom.open_h5` not closed yet) is closed when that file is closed. The on-disk
    cache of remote metadata stays (it is checked on every read and stays valid across
    processes); ``guideloom.read.metacache.process_cache().clear()`` deletes its entries.
    """
    for found in list(caches()):
        found.clear()
    with _REGISTRY_LOCK:
        clearers = list(_CLEARERS.values())
    for clear in clearers:
        clear()


def _after_fork_in_child() -> None:
    global _REGISTRY_LOCK
    _REGISTRY_LOCK = threading.Lock()
    for found in _REGISTRY.values():
        found._after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
