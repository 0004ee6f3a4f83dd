"""Where the wall time of one export goes, step by step (the driver's side).

The monitor's phases (:mod:`guideloom.export.progress`) are what a user watches; this clock is
finer and exists to measure the fixed cost of a job: resolving the selection, planning, the
lock and staging area, the scheduling round trips, the records, and each step of finalize
(rows, provenance, checksums, Croissant description, fsyncs, ``export.json``, publish).

:class:`StepClock` counts laps: :meth:`StepClock.lap` gives the time since the previous lap to
the named step, so the steps cover the whole run without gaps or overlap and their sum is the
wall time from the clock's start to its last lap. A step lapped twice adds up. The records'
share of the task phase is split off by :meth:`StepClock.split`: the tasks' own time (from
their summaries) is the records, the rest of that wall time is the scheduling.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping

logger = logging.getLogger(__name__)

# The steps in the order a job takes them (the benchmark prints them so).
RESOLVE = "resolve"  # the job description built from the call (api.export)
LOCK = "lock"  # the target's lock taken, an interrupted run recovered, the target checked
SELECT = "select"  # the manifest's index table read, the experiments chosen and located
PLAN = "plan"  # estimate, placement, partitions, identity, reference dtypes, schema probe
STAGING = "staging"  # the staging area started (job.json), the rows allocated
SCHEDULE = "schedule"  # the tasks' wall time less the records': round trips, waiting
RECORDS = "records"  # the tasks' own time: read, transform, write the rows, mark partitions
ROWS = "finalize-rows"  # rows moved into data/, sim_ids written
PROVENANCE = "provenance"  # provenance.json
CHECKSUMS = "checksums"  # checksums.json
CROISSANT = "croissant"  # croissant.json (the export's files hashed unless known)
FSYNC = "fsync"  # the batched fsync of data/ before export.json vouches for it
MANIFEST = "manifest"  # export.json written
PUBLISH = "publish"  # job marked publishing, the rename, the replaced export retired, the
# staging area removed, the run's events delivered to a cluster's scheduler, the lock released
STEPS = (RESOLVE, LOCK, SELECT, PLAN, STAGING, SCHEDULE, RECORDS, ROWS, PROVENANCE,
         CHECKSUMS, CROISSANT, FSYNC, MANIFEST, PUBLISH)
FIXED = tuple(s for s in STEPS if s != RECORDS)  # what a job costs beside its records


class StepClock:
    """Wall seconds per step of one run, counted as laps (see the module docstring).

    Args:
        start: ``time.perf_counter()`` when the run began (default: now).
    """

    def __init__(self, start: float | None = None) -> None:
        self._last = time.perf_counter() if start is None else start
        self.seconds: dict[str, float] = {}

    def lap(self, step: str) -> float:
        """Give the time since the previous lap to ``step``; return it."""
        now = time.perf_counter()
        spent = now - self._last
        self._last = now
        self.seconds[step] = self.seconds.get(step, 0.0) + spent
        return spent

    def split(self, step: str, part: str, part_s: float) -> None:
        """Move ``part_s`` seconds (at most all) of ``step``'s time to ``part``."""
        moved = min(max(0.0, part_s), self.seconds.get(step, 0.0))
        self.seconds[step] = self.seconds.get(step, 0.0) - moved
        self.seconds[part] = self.seconds.get(part, 0.0) + moved

    def add(self, step: str, seconds: float) -> None:
        """Count ``seconds`` spent before the clock started (the job's description)."""
        self.seconds[step] = self.seconds.get(step, 0.0) + seconds

    def rounded(self) -> dict[str, float]:
        """The steps so far, in seconds rounded to 0.1 ms, in :data:`STEPS` order."""
        order = [s for s in STEPS if s in self.seconds]
        order += sorted(set(self.seconds) - set(order))
        return {s: round(self.seconds[s], 4) for s in order}


def task_span_s(summaries: Iterable[Mapping[str, object]]) -> float:
    """Wall seconds the tasks ran, from the first start to the last end (their summaries'
    ``started`` and ``seconds``); 0 without any."""
    spans = [(float(s["started"]), float(s["started"]) + float(s["seconds"]))  # type: ignore[arg-type]
             for s in summaries if "started" in s and "seconds" in s]
    if not spans:
        return 0.0
    return max(end for _, end in spans) - min(start for start, _ in spans)


def fixed_seconds(steps: Mapping[str, float]) -> float:
    """The fixed part of a run: every step but the records."""
    return sum(v for k, v in steps.items() if k != RECORDS)
