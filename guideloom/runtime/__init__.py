"""The runtime layer: what every other layer leans on in one process, and no data path of its own.

:mod:`~guideloom.runtime.caches` owns every in-process cache (bounds in
:mod:`~guideloom.runtime.cache_bounds`), :mod:`~guideloom.runtime.os_support` says what the
operating system offers (:mod:`~guideloom.runtime.buffers`: aligned buffers for direct I/O),
:mod:`~guideloom.runtime.fallbacks` counts the fallbacks taken,
:mod:`~guideloom.runtime.private_files` makes files safe in shared folders and
:mod:`~guideloom.runtime.faults` stops a run at a named point for tests. The package itself
imports nothing.
"""
