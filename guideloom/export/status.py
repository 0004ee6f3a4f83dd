"""Where an export job stands: published, staged and partly done, or absent (``guideloom status``).

Read from the target and its staging area only; nothing here starts or changes a job.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from guideloom.errors import IncompleteExportError, NoJobError
from guideloom.export.staging import FAILED_KEY, PHASE_FINALIZING, PHASE_PUBLISHING, Staging
from guideloom.export.target import running_holder
from guideloom.formats import get_format
from guideloom.formats.layout import read_export_manifest, resolve_target, target_of_staging_dir

IDENTITY_SHOWN = 12  # characters of the job identity shown to users


@dataclass(frozen=True)
class JobStatus:
    """The state of one export target.

    Attributes:
        target: The export's path or URL.
        complete: A published export is at the target.
        partitions_done: Finished partitions (all of them when complete).
        partitions: Partitions of the job.
        experiments_done: Experiments written or skipped so far.
        experiments: Experiments of the job.
        written: Experiments written (complete exports).
        skipped: Experiments skipped (complete exports).
        job: The staged job description (incomplete jobs).
        staging_dir: The staging directory (incomplete jobs).
        last_partition_age_s: Seconds since the last partition finished (local, incomplete).
        manifest: ``export.json`` (complete exports).
        problem: Why a published export fails its open-time checks, or ``None``.
        running: Who runs the job now (``"pid … on …, started …"``; local targets), or
            ``None`` when no run holds the target's lock (an interrupted job).
        lock_visible: Whether ``running`` is known (a URL target's lock is not visible).
        done_indices: The finished partitions' indices (incomplete jobs).
    """

    target: str
    complete: bool
    partitions_done: int
    partitions: int
    experiments_done: int
    experiments: int
    written: int = 0
    skipped: int = 0
    job: dict[str, Any] = field(default_factory=dict)
    staging_dir: str | None = None
    last_partition_age_s: float | None = None
    manifest: Mapping[str, Any] = field(default_factory=dict)  # an ExportManifest when complete
    problem: str | None = None
    running: str | None = None
    lock_visible: bool = True
    done_indices: tuple[int, ...] = ()

    @property
    def failed(self) -> str | None:
        """The error a run of this job failed with (the staged job records it), or ``None``
        (never failed, or a run holds it now)."""
        failure = self.job.get(FAILED_KEY)
        if self.running is not None or not isinstance(failure, dict):
            return None
        return str(failure.get("error", "an error"))

    @property
    def kept_text(self) -> str:
        """Which partitions are finished: ``4 of 9 partitions (0-3)``."""
        return (f"{len(self.done_indices)} of {self.partitions} partitions "
                f"({ranges_text(self.done_indices)})" if self.done_indices
                else f"none of {self.partitions} partitions")

    def rerun_advice(self) -> str:
        """What a rerun of a failed job can keep: only this very job (same data, transforms
        and options) keeps the finished partitions, and it fails again where this run did
        unless the cause was outside the job; a changed transform is another job."""
        keep = (f"a rerun of this same job keeps the {self.kept_text} staged in "
                f"{self.staging_dir} and runs the rest, so it fails again where this run "
                "failed unless the cause was outside the job (a file, a worker, the machine)"
                if self.done_indices else "nothing is kept")
        return (f"{keep}; {self.resume_hint} to run it again; a job with a fixed transform, "
                "other data or other options is another job: it starts over and discards what "
                "is staged")

    @property
    def phase(self) -> str:
        """The job's phase: ``read-transform-write`` until every partition is written, then
        ``finalize`` (rows moved into place) and ``publish``."""
        stored = self.job.get("phase")
        if stored == PHASE_FINALIZING:
            return "finalize"
        if stored == PHASE_PUBLISHING:
            return "publish"
        return "read-transform-write"

    @property
    def identity(self) -> str:
        """The job identity as shown to users."""
        return str(self.job.get("identity", "?"))[:IDENTITY_SHOWN]

    @property
    def resume_hint(self) -> str:
        """What to run to resume an incomplete job (stored with the job when it started)."""
        return str(self.job.get("resume", "rerun the same export"))

    def line(self) -> str:
        """One line: ``complete: 9/9 partitions done (…)`` or ``incomplete: 4/9 …``."""
        if self.problem is not None:
            return f"damaged: {self.problem}"
        if not self.job and self.running is not None:  # the lock is held, nothing staged yet
            return f"running (starting), {self.running}"
        if self.complete:
            return (f"complete: {self.partitions}/{self.partitions} partitions done "
                    f"({self.experiments}/{self.experiments} experiments; {self.written} "
                    f"written, {self.skipped} skipped)")
        done = (f"{self.partitions_done}/{self.partitions} partitions done "
                f"({self.experiments_done}/{self.experiments} experiments)")
        if self.running is not None:
            return f"running: {self.phase}; {done}"
        if self.failed is not None:
            return f"failed: {done}; in {self.phase}: {self.failed}"
        if not self.lock_visible:
            return f"incomplete: {done}; in {self.phase} (running or interrupted)"
        return f"incomplete: {done}; interrupted in {self.phase}"


def ranges_text(indices: tuple[int, ...] | list[int]) -> str:
    """``0-3, 5, 7-8`` for the indices ``0 1 2 3 5 7 8``."""
    out: list[str] = []
    ordered = sorted(set(indices))
    start = prev = None
    for i in [*ordered, None]:
        if i is not None and prev is not None and i == prev + 1:
            prev = i
            continue
        if start is not None:
            out.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = i
    return ", ".join(out)


def staging_for(path: str | os.PathLike[str]) -> Staging:
    """The :class:`Staging` of an export target, also when given its staging directory."""
    _, resolved, text = resolve_target(path)
    target = target_of_staging_dir(resolved)
    return Staging.for_target(text if target is None else target)


def job_status(path: str | os.PathLike[str]) -> JobStatus:
    """The state of the export at ``path`` (its target or its staging directory).

    A run that holds the target's lock but has not staged its job yet (it is planning, or
    starting its cluster) is ``running (starting)``.

    Raises:
        NoJobError: Neither an export nor a staged job is there, and no run holds the lock.
    """
    staging = staging_for(path)
    if staging.target_complete():
        try:
            root, m = read_export_manifest(staging.url)
        except IncompleteExportError as exc:
            return JobStatus(staging.url, True, 0, 0, 0, 0, problem=str(exc))
        try:
            get_format(m["kind"]).check_published(root, m)
            problem = None
        except (IncompleteExportError, ValueError) as exc:  # CorruptExportError, unknown kind
            problem = str(exc)
        n = int(m.get("n_partitions", 0))
        skipped = len(m.get("skipped", []))
        total = int(m.get("count", 0)) + skipped
        return JobStatus(staging.url, True, n, n, total, total, written=int(m.get("count", 0)),
                         skipped=skipped, manifest=m, problem=problem)
    job = staging.read_job()
    if job is None:
        holder = running_holder(staging)
        if holder is not None:  # a run holds the lock and has not staged its job yet
            return JobStatus(staging.url, False, 0, 0, 0, 0, running=holder)
        if staging.target_exists():
            raise NoJobError(f"{staging.url} is not a guideloom export (no export.json) and no "
                             "job is staged for it")
        raise NoJobError(f"no export and no staged job at {staging.url}")
    markers = staging.markers()
    done = sum(len(m["written"]) + len(m["skipped"]) for m in markers.values())
    age = None
    if staging.is_local and markers:
        stamps = [os.path.getmtime(p) for p in staging.marker_paths()]
        age = time.time() - max(stamps) if stamps else None
    return JobStatus(staging.url, False, len(markers), int(job["n_partitions"]), done,
                     int(job["n_records"]), job=job, staging_dir=staging.root,
                     last_partition_age_s=age, running=running_holder(staging),
                     lock_visible=staging.is_local, done_indices=tuple(sorted(markers)))
