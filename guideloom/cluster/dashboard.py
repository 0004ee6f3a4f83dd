"""The ``/guideloom`` page of the Dask dashboard: running and recent exports.

Two pieces, both in the scheduler's process:

* :class:`GuideloomDashboard`, a ``SchedulerPlugin`` that keeps the state of each export from
  the events the driver logs (``Client.log_event``, see :mod:`guideloom.cluster.progress`);
* a Bokeh page, added to distributed's own table of dashboard pages
  (``distributed.dashboard.scheduler.applications``) before the scheduler starts its dashboard,
  which shows that state and is linked from the dashboard's navigation bar;
* the same numbers as JSON at ``/guideloom/json`` (for scripts and ``curl``), a handler the
  plugin adds to the scheduler's HTTP server when it starts.

The embedded cluster installs both (:func:`install`). A ``dask scheduler`` started with
``--preload guideloom.cluster.dashboard`` gets them too (:func:`dask_setup`). Whether a scheduler
serves the page is asked without importing this module there (:mod:`guideloom.cluster.page`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from distributed.diagnostics.plugin import SchedulerPlugin

from guideloom.cluster.page import JSON_ROUTE, PLUGIN_NAME, PRELOAD, PRELOAD_HINT, ROUTE, page_link
from guideloom.cluster.progress import PROGRESS_TOPIC, TOPIC, apply_event, summary

REFRESH_MS = 500  # how often an open page redraws from the plugin's state (in the browser tab)

__all__ = ["JSON_ROUTE", "PLUGIN_NAME", "PRELOAD", "PRELOAD_HINT", "REFRESH_MS", "ROUTE",
           "GuideloomDashboard", "dask_setup", "exports_json", "guideloom_doc", "install",
           "page_link", "page_registered", "register_page"]


class GuideloomDashboard(SchedulerPlugin):
    """Keeps every export's state from the events of :mod:`guideloom.cluster.progress`."""

    name = PLUGIN_NAME

    def __init__(self) -> None:
        self.exports: dict[str, dict[str, Any]] = {}

    async def start(self, scheduler: Any) -> None:
        """Add the page to the dashboard's navigation bar, and its JSON to the HTTP server."""
        _add_to_navbar(scheduler)
        _add_json_route(scheduler)

    def log_event(self, topic: str, msg: Any) -> None:
        """Apply a guideloom event (other topics are ignored)."""
        if topic in (TOPIC, PROGRESS_TOPIC) and isinstance(msg, Mapping):
            apply_event(self.exports, msg)


def _add_to_navbar(scheduler: Any) -> None:
    try:
        from distributed.dashboard.scheduler import template_variables
    except ImportError:  # no bokeh: no dashboard
        return
    pages = template_variables(scheduler)["pages"]  # the list every page's navbar shows
    if ROUTE.strip("/") not in pages:
        pages.append(ROUTE.strip("/"))


def exports_json(scheduler: Any, now: float | None = None) -> dict[str, Any]:
    """What ``/guideloom/json`` answers: ``{"exports": [...]}``, running exports first, then
    the recent ones (newest first), each as :func:`guideloom.cluster.progress.summary`."""
    plugin = scheduler.plugins.get(PLUGIN_NAME)
    exports = plugin.exports.values() if plugin is not None else ()
    order = sorted(exports, key=lambda s: (s["status"] != "running", -float(s["started"])))
    return {"exports": [summary(s, now) for s in order]}


def _add_json_route(scheduler: Any) -> None:
    app = getattr(scheduler, "http_application", None)
    if app is None:  # no HTTP server
        return
    from tornado import web

    class ExportsJSON(web.RequestHandler):
        def get(self) -> None:
            self.set_header("Content-Type", "application/json")
            self.set_header("Cache-Control", "no-store")
            self.write(json.dumps(exports_json(scheduler)))

    app.add_handlers(r".*", [(JSON_ROUTE, ExportsJSON)])


def guideloom_doc(scheduler: Any, extra: Mapping[str, Any], doc: Any) -> None:
    """The Bokeh document of the page (called by the dashboard for each browser tab)."""
    from bokeh.models.widgets.markups import Div  # (bokeh.models re-exports it untyped)
    from distributed.dashboard.components.scheduler import BOKEH_THEME, env

    from guideloom.cluster.progress_html import STYLE, exports_html

    def render() -> str:
        plugin = scheduler.plugins.get(PLUGIN_NAME)
        exports = plugin.exports if plugin is not None else {}
        return (f"<style>{STYLE}</style><h2 style='font-family:sans-serif'>guideloom "
                f"exports</h2>" + exports_html(exports))

    div = Div(text=render(), sizing_mode="stretch_width", name="guideloom_exports")

    def update() -> None:
        text = render()
        if text != div.text:
            div.text = text

    doc.add_periodic_callback(update, REFRESH_MS)
    doc.title = "Dask: guideloom exports"
    doc.add_root(div)
    doc.template = env.get_template("simple.html")
    doc.template_variables.update(extra)
    doc.theme = BOKEH_THEME


def register_page() -> None:
    """Add the page to distributed's dashboard pages (for schedulers started after this)."""
    try:
        from distributed.dashboard import scheduler as pages
    except ImportError:  # no bokeh: distributed runs without a dashboard
        return
    pages.applications.setdefault(ROUTE, guideloom_doc)


def page_registered() -> bool:
    """Whether the page is in distributed's table of dashboard pages (in this process)."""
    try:
        from distributed.dashboard import scheduler as pages
    except ImportError:
        return False
    return pages.applications.get(ROUTE) is guideloom_doc


def install() -> list[SchedulerPlugin]:
    """Register the page; return the plugins to give a new ``Scheduler`` (``plugins=``)."""
    register_page()
    return [GuideloomDashboard()]


def dask_setup(scheduler: Any) -> None:
    """``dask scheduler --preload guideloom.cluster.dashboard``: the page and its plugin."""
    scheduler.add_plugin(GuideloomDashboard())


register_page()  # importing the module as a preload registers the page before the dashboard
