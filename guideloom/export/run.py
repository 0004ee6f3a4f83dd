"""The one executor of export jobs: lock the target, take the plan, place the job, fan its
partitions out (:mod:`~guideloom.export.partition`), finalize and publish
(:mod:`~guideloom.export.finalize`)."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from guideloom import config
from guideloom.cluster.embedded import close_cluster
from guideloom.cluster.runtime import (
    DEFAULT_DASHBOARD,
    FORKED,
    Placement,
    fork_problem,
    placement,
    progress_bar,
    run_partitions,
    task_key,
)
from guideloom.cluster.shipping import pack, shipped_by_value
from guideloom.errors import GuideloomError, IncompleteExportError
from guideloom.export import clock as steps
from guideloom.export.finalize import (
    count_experiments,
    finalize_export,
    prefix_hashes,
    task_seconds,
)
from guideloom.export.partition import (
    PROBE_ATTEMPTS,
    forked_task,
    job_payload,
    job_readahead,
    partition_task,
    probe_schema,
    probe_task,
)
from guideloom.export.plan import (
    ExportPlan,
    JobPlan,
    data_fingerprint,
    plan_job,
    select_experiments,
)
from guideloom.export.prehash import PrefixHashes
from guideloom.export.progress import CLUSTER_START, PLAN, TASKS, RunMonitor
from guideloom.export.spec import ExportSpec, FieldSchema, Partition
from guideloom.export.staging import FAILED_KEY, PHASE_FINALIZING, Staging
from guideloom.export.target import TargetLock, check_target
from guideloom.export.update import (
    Previous,
    UpdatePlan,
    UpdateRefusedError,
    describe_plan,
    open_previous,
)
from guideloom.formats import ExportFormat, get_format, known_formats
from guideloom.formats.carry import previous_rows
from guideloom.formats.layout import read_export_manifest
from guideloom.formats.manifest_types import ExportManifest, PartitionSummary
from guideloom.read.readahead import Peeking, ReadAhead
from guideloom.read.records import reference_dtypes
from guideloom.runtime.faults import fault_point

if TYPE_CHECKING:
    from guideloom.cluster.forked import ForkedWorkers

logger = logging.getLogger(__name__)


@dataclass
class ExportResult:
    """What an export wrote.

    Attributes:
        target: Where the export was published.
        manifest: The contents of ``export.json``.
        resumed_partitions: Partitions found finished from an earlier run.
        resumed_experiments: Experiments in those partitions.
        summaries: One small summary per partition (ids written and skipped, seconds, bytes).
        update: An update's counts (``added``, ``removed``, ``changed``, ``carried``), else
            ``None``.
        up_to_date: An update found nothing to do and published nothing (``manifest`` is the
            export's as it was).
        update_plan: An update's plan: per experiment why it was read or how it was carried
            (:meth:`~guideloom.export.update.UpdatePlan.reasons`), the inputs it re-hashed.
        steps: Wall seconds of each step of the run, from the description of the job to the
            lock's release (:mod:`guideloom.export.clock`; the records and everything else,
            the fixed cost); ``export.json``'s ``steps`` has them up to its own writing.
    """

    target: str
    manifest: ExportManifest
    resumed_partitions: int = 0
    resumed_experiments: int = 0
    summaries: list[PartitionSummary] = field(default_factory=list)
    update: dict[str, int] | None = None
    up_to_date: bool = False
    update_plan: UpdatePlan | None = None
    steps: dict[str, float] = field(default_factory=dict)


def open_writer(kind: str, staging: Staging, options: Mapping[str, Any]) -> ExportFormat:
    """The registered format ``kind``, bound to the job's staging area for writing."""
    fmt = get_format(kind)
    problem = None if staging.is_local else fmt.url_problem(staging.url)
    if problem is not None and fmt.local_only:
        raise ValueError(f"{kind} exports need a local (or shared) filesystem path, not "
                         f"{staging.url}; use export_to_zarr for fsspec URLs")
    if problem is not None:  # a format that writes some URLs, not this one
        raise ValueError(f"{kind} outputs are {problem}, not {staging.url}")
    return fmt(staging, options)


