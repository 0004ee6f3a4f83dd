"""Where jobs run: in-process, on the embedded local cluster, or on a given Dask cluster.

Public helpers:

* :func:`local_cluster`: a context manager that starts (or reuses) the embedded local cluster and
  closes it on exit; it yields the ``distributed.Client``.
* :func:`close_cluster`: close the embedded cluster now (it is closed at exit anyway).

Importing the package loads none of its modules beyond the loopback defaults: a Dask worker
imports the modules it needs (``shipping``, ``events``) without the embedded cluster's.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from guideloom.cluster.security import DEFAULT_DASHBOARD

if TYPE_CHECKING:  # what a type checker sees; at run time __getattr__ loads it
    from guideloom.cluster.embedded import close_cluster as close_cluster

__all__ = ["close_cluster", "local_cluster"]


@contextmanager
def local_cluster(
    n_workers: int | None = None, *, dashboard_address: str | None = DEFAULT_DASHBOARD
) -> Iterator[Any]:
    """Start (or reuse) the embedded local cluster for a block of exports; close it after.

    Exports inside the block with ``client=None`` run on it when the work pays for a dispatch;
    pass ``client="local"`` to force it.

    Example:
        >>> with guideloom.local_cluster(2) as client:  # doctest: +SKIP
        ...     guideloom.export_to_numpy("force-curve", "out", client="local:2")
    """
    from guideloom.cluster.embedded import close_cluster, embedded_cluster

    running, _ = embedded_cluster(n_workers, dashboard_address=dashboard_address)
    try:
        yield running.client
    finally:
        close_cluster()


def __getattr__(name: str) -> Any:
    """:func:`close_cluster` is :func:`guideloom.cluster.embedded.close_cluster`, loaded when
    first asked for."""
    if name == "close_cluster":
        from guideloom.cluster.embedded import close_cluster

        return close_cluster
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
