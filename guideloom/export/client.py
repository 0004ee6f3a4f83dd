"""Where an export runs: the active Dask client, a scheduler address, an embedded
``LocalCluster``, or in-process (``"sync"``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

SYNC = "sync"
DEFAULT_DASHBOARD = "127.0.0.1:8787"
_printed_dashboards: set[str] = set()

ClientLike = Any  # distributed.Client | str | None


@contextmanager
def dask_client(
    client: ClientLike = None,
    *,
    n_workers: int | None = None,
    dashboard_address: str | None = DEFAULT_DASHBOARD,
    quiet: bool = False,
) -> Iterator[Any]:
    """Yield a ``distributed.Client`` (or ``None`` for ``"sync"``).

    Args:
        client: ``None`` (the active client if there is one, else a ``LocalCluster`` with one
            single-threaded worker process per core, started here and closed on exit), a
            ``Client``, a scheduler address ``"tcp://host:port"``, ``"local"`` or
            ``"local:N"`` (a new LocalCluster with N workers), or ``"sync"``.
        n_workers: Workers of an embedded LocalCluster (default: one per core).
        dashboard_address: Where an embedded cluster's dashboard listens (127.0.0.1 by default);
            ``None`` disables it.
        quiet: Do not print the dashboard URL.
    """
    if client == SYNC:
        yield None
        return
    from distributed import Client, LocalCluster

    if isinstance(client, Client):
        _announce(client, quiet)
        yield client
        return
    if client is None:
        try:
            active = Client.current()
        except ValueError:
            active = None
        if active is not None:
            _announce(active, quiet)
            yield active
            return
        client = "local"
    if not isinstance(client, str):
        raise TypeError(
            f"client must be a distributed.Client, an address or 'sync', not {client!r}"
        )
    if client == "local" or client.startswith("local:"):
        workers = int(client.split(":", 1)[1]) if ":" in client else (n_workers or os.cpu_count())
        cluster = LocalCluster(
            n_workers=workers or 1, threads_per_worker=1, processes=True, host="127.0.0.1",
            dashboard_address=dashboard_address, silence_logs=40,
        )
        try:
            with Client(cluster) as own:
                _announce(own, quiet)
                yield own
        finally:
            cluster.close()
        return
    with Client(client) as remote:
        _announce(remote, quiet)
        yield remote


def _announce(client: Any, quiet: bool) -> None:
    link = getattr(client, "dashboard_link", None)
    if not link or quiet or link in _printed_dashboards:
        return
    _printed_dashboards.add(link)
    print(f"Dask dashboard: {link}", file=sys.stderr, flush=True)


def worker_count(client: Any) -> int:
    """Number of workers behind ``client`` (1 for in-process runs)."""
    if client is None:
        return 1
    return max(1, len(client.scheduler_info(n_workers=-1).get("workers", {})))
