"""zlib-stream inflation into caller buffers, with the GIL released.

HDF5's deflate filter stores each chunk as a zlib stream. Back ends, fastest first:

``libdeflate``
    libdeflate's ``libdeflate_zlib_decompress`` called through :mod:`ctypes` from the shared
    object of the ``deflate`` package (which exports libdeflate's C symbols). It writes straight
    into the destination buffer, and ctypes releases the GIL for the call. One decompressor per
    thread (libdeflate decompressors are not thread-safe).
``deflate``
    The ``deflate`` package's Python API (returns a new buffer, copied into the destination).
``isal``
    ISA-L's ``isal_zlib.decompress`` (copied into the destination).
``zlib``
    The standard library, always present.

``GUIDELOOM_INFLATE=<name>`` (the ``inflate`` key of :mod:`guideloom.config`) picks a back end
(for tests and comparisons); the default is the fastest importable one, picked at first use and
logged at DEBUG.
"""

from __future__ import annotations

import ctypes
import logging
import threading
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

from guideloom.errors import ConfigWarning, InflateError, warn
from guideloom.runtime import fallbacks

logger = logging.getLogger(__name__)

BACKENDS = ("libdeflate", "deflate", "isal", "zlib")


# A back end inflates ``src[:n_src]`` (uint8 array) into all of ``dst`` (uint8 array) and raises
# InflateError unless the stream decodes to exactly ``len(dst)`` bytes.
Inflater = Callable[[np.ndarray, int, np.ndarray], None]


class _LibDeflate:
    """libdeflate through ctypes: one decompressor per thread, output written in place."""

    def __init__(self) -> None:
        import deflate

        lib = ctypes.CDLL(deflate._deflate.__file__)
        alloc = lib.libdeflate_alloc_decompressor
        alloc.restype, alloc.argtypes = ctypes.c_void_p, []
        free = lib.libdeflate_free_decompressor
        free.restype, free.argtypes = None, [ctypes.c_void_p]
        run = lib.libdeflate_zlib_decompress
        run.restype = ctypes.c_int
        run.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                        ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
        self._alloc, self._free, self._run = alloc, free, run
        self._local = threading.local()

    def _decompressor(self) -> int:
        handle = getattr(self._local, "handle", None)
        if handle is None:
            handle = self._local.handle = _Handle(self._alloc(), self._free)
        return handle.ptr

    def __call__(self, src: np.ndarray, n_src: int, dst: np.ndarray) -> None:
        # actual_out_nbytes_ret=NULL: libdeflate insists on exactly len(dst) bytes
        code = self._run(self._decompressor(), src.ctypes.data, n_src, dst.ctypes.data,
                         dst.nbytes, None)
        if code != 0:
            reason = {1: "bad data", 2: "short output", 3: "output too large"}.get(code, code)
            raise InflateError(f"libdeflate: {reason}")


class _Handle:
    """Frees a libdeflate decompressor when its thread's local storage goes away."""

    def __init__(self, ptr: int, free: Callable[[int], None]):
        if not ptr:
            raise MemoryError("libdeflate_alloc_decompressor failed")
        self.ptr, self._free = ptr, free

    def __del__(self) -> None:
        self._free(self.ptr)


def _copying(decompress: Callable[[memoryview, int], bytes | bytearray]) -> Inflater:
    def run(src: np.ndarray, n_src: int, dst: np.ndarray) -> None:
        try:
            out = decompress(src.data[:n_src], dst.nbytes)
        except Exception as exc:
            raise InflateError(str(exc)) from exc
        if len(out) != dst.nbytes:
            raise InflateError(f"decoded {len(out)} bytes, expected {dst.nbytes}")
        dst[:] = np.frombuffer(out, np.uint8)

    return run


def _make(name: str) -> Inflater:
    if name == "libdeflate":
        return _LibDeflate()
    if name == "deflate":
        import deflate

        return _copying(deflate.zlib_decompress)
    if name == "isal":
        from isal import isal_zlib

        return _copying(lambda b, n: isal_zlib.decompress(b, bufsize=n))
    if name == "zlib":
        return _copying(lambda b, n: zlib.decompress(b, bufsize=n))
    raise ValueError(f"unknown inflate back end {name!r}; choose from {', '.join(BACKENDS)}")


def pick(name: str | None = None) -> tuple[str, Inflater]:
    """Return ``(name, inflater)``: ``name`` if given, else the fastest importable back end.

    Raises:
        ValueError: ``name`` is not a known back end.
        ImportError, OSError, AttributeError: ``name`` was asked for and cannot be loaded.
    """
    if name:
        return name, _make(name)
    for candidate in BACKENDS:
        try:
            return candidate, _make(candidate)
        except (ImportError, OSError, AttributeError):
            continue
    raise AssertionError("zlib is always importable")  # pragma: no cover


def _from_config(wanted: str | None) -> tuple[str, Inflater]:
    try:
        chosen = pick(wanted)
    except (ValueError, ImportError, OSError, AttributeError) as exc:
        warn(f"GUIDELOOM_INFLATE={wanted!r} cannot be used ({exc}); using the default",
             ConfigWarning)
        chosen = pick()
    logger.debug("inflate back end: %s (%s)", chosen[0],
                 f"asked for {wanted!r}" if wanted else "the fastest importable one")
    return chosen


_chosen: dict[str | None, tuple[str, Inflater]] = {}


def backend() -> tuple[str, Inflater]:
    """``(name, inflater)`` of the configured back end (``inflate`` of :mod:`guideloom.config`,
    ``GUIDELOOM_INFLATE``), else of the fastest importable one; picked at first use."""
    from guideloom import config

    wanted = config.get("inflate") or None
    chosen = _chosen.get(wanted)
    if chosen is None:
        chosen = _chosen.setdefault(wanted, _from_config(wanted))
    return chosen


def refresh() -> str:
    """Point :data:`inflate_into` at the configured back end (cheap; the fast path calls it
    once per dataset, so a configuration change counts from the next dataset); return its
    name, and count a dataset inflated by a slower one than the fastest (``inflate:NAME``)."""
    global inflate_into, _installed
    name, chosen = backend()
    if inflate_into is _installed:  # not replaced from outside (a test's monkeypatch)
        inflate_into = _installed = chosen
    if name != BACKENDS[0]:
        fallbacks.count(f"inflate:{name}")
    return name


def _first_use(src: np.ndarray, n_src: int, dst: np.ndarray) -> None:
    backend()[1](src, n_src, dst)


# Inflates ``src[:n_src]`` into all of ``dst`` (raises InflateError unless the stream decodes to
# exactly ``len(dst)`` bytes): the back end :func:`refresh` chose, picked at first use.
inflate_into: Inflater = _first_use
_installed: Inflater = _first_use  # what refresh() last put there


def __getattr__(name: str) -> Any:
    if name == "NAME":  # the back end's name (picked on first use, not at import)
        return backend()[0]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
