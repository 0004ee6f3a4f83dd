"""The decode threads of one process.

Chunk decoding releases the GIL (``preadv``, libdeflate, numpy copies), so a few threads per
process decode one dataset in parallel. The caller's thread takes one share itself.
``GUIDELOOM_DECODE_THREADS`` (or :func:`set_decode_threads`) sets the count; the default is the
number of CPUs this process may run on.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_threads: int | None = None


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


def _default_threads() -> int:
    env = os.environ.get(ENV_THREADS)
    if env:
        return max(1, int(env))
    return usable_cpus()


def decode_threads() -> int:
    """Threads (the caller's included) that decode one dataset."""
    global _threads
    if _threads is None:
        _threads = _default_threads()
    return _threads


def set_decode_threads(n: int) -> None:
    """Use ``n`` threads (the caller's included) per dataset from now on."""
    global _threads, _pool
    if n < 1:
        raise ValueError("decode threads must be at least 1")
    with _lock:
        old, _pool, _threads = _pool, None, n
    if old is not None:
        old.shutdown(wait=False)


def share_cores(tasks_on_host: int) -> int:
    """Give this process its share of the host's CPUs when ``tasks_on_host`` tasks run there at
    once (Dask worker processes times their threads); return the decode threads now used.

    ``GUIDELOOM_DECODE_THREADS`` wins when set. Without this, two single-threaded workers on a
    2-CPU host would each start 2 decode threads: 4 threads on 2 CPUs.
    """
    if os.environ.get(ENV_THREADS):
        return decode_threads()
    wanted = max(1, usable_cpus() // max(1, tasks_on_host))
    if wanted != decode_threads():
        set_decode_threads(wanted)
    return wanted


def threads_for(nbytes: int, n_items: int, min_bytes: int) -> int:
    """Threads worth using for ``n_items`` items of ``nbytes`` decoded bytes in all."""
    return max(1, min(decode_threads(), n_items, nbytes // max(min_bytes, 1)))


def _executor() -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max(1, decode_threads() - 1),
                                       thread_name_prefix="guideloom-decode")
        return _pool


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
    except BaseException as exc:  # noqa: BLE001 - re-raised after the others finish
        error = exc
    wait(futures)
    for fut in futures:
        if error is None and fut.exception() is not None:
            error = fut.exception()
    if error is not None:
        raise error
