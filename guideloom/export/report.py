"""The saved run report: one self-contained HTML file written after an export run.

Modelled on Dask's ``performance_report``, built from the run's own events
(:mod:`guideloom.cluster.progress`), so in-process runs get one too: the summary (experiments,
skips, rates, the placement decision), the phase timeline, the task stream per worker,
throughput over time and the skipped experiments with their reasons. The plots are Bokeh with
its JavaScript inlined (no network needed to open the file); every figure a person reads as
text (counts, phases, skipped ids) is plain HTML.
"""

from __future__ import annotations

import html
import itertools
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from guideloom.cluster.progress import ALL_PHASES, MB, PHASES, phase_seconds
from guideloom.cluster.progress_html import STYLE, export_html

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>guideloom run report: {title}</title>
<style>body {{ font-family: sans-serif; margin: 16px; }} {style}</style>
{resources}
{script}
</head>
<body>
<h1>guideloom run report</h1>
<p>{created}</p>
{summary}
<h2>Placement</h2>
{placement}
<h2>Phase timeline, task stream per worker, throughput over time</h2>
{plots}
</body>
</html>
"""

PHASE_COLOURS = dict(zip(ALL_PHASES, ("#999999", "#fdae6b", "#2c7fb8", "#f03b20", "#31a354",
                                      "#756bb1"), strict=True))


def _placement_html(placed: Mapping[str, Any] | None) -> str:
    if not placed:
        return "<p>not placed: the run ended before it chose where to run</p>"
    rows = "".join(f"<tr><th>{html.escape(str(k))}</th><td>{html.escape(str(v))}</td></tr>"
                   for k, v in placed.items())
    return f'<table class="gl-placement">{rows}</table>'


def _rate(samples: list[list[float]], column: int) -> list[float]:
    """MB/s between consecutive samples of a cumulative byte count (``column`` of each sample;
    0 where a sample has no such column)."""
    def at(sample: list[float]) -> float:
        return sample[column] if len(sample) > column else 0.0
    return [0.0] + [(at(b) - at(a)) / MB / (b[0] - a[0]) if b[0] > a[0] else 0.0
                    for a, b in itertools.pairwise(samples)]


def _plots(state: Mapping[str, Any], now: float) -> Any:
    from bokeh.layouts import column
    from bokeh.models import ColumnDataSource, HoverTool, LinearAxis, Range1d
    from bokeh.plotting import figure

    t0 = float(state["started"])
    phases = list(state["phases"])
    ends = [now if p["end"] is None else p["end"] for p in phases]
    # (type: ignore below) bokeh's figure.pyi declares the options as dataclass InitVars, which
    # mypy does not read as parameters of figure()
    timeline = figure(title="phases", height=160, sizing_mode="stretch_width",  # type: ignore[call-arg]
                      y_range=[p for p in ALL_PHASES if any(q["name"] == p for q in phases)][::-1]  # type: ignore[arg-type]
                      or list(PHASES), x_axis_label="seconds since the start",
                      name="phase_timeline")
    source = ColumnDataSource({
        "name": [p["name"] for p in phases], "left": [p["start"] - t0 for p in phases],
        "right": [e - t0 for e in ends],
        "seconds": [round(e - p["start"], 3) for p, e in zip(phases, ends, strict=True)],
        "colour": [PHASE_COLOURS.get(p["name"], "#333333") for p in phases]})
    timeline.hbar(y="name", left="left", right="right", height=0.6, color="colour",
                  source=source)
    timeline.add_tools(HoverTool(tooltips="@name: @seconds s"))

    tasks = state["tasks"]
    workers = sorted({t["worker"] for t in tasks}) or ["in-process"]
    stream = figure(title="task stream per worker (one bar per partition; red: with skips)",  # type: ignore[call-arg]
                    height=max(140, 40 + 30 * len(workers)), sizing_mode="stretch_width",
                    y_range=workers, x_range=timeline.x_range,  # type: ignore[arg-type]
                    x_axis_label="seconds since the start", name="task_stream")
    stream.hbar(y="worker", left="left", right="right", height=0.7, color="colour",
                line_color="white", source=ColumnDataSource({
                    "worker": [t["worker"] for t in tasks],
                    "left": [t["start"] - t0 for t in tasks],
                    "right": [t["end"] - t0 for t in tasks],
                    "experiments": [t["experiments"] for t in tasks],
                    "skipped": [t["skipped"] for t in tasks],
                    "index": [t["index"] for t in tasks],
                    "colour": ["#f03b20" if t["skipped"] else "#2c7fb8" for t in tasks]}))
    stream.add_tools(HoverTool(
        tooltips="partition @index: @experiments experiments, @skipped skipped"))

    samples = state["samples"]
    times = [s[0] - t0 for s in samples]
    rate_mb = _rate(samples, 2)  # the transforms' output
    input_mb = _rate(samples, 4)  # decoded input, before transforms (0 in older states)
    throughput = figure(title="throughput: experiments done, MB/s decoded and produced",  # type: ignore[call-arg]
                        height=220,
                        sizing_mode="stretch_width", x_range=timeline.x_range,
                        x_axis_label="seconds since the start", y_axis_label="experiments done",
                        name="throughput")
    throughput.step(times, [s[1] for s in samples], mode="after", line_width=2,
                    legend_label="experiments done")
    throughput.extra_y_ranges = {
        "mb": Range1d(start=0, end=max([1.0, *rate_mb, *input_mb]) * 1.1)}
    throughput.add_layout(LinearAxis(y_range_name="mb", axis_label="MB/s"), "right")
    throughput.step(times, input_mb, mode="before", color="#2c7fb8", y_range_name="mb",
                    legend_label="MB/s decoded (input)")
    throughput.step(times, rate_mb, mode="before", color="#f03b20", y_range_name="mb",
                    legend_label="MB/s produced (transform output)")
    throughput.legend.location = "top_left"
    return column(timeline, stream, throughput, sizing_mode="stretch_width")


def report_html(state: Mapping[str, Any], now: float | None = None) -> str:
    """The report of one run's state as a complete HTML page."""
    from bokeh.embed import components
    from bokeh.resources import INLINE

    now = float(state["updated"]) if now is None else now
    script, div = components(_plots(state, now))
    spent = phase_seconds(state, now)
    created = (f"{html.escape(str(state['status']))} run of view "
               f"{html.escape(str(state['view']))}, started "
               f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime(state['started']))}, "
               f"{sum(spent.values()):.1f} s")
    return PAGE.format(title=html.escape(str(state["view"])), style=STYLE,
                       resources=INLINE.render(), script=script, created=created,
                       summary=export_html(state, now),
                       placement=_placement_html(state.get("placement")), plots=div)


def write_report(path: str | os.PathLike[str], state: Mapping[str, Any]) -> Path:
    """Write the run report to ``path`` (replaced if it exists); returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(report_html(state), encoding="utf-8")
    os.replace(tmp, out)
    return out
