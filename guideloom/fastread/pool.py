"""The decode threads of one process.

Chunk decoding releases the GIL (``preadv``, libdeflate, numpy copies), so a few threads per
process decode one dataset in parallel. The caller's thread takes one share itself.
:func:`set_decode_threads` or the ``decode_threads`` key of :mod:`guideloom.config`
(``GUIDELOOM_DECODE_THREADS``) sets the count; the default is the number of CPUs this process
may run on.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_threads: int | None = None  # set_decode_threads
_share: int | None = None  # share_cores
_pool_size = 0


def _forget_after_fork() -> None:
    """A forked child has none of the parent's threads: start a pool of its own when needed."""
    global _pool, _lock
    _pool, _lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


ENV_THREADS = "GUIDELOOM_DECODE_THREADS"


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask: a SLURM allocation, ``taskset``)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _configured() -> int | None:
    """``decode_threads`` of :mod:`guideloom.config` (``GUIDELOOM_DECODE_THREADS``), if given."""
    from guideloom import config

    return config.get("decode_threads")


def decode_threads() -> int:
    """Threads (the caller's included) that decode one dataset: the configured
    ``decode_threads`` (``GUIDELOOM_DECODE_THREADS``, ``guideloom.config.set``), else the count
    given to :func:`set_decode_threads`, else this process's share set by :func:`share_cores`,
    else the CPUs it may run on."""
    configured = _configured()
    if configured is not None:
        return configured
    if _threads is not None:
        return _threads
    return _share if _share is not None else usable_cpus()


def set_decode_threads(n: int) -> None:
    """Use ``n`` threads (the caller's included) per dataset from now on."""
    global _threads
    if n < 1:
        raise ValueError("decode threads must be at least 1")
    _threads = n


def share_cores(tasks_on_host: int) -> int:
    """Give this process its share of the host's CPUs when ``tasks_on_host`` tasks run there at
    once (Dask worker processes times their threads); return the decode threads now used.

    A configured ``decode_threads`` (``GUIDELOOM_DECODE_THREADS``) wins when set. Without this,
    two single-threaded workers on a 2-CPU host would each start 2 decode threads: 4 threads
    on 2 CPUs.
    """
    global _share, _threads
    if _configured() is not None:
        return decode_threads()
    _share, _threads = max(1, usable_cpus() // max(1, tasks_on_host)), None
    return _share


def threads_for(nbytes: int, n_items: int, min_bytes: int) -> int:
    """Threads worth using for ``n_items`` items of ``nbytes`` decoded bytes in all."""
    most = min(n_items, nbytes // max(min_bytes, 1))
    if most <= 1:  # a small dataset (most records): one thread, whatever is configured
        return 1
    return max(1, min(decode_threads(), most))


def _executor() -> ThreadPoolExecutor:
    """The pool, (re)made when the thread count changed since it was started."""
    global _pool, _pool_size
    size = max(1, decode_threads() - 1)
    with _lock:
        old = None
        if _pool is not None and _pool_size != size:
            old, _pool = _pool, None
        if _pool is None:
            _pool = ThreadPoolExecutor(size, thread_name_prefix="guideloom-decode")
            _pool_size = size
        pool = _pool
    if old is not None:
        old.shutdown(wait=False)
    return pool


def shutdown() -> None:
    """Stop the idle decode pool of this process and wait for its threads to end (the next
    decode starts a new one); e.g. before forking, which must not copy a running thread."""
    global _pool
    with _lock:
        idle, _pool = _pool, None
    if idle is not None:
        idle.shutdown(wait=True)


def run_all(jobs: Sequence[Callable[[], None]]) -> None:
    """Run ``jobs``: the first in this thread, the rest on the pool; re-raise the first error.

    Returns only when every job has finished, so no job still writes into a shared output.
    """
    if len(jobs) == 1:
        jobs[0]()
        return
    futures = [_executor().submit(job) for job in jobs[1:]]
    error: BaseException | None = None
    try:
        jobs[0]()
    except BaseException as exc:
        error = exc
    wait(futures)
    for fut in futures:
        if error is None and fut.exception() is not None:
            error = fut.exception()
    if error is not None:
        raise error
