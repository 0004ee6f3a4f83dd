"""What an export is doing while it runs, as state built from small events.

The driver describes a run as a short list of small events (``start``, ``phase``, ``tasks``,
one per finished partition with its counts, bytes and skips, ``skip`` and ``finish``). The same
events build the same state everywhere: the driver's terminal bars and saved run report
(:class:`guideloom.export.progress.RunMonitor`), and, sent to the scheduler with
``Client.log_event`` (so the dashboard's Events page lists skips and phase changes), the
``/guideloom`` page (:class:`guideloom.cluster.dashboard.GuideloomDashboard`). Nothing polls:
an event is sent when a phase starts or a task's summary arrives.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, MutableMapping
from typing import Any

TOPIC = "guideloom"  # phase changes, skips, start and finish (listed on the Events page)
PROGRESS_TOPIC = "guideloom-progress"  # one event per finished partition
ALL_TOPIC = "all"  # what the dashboard's Events page shows
PLAN, TASKS, FINALIZE, CHECKSUMS, PUBLISH = (
    "plan", "read-transform-write", "finalize", "checksums", "publish")
PHASES = (PLAN, TASKS, FINALIZE, CHECKSUMS, PUBLISH)  # every export's phases
# starting the embedded local cluster, inside the plan phase: a phase of its own when the job
# started one (the plan phase goes on after it)
CLUSTER_START = "cluster-start"
ALL_PHASES = (PLAN, CLUSTER_START, TASKS, FINALIZE, CHECKSUMS, PUBLISH)
TIMING_KEYS = {PLAN: "plan_s", CLUSTER_START: "cluster_start_s", TASKS: "tasks_s",
               FINALIZE: "finalize_s", CHECKSUMS: "checksums_s", PUBLISH: "publish_s"}
KEEP_EXPORTS = 20  # finished exports a state holder remembers
MB = 1e6


def apply_event(exports: MutableMapping[str, dict[str, Any]], msg: Mapping[str, Any]) -> None:
    """Update ``exports`` (export id -> state) with one event of a run.

    Unknown actions and events of unknown exports are ignored (a page opened mid-run, or a
    newer guideloom on the driver, never breaks the holder).
    """
    action, key, now = msg.get("action"), msg.get("export"), float(msg.get("time", 0.0))
    if not isinstance(key, str):  # no export named: nothing to update
        return
    if action == "start":
        exports[key] = {
            "export": key, "view": msg.get("view"), "target": msg.get("target"),
            "output": msg.get("output"), "total": int(msg.get("total", 0)), "done": 0,
            "written": 0, "skipped": [], "phase": None, "phases": [], "status": "running",
            "started": now, "updated": now, "bytes_decoded": 0, "bytes_written": 0,
            "bytes_decoded_input": 0,
            "workers": {}, "tasks": [], "samples": [[now, 0, 0, 0, 0]], "placement": None,
            "error": None, "update": None,
        }
        _forget_old(exports)
        return
    state = exports.get(key)
    if state is None:
        return
    state["updated"] = now
    if action == "phase":
        _end_phase(state, now)
        state["phase"] = msg.get("name")
        state["phases"].append({"name": msg.get("name"), "start": now, "end": None,
                                "done": 0, "total": msg.get("total"),
                                "detail": msg.get("detail", ""), "tasks": msg.get("tasks")})
    elif action == "placement":
        state["placement"] = dict(msg.get("placement") or {})
    elif action == "update":  # an update: experiments added, removed, changed, carried
        state["update"] = {k: int(v) for k, v in (msg.get("counts") or {}).items()}
    elif action == "total":
        state["total"] = int(msg.get("total", state["total"]))
        state["done"] = max(state["done"], int(msg.get("already", 0)))
    elif action == "tasks":
        _add_task(state, msg, now)
    elif action == "step":  # progress within the current phase (finalize: chunks)
        if state["phases"]:
            p = state["phases"][-1]
            done = int(msg.get("done", 0))
            p.setdefault("first_step", [now, done])
            p.update(done=done, total=int(msg.get("total", 0)), unit=msg.get("unit", ""))
    elif action == "skip":
        state["skipped"].append({k: msg.get(k) for k in ("sim_id", "file", "error")})
    elif action == "finish":
        _end_phase(state, now)
        state["status"] = msg.get("status", "published")
        state["error"] = msg.get("error")
        state["phase"] = None


def _forget_old(exports: MutableMapping[str, dict[str, Any]]) -> None:
    finished = [k for k, s in exports.items() if s["status"] != "running"]
    for k in finished[:max(0, len(finished) - KEEP_EXPORTS)]:
        del exports[k]


def _end_phase(state: dict[str, Any], now: float) -> None:
    if state["phases"] and state["phases"][-1]["end"] is None:
        state["phases"][-1]["end"] = now


def _add_task(state: dict[str, Any], msg: Mapping[str, Any], now: float) -> None:
    n = int(msg.get("experiments", 0))
    state["done"] += n
    state["written"] += int(msg.get("written", 0))
    state["bytes_decoded"] += int(msg.get("bytes_decoded", 0))
    state["bytes_decoded_input"] += int(msg.get("bytes_decoded_input", 0))
    state["bytes_written"] += int(msg.get("bytes_written", 0))
    if state["phases"]:
        state["phases"][-1]["done"] += n
    worker = str(msg.get("worker") or "in-process")
    w = state["workers"].setdefault(worker, {"experiments": 0, "bytes_decoded": 0,
                                             "bytes_decoded_input": 0, "bytes_written": 0,
                                             "busy_s": 0.0, "tasks": 0})
    w["experiments"] += n
    w["bytes_decoded"] += int(msg.get("bytes_decoded", 0))
    w["bytes_decoded_input"] += int(msg.get("bytes_decoded_input", 0))
    w["bytes_written"] += int(msg.get("bytes_written", 0))
    w["busy_s"] += float(msg.get("seconds", 0.0))
    w["tasks"] += 1
    started = msg.get("started")
    start = now if started is None else float(started)
    end = now if started is None else start + float(msg.get("seconds", 0.0))
    state["tasks"].append({"worker": worker, "index": msg.get("index"),
                           "start": start, "end": end,
                           "experiments": n, "skipped": int(msg.get("skipped", 0))})
    state["samples"].append([now, state["done"], state["bytes_decoded"],
                             state["bytes_written"], state["bytes_decoded_input"]])


def summary(state: Mapping[str, Any], now: float | None = None) -> dict[str, Any]:
    """One export's numbers as plain JSON values (what the page shows, for scripts and
    ``curl``: ``/guideloom/json``): experiments done of the total, tasks finished of those
    the run submits, the phases with their seconds, rates and ETA, skips, placement, and an
    update's counts (``update``: ``None`` for a full export)."""
    now = time.time() if now is None else now
    spent = phase_seconds(state, now)
    tasks = next((p.get("tasks") for p in state["phases"] if p["name"] == TASKS), None)
    return {
        "export": state["export"], "view": state["view"], "target": state["target"],
        "output": state.get("output"), "status": state["status"], "phase": state["phase"],
        "experiments": {"done": state["done"], "total": state["total"],
                        "written": state["written"], "skipped": len(state["skipped"])},
        "tasks": {"finished": tasks_finished(state), "total": tasks},
        "phases": [_phase_summary(p, state["status"], now) for p in state["phases"]],
        "elapsed_s": round(sum(spent.values()), 4),
        "rates": rates(state, now),
        "skipped": [dict(s) for s in state["skipped"]],
        "placement": state.get("placement"), "error": state.get("error"),
        "update": state.get("update"),  # an update's added/removed/changed/carried
        "started": state["started"], "updated": state["updated"],
    }


