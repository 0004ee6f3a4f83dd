"""The driver's monitor of one export run (events, terminal bars, timings); the events and
the state they build are in :mod:`guideloom.cluster.progress`."""

from __future__ import annotations

import sys
import threading
import time
import uuid
from collections.abc import Mapping
from typing import Any

from guideloom import config
from guideloom.cluster.events import EventSender
from guideloom.cluster.progress import (
    ALL_TOPIC,
    CHECKSUMS,
    CLUSTER_START,
    FINALIZE,
    PHASES,
    PLAN,
    PROGRESS_TOPIC,
    PUBLISH,
    TASKS,
    TIMING_KEYS,
    TOPIC,
    apply_event,
    phase_seconds,
    rates,
)
from guideloom.cluster.runtime import progress_bar
from guideloom.export.clock import StepClock

STEPS_SHOWN = 100  # a phase's progress is sent about this many times

__all__ = ["CHECKSUMS", "CLUSTER_START", "FINALIZE", "PHASES", "PLAN", "PUBLISH", "TASKS",
           "RunMonitor"]


class RunMonitor:
    """The driver's record of one export run; sends its events to a Dask scheduler when
    one is attached, and draws one terminal bar per phase when asked.

    Args:
        view: The view's name.
        target: Where the export is published.
        output: The output format.
        total: Experiments of the job.
        show_progress: Draw tqdm bars on stderr.
    """

    def __init__(self, view: str, target: str, output: str, total: int,
                 show_progress: bool = False, started: float | None = None) -> None:
        self.id = uuid.uuid4().hex[:12]
        self.view = view
        self.exports: dict[str, dict[str, Any]] = {}
        self.events: list[tuple[str, dict[str, Any]]] = []
        self.client: Any = None
        self._sender: EventSender | None = None
        self.show_progress = show_progress
        self._bar: Any = None
        self._shown: tuple[str, float] | None = None  # the phase announced on the terminal
        self._announce: threading.Timer | None = None  # announces a phase that lasts
        self._terminal = threading.Lock()  # the announcing timer and the phase's end
        self._shown_phase = 0  # counts the phases the terminal showed or skipped
        self._step_bar: Any = None  # the current phase's own bar (finalize: chunks)
        self._step_sent: tuple[int, int] | None = None  # (total, done) last sent
        self.clock = StepClock()  # the finer steps of the run's wall time (its fixed cost)
        self._emit(TOPIC, "start", view=view, target=target, output=output, total=total,
                   at=started)

    @property
    def state(self) -> dict[str, Any]:
        """This run's state (see :func:`apply_event`)."""
        return self.exports[self.id]

    def attach(self, client: Any) -> None:
        """Send this run's events so far to ``client``'s scheduler, and later ones as they
        happen, without waiting for each (``None``: stay local; see
        :class:`~guideloom.cluster.events.EventSender`)."""
        self.client = client
        if self._sender is not None:
            self._sender.close()
        self._sender = None if client is None else EventSender(client)
        if client is not None:
            for topic, msg in self.events:
                self._send(topic, msg)

    def phase(self, name: str, *, total: int | None = None, detail: str = "",
              at: float | None = None, tasks: int | None = None) -> None:
        """A new phase starts (the previous one ends); ``at``: its start time if earlier;
        ``tasks``: the tasks it runs (the tasks phase), against which finished ones count."""
        self._close_bar()
        self._emit(TOPIC, "phase", at=at, name=name, total=total, detail=detail, tasks=tasks)
        self._new_bar(name, total, detail)

    def placement(self, placed: Mapping[str, Any]) -> None:
        """Record where the job runs (the placement decision)."""
        self._emit(TOPIC, "placement", placement=dict(placed))

    def update_counts(self, counts: Mapping[str, int]) -> None:
        """Record what an update does: experiments added, removed, changed and carried."""
        self._emit(TOPIC, "update", counts=dict(counts))

    def totals(self, total: int, already: int) -> None:
        """The job's experiment count, and how many an earlier run already did."""
        self._emit(PROGRESS_TOPIC, "total", total=total, already=already)
        if self._bar is not None and already:
            self._bar.update(already)

    def task_done(self, summary: Mapping[str, Any]) -> None:
        """One partition's summary arrived (counts, bytes, skips)."""
        skipped = list(summary.get("skipped", ()))
        for skip in skipped:  # first: whoever sees the counts move has the skips too
            self._emit(TOPIC, "skip", sim_id=str(skip.get("sim_id")), file=skip.get("file"),
                       error=skip.get("error"))
        self._emit(PROGRESS_TOPIC, "tasks", index=summary.get("index"),
                   experiments=len(summary.get("written", ())) + len(skipped),
                   written=len(summary.get("written", ())), skipped=len(skipped),
                   bytes_decoded=int(summary.get("bytes_decoded", 0)),
                   bytes_decoded_input=int(summary.get("bytes_decoded_input", 0)),
                   bytes_written=int(summary.get("bytes", 0) or 0),
                   seconds=float(summary.get("seconds", 0.0)),
                   started=summary.get("started"), worker=summary.get("worker"))
        if self._bar is not None:
            r = rates(self.state)
            self._bar.set_postfix_str(
                f"skipped {len(self.state['skipped'])}, {r['mb_per_s_decoded']:.0f} MB/s "
                f"decoded, {r['mb_per_s_produced']:.0f} MB/s produced, "
                f"{r['mb_per_s_written']:.0f} MB/s written", refresh=False)
            self._bar.update(len(summary.get("written", ())) + len(skipped))

    def step(self, done: int, total: int, unit: str = "chunks") -> None:
        """Progress within the current phase (finalize: chunks of the final arrays), drawn
        as a bar and sent about every 1% (and at the end)."""
        if self.show_progress and self._step_bar is None and total:
            self._step_bar = progress_bar(True, total, unit=unit.rstrip("s"),
                                          desc=f"{self.view} {self.state['phase']}",
                                          delay=float(config.get("phase_line_s")))
        if self._step_bar is not None:
            self._step_bar.update(done - self._step_bar.n)
        sent = self._step_sent
        if sent is not None and sent[0] == total and done < total and (
                done - sent[1] < max(1, total // STEPS_SHOWN)):
            return
        self._step_sent = (total, done)
        self._emit(PROGRESS_TOPIC, "step", done=done, total=total, unit=unit)

    def finish(self, status: str = "published", error: str | None = None) -> None:
        """The run ended (``published``, ``failed`` or ``interrupted``; only the first call
        counts)."""
        if self.state["status"] != "running":
            return
        self._close_bar()
        self._emit(TOPIC, "finish", status=status, error=error)
        if self._sender is not None:  # the scheduler has every event before the client closes
            self._sender.flush()
            self._sender.close()

    def timings(self) -> dict[str, float]:
        """Seconds per phase so far, keyed as in ``export.json`` (``plan_s``, ``tasks_s``…)."""
        return {TIMING_KEYS.get(k, f"{k}_s"): round(v, 4)
                for k, v in phase_seconds(self.state).items()}

    def _emit(self, topic: str, action: str, at: float | None = None, **fields: Any) -> None:
        msg = {"action": action, "export": self.id,
               "time": time.time() if at is None else at, **fields}
        self.events.append((topic, msg))
        apply_event(self.exports, msg)
        if self.client is not None:
            self._send(topic, msg)

    def _send(self, topic: str, msg: dict[str, Any]) -> None:
        sender = self._sender
        if sender is None or sender.failed or getattr(
                self.client, "status", "running") != "running":  # closed after Ctrl-C
            if sender is not None:
                sender.close()
            self.client = self._sender = None
            return
        # queued in order; a lost dashboard event never fails the export
        if topic == TOPIC:  # the dashboard's Events page plots the "all" topic
            sender.send(ALL_TOPIC, {**msg, "action": f"guideloom-{msg['action']}"})
        sender.send(topic, msg)

    def _new_bar(self, name: str, total: int | None, detail: str) -> None:
        if not self.show_progress:
            return
        if name == TASKS:
            self._bar = progress_bar(True, int(total or 0), unit="exp",
                                     desc=f"{self.view} {name}")
        elif name not in (PLAN, CLUSTER_START):  # shown once it lasts long enough to matter
            line = f"guideloom: {self.view} {name}{f' ({detail})' if detail else ''} ..."
            since, number = time.time(), self._shown_phase
            wait = float(config.get("phase_line_s"))
            if wait <= 0:
                self._say(line, name, since, number)
                return
            self._announce = threading.Timer(wait, self._say, (line, name, since, number))
            self._announce.daemon = True
            self._announce.start()

    def _say(self, line: str, name: str, since: float, number: int) -> None:
        """Print a phase's first line (it has lasted; its duration follows when it ends)."""
        with self._terminal:
            if number != self._shown_phase:
                return  # the phase ended meanwhile
            print(line, file=sys.stderr, flush=True)
            self._shown = (name, since)

    def _close_bar(self) -> None:
        """End the terminal's view of the current phase (its bar, or its duration when it
        was announced)."""
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        if self._step_bar is not None:
            self._step_bar.close()
            self._step_bar = None
        self._step_sent = None
        with self._terminal:
            self._shown_phase += 1
            if self._announce is not None:
                self._announce.cancel()
                self._announce = None
            if self._shown is not None:
                name, since = self._shown
                print(f"guideloom: {self.view} {name} took {time.time() - since:.1f} s",
                      file=sys.stderr, flush=True)
                self._shown = None
