"""One export run's state as a small HTML fragment (the dashboard page and the run report).

Everything a person reads is plain HTML text: view, target, experiments done / total, the
phases with their own progress, rates, ETA, skipped experiments with their reasons and the
per-worker rates.
"""

from __future__ import annotations

import html
import time
from collections.abc import Mapping
from typing import Any

from guideloom.cluster.progress import (
    ALL_PHASES,
    CLUSTER_START,
    TASKS,
    phase_seconds,
    rates,
    tasks_finished,
)

STYLE = """
.gl-export { font-family: sans-serif; font-size: 13px; margin: 0 0 18px 0; }
.gl-export h3 { margin: 4px 0; font-size: 15px; }
.gl-export table { border-collapse: collapse; margin: 4px 0 8px 0; }
.gl-export td, .gl-export th { border: 1px solid #ccc; padding: 2px 8px; text-align: left; }
.gl-bar { display: inline-block; width: 160px; height: 10px; background: #eee;
          vertical-align: middle; }
.gl-bar > span { display: block; height: 10px; background: #2c7fb8; }
.gl-running { color: #2c7fb8; font-weight: bold; }
.gl-skip { color: #b30000; }
"""


def _e(value: Any) -> str:
    return html.escape(str(value))


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.1f} s" if value < 120 else f"{value / 60:.1f} min"


def _bar(fraction: float) -> str:
    width = max(0.0, min(1.0, fraction)) * 100
    return f'<span class="gl-bar"><span style="width:{width:.0f}%"></span></span>'


def _update_row(counts: Mapping[str, int] | None) -> str:
    """The row of an update's counts (nothing for a full export)."""
    if not counts:
        return ""
    return (f"<tr><th>update</th><td>{counts.get('added', 0)} added, "
            f"{counts.get('removed', 0)} removed, {counts.get('changed', 0)} changed (read), "
            f"{counts.get('carried', 0)} carried (not decoded)</td></tr>")


def export_html(state: Mapping[str, Any], now: float | None = None) -> str:
    """The HTML fragment of one export (see the module docstring)."""
    now = time.time() if now is None else now
    r = rates(state, now)
    spent = phase_seconds(state, now)
    total, done = state["total"], state["done"]
    status = state["status"]
    current = state["phase"]
    head = (f'<h3>export of view {_e(state["view"])} to {_e(state["target"])} '
            f'({_e(state.get("output"))}): '
            + (f'<span class="gl-running">{_e(current or "running")}</span>'
               if status == "running" else _e(status)) + "</h3>")
    summary = (
        f"<table><tr><th>experiments done</th><td>{done} / {total} "
        f"{_bar(done / total if total else 0)}</td></tr>"
        f"<tr><th>written</th><td>{state['written']}</td></tr>"
        + _update_row(state.get("update"))
        +
        f"<tr><th>skipped</th><td>{len(state['skipped'])}</td></tr>"
        f"<tr><th>experiments/s</th><td>{r['experiments_per_s']:.1f}</td></tr>"
        f"<tr><th>MB/s decoded (input, before transforms)</th>"
        f"<td>{r['mb_per_s_decoded']:.1f}</td></tr>"
        f"<tr><th>MB/s produced (transform output)</th><td>{r['mb_per_s_produced']:.1f}</td></tr>"
        f"<tr><th>MB/s written</th><td>{r['mb_per_s_written']:.1f}</td></tr>"
        f"<tr><th>ETA (with finalize)</th><td>{_seconds(r['eta_s'])}</td></tr>"
        f"<tr><th>elapsed</th><td>{_seconds(sum(spent.values()))}</td></tr>"
        + (f"<tr><th>error</th><td>{_e(state['error'])}</td></tr>" if state.get("error")
           else "")
        + "</table>")
    rows = []
    seen = {p["name"]: p for p in state["phases"]}
    for name in ALL_PHASES:
        p = seen.get(name)
        if p is None and name == CLUSTER_START:
            continue  # the job started no cluster
        if p is None:
            rows.append(f"<tr><td>{_e(name)}</td><td>waiting</td><td></td><td></td></tr>")
            continue
        running = p["end"] is None and status == "running"
        if name == TASKS and p.get("total"):
            progress = f"{done} / {p['total']} experiments {_bar(done / p['total'])}"
            if p.get("tasks") is not None:  # finished, not submitted: what "done" means here
                progress += f"; {tasks_finished(state)} of {p['tasks']} tasks finished"
        elif p.get("unit") and p.get("total"):  # the phase's own progress (finalize: chunks)
            progress = (f"{p['done']} / {p['total']} {_e(p['unit'])} "
                        f"{_bar(p['done'] / p['total'])}")
        else:
            progress = "running" if running else "done"
        label = f'<span class="gl-running">{_e(name)}</span>' if running else _e(name)
        rows.append(f"<tr><td>{label}</td><td>{progress}</td>"
                    f"<td>{_seconds(spent.get(name))}</td><td>{_e(p.get('detail', ''))}</td></tr>")
    phases = ("<table><tr><th>phase</th><th>progress</th><th>time</th><th></th></tr>"
              + "".join(rows) + "</table>")
    skipped = ""
    if state["skipped"]:
        skipped = ("<table><tr><th>skipped experiment</th><th>file</th><th>reason</th></tr>"
                   + "".join(f'<tr class="gl-skip"><td>{_e(s["sim_id"])}</td>'
                             f"<td>{_e(s.get('file') or '')}</td><td>{_e(s.get('error'))}</td></tr>"
                             for s in state["skipped"]) + "</table>")
    workers = ""
    if r["workers"]:
        workers = ("<table><tr><th>worker</th><th>tasks</th><th>experiments</th>"
                   "<th>experiments/s</th><th>MB/s decoded</th><th>MB/s produced</th>"
                   "<th>MB/s written</th></tr>"
                   + "".join(f"<tr><td>{_e(name)}</td><td>{w['tasks']}</td>"
                             f"<td>{w['experiments']}</td><td>{w['experiments_per_s']:.1f}</td>"
                             f"<td>{w['mb_per_s_decoded']:.1f}</td>"
                             f"<td>{w['mb_per_s_produced']:.1f}</td>"
                             f"<td>{w['mb_per_s_written']:.1f}</td></tr>"
                             for name, w in r["workers"].items()) + "</table>")
    return f'<div class="gl-export">{head}{summary}{phases}{skipped}{workers}</div>'


def exports_html(exports: Mapping[str, Mapping[str, Any]], now: float | None = None) -> str:
    """Running exports first, then the recent ones (newest first)."""
    if not exports:
        return "<p>No guideloom export has run on this cluster yet.</p>"
    order = sorted(exports.values(),
                   key=lambda s: (s["status"] != "running", -float(s["started"])))
    return "".join(export_html(s, now) for s in order)