def _phase_summary(phase: Mapping[str, Any], status: str, now: float) -> dict[str, Any]:
    end = now if phase["end"] is None else phase["end"]
    return {"name": phase["name"], "seconds": round(max(0.0, end - phase["start"]), 4),
            "running": phase["end"] is None and status == "running", "done": phase.get("done"),
            "total": phase.get("total"), "unit": phase.get("unit", "")}


def tasks_finished(state: Mapping[str, Any]) -> int:
    """Tasks of this run that have finished (their summaries arrived)."""
    return len(state["tasks"])


def phase_seconds(state: Mapping[str, Any], now: float | None = None) -> dict[str, float]:
    """Seconds per phase name (a running phase counts until ``now``)."""
    now = time.time() if now is None else now
    out: dict[str, float] = {}
    for p in state["phases"]:
        end = now if p["end"] is None else p["end"]
        out[p["name"]] = out.get(p["name"], 0.0) + max(0.0, end - p["start"])
    return out


def rates(state: Mapping[str, Any], now: float | None = None) -> dict[str, Any]:
    """Experiments/s and MB/s over the read-transform-write phase, its ETA plus an estimate of
    the finalize phase, and per-worker rates over their busy time.

    Three byte rates, each named for what it counts: ``mb_per_s_decoded``, the records as read
    and decoded (the input, before transforms); ``mb_per_s_produced``, the transforms' output
    handed to the writer (the state's ``bytes_decoded``); ``mb_per_s_written``, the bytes the
    format wrote (compressed, encoded)."""
    now = time.time() if now is None else now
    spent = phase_seconds(state, now).get(TASKS, 0.0)
    fresh = sum(t["experiments"] for t in state["tasks"])
    exp_s = fresh / spent if spent > 0 else 0.0
    decoded = state.get("bytes_decoded_input", 0) / MB / spent if spent > 0 else 0.0
    produced = state["bytes_decoded"] / MB / spent if spent > 0 else 0.0
    written = state["bytes_written"] / MB / spent if spent > 0 else 0.0
    remaining = max(0, state["total"] - state["done"])
    eta: float | None = None
    if state["status"] == "running":
        current = state["phases"][-1] if state["phases"] else {}
        if state["phase"] in (PLAN, TASKS) and exp_s > 0:
            eta = remaining / exp_s + finalize_estimate(state, written)
        elif state["phase"] != TASKS and current.get("first_step") and current.get("total"):
            eta = step_eta(current, now)  # the phase's own progress (finalize: chunks)
        elif state["phase"] == FINALIZE:
            eta = max(0.0, finalize_estimate(state, written) - phase_seconds(state, now)
                      .get(FINALIZE, 0.0))
    workers = {
        name: {"experiments": w["experiments"], "tasks": w["tasks"],
               "experiments_per_s": w["experiments"] / w["busy_s"] if w["busy_s"] else 0.0,
               "mb_per_s_decoded": (w.get("bytes_decoded_input", 0) / MB / w["busy_s"]
                                    if w["busy_s"] else 0.0),
               "mb_per_s_produced": w["bytes_decoded"] / MB / w["busy_s"] if w["busy_s"] else 0.0,
               "mb_per_s_written": w["bytes_written"] / MB / w["busy_s"] if w["busy_s"] else 0.0}
        for name, w in sorted(state["workers"].items())
    }
    return {"experiments_per_s": exp_s, "mb_per_s_decoded": decoded,
            "mb_per_s_produced": produced, "mb_per_s_written": written, "eta_s": eta,
            "workers": workers}


def step_eta(phase: Mapping[str, Any], now: float) -> float | None:
    """Seconds left in a phase from its own progress since its first step (``None`` until
    some progress was made)."""
    at, first = phase["first_step"]
    done, total = int(phase["done"]), int(phase["total"])
    if done >= total:
        return 0.0
    if done <= first or now <= at:
        return None
    return float((total - done) * (now - at) / (done - first))


def finalize_estimate(state: Mapping[str, Any], written_mb_s: float) -> float:
    """Seconds the finalize phase may take: none without skips; with skips, rewriting the
    rows written so far at the tasks' write rate (gap closing moves rows after a gap)."""
    if not state["skipped"] or written_mb_s <= 0 or not state["done"]:
        return 0.0
    per_experiment = state["bytes_written"] / max(1, state["written"])
    return float(per_experiment * max(state["written"], state["total"] - len(state["skipped"]))
                 / (written_mb_s * MB))