TASK_STAGE = "export-part"  # <= 15 characters: the dashboard's progress panel shows it whole
PROBE_STAGE = "probe-schema"
JOB_TOKEN_CHARS = 8  # characters of the job identity in task keys


def run_export(
    spec: ExportSpec,
    *,
    client: Any = None,
    show_progress: bool = False,
    dashboard_address: str | None = DEFAULT_DASHBOARD,
    quiet: bool = False,
    verbose: bool = False,
    resume_hint: str = "rerun the same export call",
    batch_options: Mapping[str, Any] | None = None,
    report: str | os.PathLike[str] | None = None,
    resolve_s: float = 0.0,
) -> ExportResult:
    """Run an export job end to end; see :func:`guideloom.export_to_numpy` for the contract.

    ``resume_hint`` is stored with the staged job for ``guideloom status`` to show;
    ``batch_options`` go to the batch-system cluster of ``client="slurm:N"`` / ``"pbs:N"``;
    ``report`` is an HTML file written after the run (see :mod:`guideloom.export.report`);
    ``resolve_s``: the seconds the caller spent describing the job (the first step of
    :attr:`ExportResult.steps`).
    """
    started = time.time()
    monitor = RunMonitor(spec.view.name, str(spec.target), spec.output, 0,
                         show_progress=show_progress, started=started)
    monitor.clock.add(steps.RESOLVE, resolve_s)
    monitor.phase(PLAN, at=started)
    try:
        result = _run_monitored(spec, monitor, client, show_progress, dashboard_address,
                                quiet, verbose, resume_hint, batch_options, started)
        monitor.clock.lap(steps.PUBLISH)  # the lock released
        result.steps = monitor.clock.rounded()
        return result
    except KeyboardInterrupt:
        monitor.finish("interrupted", "Ctrl-C")
        raise
    except BaseException as exc:
        monitor.finish("failed", f"{type(exc).__name__}: {exc}")
        raise
    finally:
        if report is not None:
            from guideloom.export.report import write_report

            write_report(report, monitor.state)
            if not quiet:
                logger.info("guideloom: run report written to %s", report)


def _run_monitored(spec: ExportSpec, monitor: RunMonitor, client: Any, show_progress: bool,
                   dashboard_address: str | None, quiet: bool, verbose: bool, resume_hint: str,
                   batch_options: Mapping[str, Any] | None, started: float) -> ExportResult:
    staging = Staging.for_target(spec.target)
    with TargetLock(staging):  # one run per target; checked again inside the lock
        fault_point("target-locked")  # (status: "running (starting)" until the job is staged)
        recovered = staging.recover()
        if recovered and not quiet:
            logger.info("guideloom: %s", recovered)
        previous = open_previous(spec) if spec.update and not spec.overwrite else None
        if previous is not None:  # the generation this update starts from
            spec = spec.replaced(previous=previous.ref)
        finished = published_by_interrupted_run(spec, staging) if recovered else None
        if finished is not None:
            if not quiet:
                logger.info("guideloom: %s is complete: an interrupted run of this job had "
                            "written everything, and its publish is now done", staging.url)
            monitor.finish("published")
            return finished
        check_target(staging, spec.data_dir, spec.overwrite or previous is not None)
        monitor.clock.lap(steps.LOCK)
        return _run_locked(spec, staging, client, monitor, dashboard_address, quiet,
                           verbose, resume_hint, batch_options, started, previous)


def published_by_interrupted_run(spec: ExportSpec, staging: Staging) -> ExportResult | None:
    """The export at the target, when it is this very job's (same identity: same view, ids,
    transforms, options and data) and :meth:`Staging.recover` just finished its publish; else
    ``None`` (then the target is treated like any existing export)."""
    try:
        _, manifest = read_export_manifest(staging.url)
    except (FileNotFoundError, IncompleteExportError):
        return None
    selection = select_experiments(spec)
    size = manifest.get("partition_size")
    if not isinstance(size, int):
        return None
    if manifest.get("identity") != spec.identity(selection.ids, size,
                                                 data_fingerprint(spec, selection)):
        return None
    experiments = int(manifest["count"]) + len(manifest.get("skipped", []))
    return ExportResult(staging.url, manifest,
                        resumed_partitions=int(manifest.get("n_partitions", 0)),
                        resumed_experiments=experiments)


