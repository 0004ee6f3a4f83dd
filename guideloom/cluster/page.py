"""Where the ``/guideloom`` dashboard page is, and whether a scheduler serves it, asked without
importing anything there and without holding up the job that asks.

The page itself (its Bokeh document and scheduler plugin) is in
:mod:`guideloom.cluster.dashboard`, which only the scheduler that serves it imports. This module
needs the standard library only: the question sent to a scheduler (:func:`scheduler_probe`) is a
function pickled by value that reads the scheduler's plugin registry and distributed's table of
dashboard pages from ``sys.modules``, so a scheduler without guideloom answers it too, and
importing nothing there costs nothing. :func:`ask_page` sends it on the client's event loop and
returns at once; the answer is cached per scheduler address (and client).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
from collections.abc import Callable
from typing import Any

ROUTE = "/guideloom"
JSON_ROUTE = ROUTE + "/json"  # the page's numbers as JSON
PLUGIN_NAME = "guideloom-dashboard"
PRELOAD = "guideloom.cluster.dashboard"
PRELOAD_HINT = (f"start the scheduler with `dask scheduler --preload {PRELOAD}` (guideloom "
                f"installed there) to get {ROUTE}; the Dask dashboard shows the tasks")
PAGES_MODULE = "distributed.dashboard.scheduler"  # holds the table of dashboard pages
SETTLE_S = 5.0  # the longest a finished job waits for a late answer before saying "no page"

__all__ = ["JSON_ROUTE", "PLUGIN_NAME", "PRELOAD", "PRELOAD_HINT", "ROUTE", "announce_page",
           "ask_page", "page_link", "scheduler_probe", "serves_page", "settle"]

logger = logging.getLogger(__name__)

_answers: dict[str, bool] = {}  # scheduler address -> serves the page
_asked: dict[str, concurrent.futures.Future[bool]] = {}
_lock = threading.Lock()


def page_link(dashboard_link: str) -> str:
    """The guideloom page's URL beside the dashboard's (``…/status`` -> ``…/guideloom``)."""
    base = dashboard_link.rstrip("/")
    if base.endswith("/status"):
        base = base[: -len("/status")]
    return base + ROUTE


def scheduler_probe(plugin: str = PLUGIN_NAME, route: str = ROUTE,
                    pages_module: str = PAGES_MODULE) -> Callable[..., bool]:
    """The question for ``Client.run_on_scheduler``: does this scheduler run ``plugin`` and
    has its dashboard the page ``route``?

    The function is made here (a closure), so cloudpickle sends its code by value: the
    scheduler imports neither guideloom nor the dashboard's modules to answer it.
    """

    def serves(dask_scheduler: Any = None) -> bool:
        import sys

        pages = sys.modules.get(pages_module)  # loaded by a scheduler that has a dashboard
        return (plugin in getattr(dask_scheduler, "plugins", {}) and pages is not None
                and route in getattr(pages, "applications", {}))

    return serves


def _address(client: Any) -> str:
    """The cache key: the scheduler's address and the client's id (a scheduler restarted on
    the same port, with or without the page, is asked again by its new clients)."""
    address = getattr(getattr(client, "scheduler", None), "address", None)
    return f"{address} {getattr(client, 'id', id(client))}"


def ask_page(client: Any) -> concurrent.futures.Future[bool]:
    """Ask ``client``'s scheduler whether it serves the page, without waiting: a future of the
    answer (already done when this scheduler was asked before; ``False`` when the question
    cannot be asked or fails, e.g. ``run_on_scheduler`` not allowed there)."""
    address = _address(client)
    with _lock:
        if address in _answers:
            done: concurrent.futures.Future[bool] = concurrent.futures.Future()
            done.set_result(_answers[address])
            return done
        pending = _asked.get(address)
        if pending is not None:
            return pending
        future: concurrent.futures.Future[bool] = concurrent.futures.Future()
        _asked[address] = future

    def answered(result: concurrent.futures.Future[Any]) -> None:
        try:
            serves = bool(result.result())
        except Exception:
            serves = False
        with _lock:
            _answers[address] = serves
            _asked.pop(address, None)
        future.set_result(serves)

    try:
        loop = client.loop.asyncio_loop
        question = client.run_on_scheduler(scheduler_probe(), asynchronous=True)
        try:
            asyncio.run_coroutine_threadsafe(question, loop).add_done_callback(answered)
        except RuntimeError:  # a closed loop
            question.close()
            raise
    except Exception:
        sent: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            sent.set_result(client.run_on_scheduler(scheduler_probe()))
        except Exception as exc:
            sent.set_exception(exc)
        answered(sent)
    return future


def serves_page(client: Any, timeout: float | None = SETTLE_S) -> bool:
    """Whether ``client``'s scheduler serves the guideloom page (it runs the page's plugin:
    the embedded cluster, or ``dask scheduler --preload guideloom.cluster.dashboard``); waits
    for the answer (at most ``timeout`` seconds, then ``False``)."""
    try:
        return ask_page(client).result(timeout)
    except concurrent.futures.TimeoutError:
        return False


def announce_page(link: str, client: Any) -> concurrent.futures.Future[bool]:
    """Log the page's URL beside the dashboard's ``link`` once ``client``'s scheduler says it
    serves the page, or how to get the page when it does not; returns at once."""
    future = ask_page(client)

    def say(answer: concurrent.futures.Future[bool]) -> None:
        if answer.result():
            logger.info("guideloom page: %s (experiments, phases, skips, rates)",
                        page_link(link))
        else:
            logger.info("guideloom page: not served by this scheduler; %s", PRELOAD_HINT)

    future.add_done_callback(say)
    return future


def settle(future: concurrent.futures.Future[bool] | None, timeout: float = SETTLE_S) -> None:
    """At the end of a job: let a page question still under way answer (and its line be
    logged) before the job's client may close; the answer has usually long arrived."""
    if future is None:
        return
    try:
        future.result(timeout)
    except concurrent.futures.TimeoutError:
        logger.debug("guideloom page: the scheduler did not answer within %.0f s", timeout)