def updatable_kinds() -> str:
    """The output kinds an update can write, as text (``"a, b and c"``)."""
    kinds = [cls.kind for cls in known_formats() if cls.updatable]
    if len(kinds) < 2:
        return kinds[0] if kinds else "no"
    return f"{', '.join(kinds[:-1])} and {kinds[-1]}"


def _run_locked(spec: ExportSpec, staging: Staging, client: Any, monitor: RunMonitor,
                dashboard_address: str | None, quiet: bool, verbose: bool, resume_hint: str,
                batch_options: Mapping[str, Any] | None, started: float,
                previous: Previous | None = None) -> ExportResult:
    writer = open_writer(spec.output, staging, spec.options)
    if spec.update and not writer.updatable:
        raise UpdateRefusedError(f"{spec.output} exports cannot be updated yet; export again "
                                 f"with overwrite=True (update works for {updatable_kinds()} "
                                 "exports)")
    job = plan_job(spec, staging, writer, previous, monitor.clock)
    update = job.update
    if update is not None and previous is not None:
        if not quiet:
            logger.info("guideloom: %s", describe_plan(update, previous))
        monitor.update_counts(update.counts())
        if update.up_to_date:
            monitor.finish("published")
            return ExportResult(previous.ref.root, previous.manifest, update=update.counts(),
                                up_to_date=True, update_plan=update)
    # the one placement decision of the job; what it prints is what runs
    with placement(client, estimate_s=job.estimate_s, n_tasks=job.n_tasks,
                   dashboard_address=dashboard_address, quiet=quiet, verbose=verbose,
                   batch_options=batch_options, forkable=job.forkable,
                   finishing=job.finishing is not None) as where:
        if where.cluster_start_s is not None:  # its own phase, within the plan phase
            now = time.time()
            monitor.phase(CLUSTER_START, at=now - where.cluster_start_s)
            monitor.phase(PLAN, at=now)
        monitor.attach(where.client)
        monitor.placement({**where.to_json(), "estimate_s": round(job.estimate_s, 4)})
        try:
            result = _run_placed(job, staging, writer, where, monitor, started, resume_hint,
                                 quiet)
        except KeyboardInterrupt:
            monitor.finish("interrupted", "Ctrl-C")  # while the scheduler still hears it
            if where.mode == "local-cluster":
                close_cluster(fast=True)  # Ctrl-C: the workers stop now, not after their tasks
            raise
        except BaseException as exc:
            monitor.finish("failed", f"{type(exc).__name__}: {exc}")
            raise
        monitor.finish("published")
        return result


def _run_placed(job_plan: JobPlan, staging: Staging, writer: ExportFormat, where: Placement,
                monitor: RunMonitor, started: float, resume_hint: str,
                quiet: bool = False) -> ExportResult:
    dask = where.client
    spec, previous, estimate = job_plan.spec, job_plan.previous, job_plan.estimate_s
    plan = job_plan.export_plan()
    clock = monitor.clock
    clock.lap(steps.PLAN)
    job = {
        "identity": plan.identity,
        "view": spec.view.name,
        "output": spec.output,
        "n_records": len(plan.selection.locations),
        "n_partitions": len(plan.partitions),
        "partition_size": plan.partition_size,
        "resume": resume_hint,
    }
    if plan.update is not None:
        job["update"] = {**plan.update.counts(),
                         "previous": spec.previous.export_id if spec.previous else None}
    staged_job = staging.read_job()
    resumed = staging.start(job)
    if resumed and (staged_job or {}).get(FAILED_KEY):
        staging.update_job(**{FAILED_KEY: None})  # this run may end otherwise
    if staging.discarded and not quiet:
        logger.info("guideloom: discarded the staged partitions of an earlier run at %s: "
                    "they belong to another job (%s)", staging.url,
                    discard_reason(spec, plan, staged_job))
    finalizing = (staging.read_job() or {}).get("phase") == PHASE_FINALIZING
    done = staging.markers() if resumed else {}
    todo = [p for p in plan.partitions if p.index not in done]
    clock.lap(steps.STAGING)
    hashes = None
    try:
        with contextlib.ExitStack() as children:
            forked = None
            if where.mode == FORKED and todo and not finalizing:
                # first: before the job starts any thread here (zarr's I/O threads when it
                # allocates, the decode pool, the prefix hashes); the schema follows them
                forked, where = _fork_workers(spec, staging, writer, todo, where)
                if forked is not None:
                    children.enter_context(forked)
            shipped = (None if dask is None or finalizing
                       else _ship(spec, writer, dask, plan.identity[:JOB_TOKEN_CHARS]))
            reference = reference_dtypes(spec.view, plan.selection.locations,
                                         plan.selection.rows)
            # in-process: remote records stream in from here on (the probe takes the first)
            ahead = (job_readahead(spec, todo, reference) if dask is None and not finalizing
                     else None)
            if ahead is not None:
                children.callback(ahead.close)
            schema = (previous_schema(writer, previous) if previous is not None
                      else _schema(spec, staging, writer, plan, dask, shipped, estimate,
                                   reference, ahead))
            clock.lap(steps.PLAN)
            # rows moved on already are never re-made
            reused = False
            if writer.needs_schema and schema is not None and not finalizing:
                n_rows = len(plan.selection.locations)
                reused = (previous is not None and plan.update is not None
                          and plan.update.appends_to(int(previous.manifest["count"]))
                          and writer.reuse_rows(previous_rows(previous.ref.root,
                                                              previous.ref.export_id),
                                                n_rows, schema))
                if not reused:
                    writer.allocate(n_rows, schema, plan.partition_size)
                fault_point("allocated")
            n = len(plan.selection.locations)
            kept = len(plan.partitions) - len(todo)
            monitor.phase(TASKS, total=n, tasks=len(todo),
                          detail=f"{_tasks_text(len(todo))} to run"
                                 + (f", {kept} kept from an earlier run" if kept else "")
                                 + ("" if plan.update is None
                                    else f"; update: {plan.update.text()}"))
            monitor.totals(n, count_experiments(done.values()))
            hashes = (None if finalizing or reused  # (reused: finalize rewrites the header)
                      else prefix_hashes(writer, schema, staging, dask, done.values()))
            staging.sync_job()  # (if the schema did not) before a partition can be marked
            clock.lap(steps.STAGING)
            t0 = time.time()
            fresh = _execute(spec, writer, schema, todo, dask, shipped, plan, monitor,
                             reference, ahead, hashes, forked, where.slots)
        compute_seconds = time.time() - t0
        clock.lap(steps.SCHEDULE)  # the tasks' wall time: their own time is the records'
        clock.split(steps.SCHEDULE, steps.RECORDS, steps.task_span_s(fresh))
        fault_point("partitions-done")
        summaries = sorted([*done.values(), *fresh], key=lambda s: s["index"])
        placed = {**where.to_json(), "estimate_s": round(estimate, 4)}
        manifest = finalize_export(spec, staging, writer, plan, schema, summaries, placed,
                                   monitor, timings={"compute_s": compute_seconds,
                                                     **task_seconds(summaries)},
                                   started=started, hashes=hashes, previous=previous)
    except Exception as exc:  # the job failed (not Ctrl-C, not a kill): status says so
        record_failure(staging, exc)
        raise
    finally:
        if hashes is not None:
            hashes.close()
    return ExportResult(staging.url, manifest, resumed_partitions=len(done),
                        resumed_experiments=count_experiments(done.values()), summaries=summaries,
                        update=None if plan.update is None else plan.update.counts(),
                        update_plan=plan.update)


def record_failure(staging: Staging, exc: BaseException) -> None:
    """Store in the staged job that its run failed, and with what (``guideloom status`` says
    "failed", not "interrupted"); a failure to store it never hides ``exc``."""
    try:
        if staging.read_job() is not None:
            error = " ".join(f"{type(exc).__name__}: {exc}".split())
            staging.update_job(**{FAILED_KEY: {"error": error,
                                               "at": time.strftime("%Y-%m-%dT%H:%M:%S")}})
    except (OSError, ValueError) as problem:
        logger.debug("guideloom: could not record the failure in the staged job: %s", problem)


def discard_reason(spec: ExportSpec, plan: ExportPlan, previous: Mapping[str, Any] | None
                   ) -> str:
    """Why a staged job is not this one: ``partitioning changed: 4 → 8 partitions`` when only
    the partitioning differs (the user passed another ``partition_size``), else that its
    inputs, code or options changed; or that the transforms read what no digest vouches for
    (:attr:`~guideloom.export.spec.ExportSpec.unprovable`)."""
    if spec.unprovable:
        return (f"{spec.unprovable[0]}: rows of another run may differ, so a rerun starts "
                "over; pass code_version= to let it resume")
    size = (previous or {}).get("partition_size")
    if (isinstance(size, int) and size != plan.partition_size and previous is not None
            and previous.get("identity") == spec.identity(plan.selection.ids, size,
                                                          plan.data)):
        before = previous.get("n_partitions")
        return (f"partitioning changed: {before} → {len(plan.partitions)} partitions "
                f"(partition_size {size} → {plan.partition_size})")
    return "its inputs, code or options changed"


def _fork_workers(spec: ExportSpec, staging: Staging, writer: ExportFormat,
                  todo: Sequence[Partition], where: Placement
                  ) -> tuple[ForkedWorkers | None, Placement]:
    """Fork the job's worker processes (see :mod:`guideloom.cluster.forked`) as the placement
    decided; they get the schema and reference dtypes (``(schema, reference)``) once the
    driver has them.

    Nothing of the job runs a thread before this point; should another thread have started
    since the decision (the user's own), the partitions run here and the placement says so.
    """
    from guideloom.cluster.forked import ForkedWorkers

    problem = fork_problem()
    if problem is not None:
        logger.info("guideloom: running in-process: not forked after all: %s", problem)
        return None, Placement(None, "in-process", 1, f"not forked: {problem}")
    n = min(where.workers, len(todo))
    task = functools.partial(forked_task, n, (spec, writer))

    def summary_of(part: Partition) -> PartitionSummary:
        summary = staging.marker(part.index)
        if summary is None:
            raise GuideloomError(f"forked export worker finished partition {part.index} "
                                 "without its marker")
        return summary

    workers = ForkedWorkers(n, task, todo, summary_of, describe=_describe_partition)
    return workers, dataclasses.replace(where, workers=n)


def _describe_partition(part: Partition) -> str:
    ids = [loc.sim_id for loc in part.locations]
    return (f"partition {part.index} (experiments {ids[0]}..{ids[-1]})" if ids
            else f"partition {part.index}")


def _tasks_text(n: int) -> str:
    return f"{n} task{'s' * (n != 1)}"


SHIPPED_STAGE = "export-job"  # the task group of a large job's payload (one task)
INLINE_JOB_BYTES = 256 * 1024  # a job up to this size travels inside each task


def _ship(spec: ExportSpec, writer: ExportFormat, dask: Any, token: str) -> Any:
    """The job (spec and writer) as cloudpickle bytes, for the tasks to unpack.

    A job of up to :data:`INLINE_JOB_BYTES` (a seed workflow's is about 10 kB) is the bytes
    themselves, an argument of every task: the tasks then have no dependency, so the
    scheduler spreads them over the idle workers at once instead of queueing them where the
    payload is, and a worker that dies takes nothing with it. A larger job (a transform that
    holds big arrays) is sent once, as the argument of a task keyed ``("export-job", view,
    job)`` (not scattered data, which showed as an unexplained ``bytes`` group), so the
    scheduler holds it: when the worker that has the result dies, the scheduler computes it
    again elsewhere and the partition tasks are retried, instead of failing with lost
    dependencies. User code from ``__main__`` and local modules travels by value (see
    :mod:`guideloom.cluster.shipping`), so workers need only ``guideloom`` installed.
    """
    with shipped_by_value([*spec.transforms.values(), spec.record_transform, spec.where,
                           *writer.user_objects()]):
        payload = pack((spec, writer))
    if len(payload) <= INLINE_JOB_BYTES:
        return payload
    shipped = dask.submit(job_payload, payload, pure=False,
                          key=task_key(SHIPPED_STAGE, spec.view.name, token))
    # in memory before the partitions are submitted: they are then scheduled in their order
    # as for any data at hand (released all at once by a finishing task, they would not be)
    shipped.result()
    return shipped


def _schema(spec: ExportSpec, staging: Staging, writer: ExportFormat, plan: ExportPlan,
            dask: Any, shipped: Any, estimate: float,
            reference: Mapping[str, str] | None = None,
            ahead: ReadAhead | None = None) -> dict[str, FieldSchema] | None:
    if not writer.needs_schema and not writer.fixed_keys:
        return None
    stored = (staging.read_job() or {}).get("schema")
    if stored is not None:
        return {a: FieldSchema(tuple(s["shape"]), s["dtype"]) for a, s in stored.items()}
    probe_locs = plan.selection.locations[:PROBE_ATTEMPTS]
    probe_rows = plan.selection.rows[:PROBE_ATTEMPTS]
    per_record_s = estimate / max(1, len(plan.selection.locations))
    cheap = per_record_s < config.get("driver_probe_max_s")
    if dask is None or cheap:  # cheap: no round trip to a worker
        schema = probe_schema(spec, probe_locs, probe_rows, writer.allow_text, reference,
                              None if ahead is None else Peeking(ahead))
    else:
        key = task_key(PROBE_STAGE, spec.view.name, plan.identity[:JOB_TOKEN_CHARS])
        future = dask.submit(probe_task, shipped, reference, probe_locs, probe_rows, key=key,
                             pure=False)
        schema = future.result()
    staging.update_job(schema={a: s.to_json() for a, s in schema.items()})
    return schema


def previous_schema(writer: ExportFormat, previous: Previous
                    ) -> dict[str, FieldSchema] | None:
    """An update's schema: the previous generation's (its rows are carried as they are, and a
    new row must match them as in a full export); ``None`` for formats without one."""
    if not writer.needs_schema and not writer.fixed_keys:
        return None
    return {alias: FieldSchema(tuple(entry.get("shape") or ()), str(entry.get("dtype")))
            for alias, entry in previous.manifest["fields"].items()}


def _execute(spec: ExportSpec, writer: ExportFormat,
             schema: Mapping[str, FieldSchema] | None, todo: Sequence[Partition], dask: Any,
             shipped: Any, plan: ExportPlan, monitor: RunMonitor,
             reference: Mapping[str, str] | None = None,
             ahead: ReadAhead | None = None,
             hashes: PrefixHashes | None = None,
             forked: ForkedWorkers | None = None,
             slots: Mapping[str, int] | None = None) -> list[PartitionSummary]:
    """Run the partitions ``todo``; ``ahead`` (:func:`job_readahead`, in-process only) reads
    their records; ``hashes`` (:func:`prefix_hashes`) hashes each finished partition's rows;
    ``forked`` runs them in processes forked from this one; ``slots``: the placement's
    answer of the scheduler (see :func:`~guideloom.cluster.runtime.run_partitions`)."""
    job = (spec, writer) if dask is None else shipped
    token = plan.identity[:JOB_TOKEN_CHARS]
    task = partition_task if ahead is None else functools.partial(partition_task, ahead=ahead)

    def on_result(summary: PartitionSummary) -> None:
        monitor.task_done(summary)
        if hashes is not None:  # its rows are final: hashed while the next partitions run
            hashes.rows_final(summary["start"], count_experiments([summary]))

    if forked is not None:
        return forked.run(on_result, context=(schema, reference))
    return run_partitions(
        dask, task, todo, args=(job, schema, reference),
        key=lambda part: task_key(TASK_STAGE, spec.view.name, token, part.index),
        done=lambda s: len(s["written"]) + len(s["skipped"]),
        progress=progress_bar(False, 0, unit="exp", desc=""),  # the monitor draws the bar
        on_result=on_result,
        slots=slots,
    )
