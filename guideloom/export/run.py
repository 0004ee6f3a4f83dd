"""The one executor of export jobs: plan, fan out over Dask, finalize, publish."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import logging
import math
import os
import platform
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from guideloom import __version__, config, fastread
from guideloom.cluster.embedded import close_cluster
from guideloom.cluster.runtime import (
    DEFAULT_DASHBOARD,
    FORKED,
    Placement,
    fork_problem,
    job_partition_size,
    placement,
    progress_bar,
    run_partitions,
    task_key,
)
from guideloom.cluster.shipping import pack, shipped_by_value, unpack
from guideloom.errors import (
    ExperimentReadError,
    GuideloomError,
    IncompleteExportError,
    NothingToExportError,
    SkippedDataWarning,
    summarize_ids,
    warn,
)
from guideloom.export import clock as steps
from guideloom.export.clock import StepClock
from guideloom.export.overlap import OverlappedWrites
from guideloom.export.pipeline import (
    NUMERIC_KINDS,
    RecordSource,
    check_keys,
    check_schema,
    produce,
    reuse_buffers,
    schema_of,
)
from guideloom.export.prehash import PrefixHashes
from guideloom.export.progress import (
    CHECKSUMS,
    CLUSTER_START,
    FINALIZE,
    PLAN,
    PUBLISH,
    TASKS,
    RunMonitor,
)
from guideloom.export.provenance import document as provenance_document
from guideloom.export.provenance import manifest_entry as provenance_entry
from guideloom.export.provenance import row_digests
from guideloom.export.publish import CROISSANT_NAME, describe_export, origin_of
from guideloom.export.spec import ExportSpec, FieldSchema, Partition
from guideloom.export.staging import FAILED_KEY, PHASE_FINALIZING, Staging
from guideloom.export.target import TargetLock, check_target
from guideloom.export.update import (
    Previous,
    UpdatePlan,
    UpdateRefusedError,
    describe_plan,
    history_entry,
    open_previous,
    plan_update,
)
from guideloom.formats import ExportFormat, get_format, known_formats
from guideloom.formats.carry import PreviousRows, previous_rows
from guideloom.formats.checksums import (
    CHECKSUMS_FILE,
    DESCRIPTION_KEY,
    combine,
    description_entry,
    file_digest,
    manifest_entry,
)
from guideloom.formats.durable import fsync_tree
from guideloom.formats.layout import (
    EXPORT_MANIFEST,
    FORMAT_VERSION,
    MANIFEST_FORMAT,
    PROVENANCE_FILE,
    read_export_manifest,
)
from guideloom.formats.manifest_types import (
    ChecksumsEntry,
    ExportManifest,
    ManifestExtra,
    ManifestHead,
    ManifestTail,
    PartitionSummary,
    ProvenanceEntry,
    SkippedRecord,
    SummaryExtra,
)
from guideloom.read.content import Hasher, ReadCheck, content_digest
from guideloom.read.fingerprint import input_evidence, racy_margin_ns
from guideloom.read.readahead import Peeking, ReadAhead
from guideloom.read.records import (
    REFERENCE_RECORDS,
    RecordReader,
    described_first,
    reference_dtypes,
)
from guideloom.read.roots import as_root
from guideloom.runtime import fallbacks
from guideloom.runtime.faults import fault_point
from guideloom.select.manifest import Dataset
from guideloom.select.selection import Selection, check_storable_ids, select

if TYPE_CHECKING:
    from guideloom.cluster.forked import ForkedWorkers

logger = logging.getLogger(__name__)

CARRY_COST = 0.05  # an experiment carried by an update, in decoded experiments' time (a guess
# on the safe side: npy rows copied in the kernel at disk speed, npz files linked)
PROBE_ATTEMPTS = 20
DRIVER_PROBE_MAX_S = 0.05  # a first record estimated cheaper than this is probed in the driver
CROISSANT_HASH_LIMIT = 64 << 20  # bytes: larger files are described without a sha256
# In-process cost model for choosing where a job runs (benchmarks/export.py measures both, on a
# shared 2-core machine): pointcloud-op10 exports at 400 MB/s of decoded HDF5 data (read, decode
# with the fast chunk path, write) on a quiet machine and 83-220 MB/s on a loaded one; each
# experiment costs 0.6-0.75 ms beyond its bytes (open, index, the seed's transform, write) when
# quiet, up to 1.7 ms loaded. The quiet figures:
DECODE_BYTES_PER_S = 400e6
PER_RECORD_S = 0.7e-3


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


@dataclass(frozen=True)
class ExportPlan:
    """The experiments, partitions and output layout of a job (what ``--dry-run`` prints).

    ``inputs`` and ``index_rows`` are each experiment's input evidence and index-row digest
    (:mod:`guideloom.export.provenance`), ``started_ns`` when they were taken; ``update`` the
    plan of an update.
    """

    selection: Selection
    partitions: tuple[Partition, ...]
    partition_size: int
    identity: str
    data: str = ""  # the input's fingerprint, part of the identity
    inputs: tuple[Mapping[str, Any], ...] = ()
    index_rows: tuple[str, ...] = ()
    update: UpdatePlan | None = None
    started_ns: int = 0

    def __repr__(self) -> str:
        return (f"ExportPlan({len(self.selection.locations)} experiments, "
                f"{len(self.partitions)} partitions of up to {self.partition_size})")


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


def select_experiments(spec: ExportSpec) -> Selection:
    """The experiments of a job, in output order (raises if there are none)."""
    selection = select(spec.dataset, spec.data_dir, sim_ids=spec.sim_ids, where=spec.where)
    if not selection.locations:
        raise NothingToExportError(
            f"nothing to export from view {spec.view.name!r}: the filters left no experiment "
            f"with local data under {spec.data_dir}"
        )
    return selection


def partition_size_for(spec: ExportSpec, n: int, workers: int = 1,
                       estimate_s: float | None = None, forked: bool = False) -> int:
    """The job's partition size: the user's, else one from the data alone
    (:func:`~guideloom.cluster.runtime.job_partition_size` of the ``n`` records and their
    estimated in-process seconds ``estimate_s``), the same wherever the job runs, so an
    interrupted export resumes on any placement. ``workers`` and ``forked`` (where it runs)
    change nothing; they stay for older callers."""
    del workers, forked
    per_item = estimate_s / n if estimate_s is not None and n else None
    return spec.partition_size or job_partition_size(n, per_item)


def plan_export(spec: ExportSpec, workers: int = 1, selection: Selection | None = None,
                estimate_s: float | None = None, forked: bool = False,
                previous: Previous | None = None, digests: InputFacts | None = None,
                update: UpdatePlan | None = None) -> ExportPlan:
    """Select the experiments (unless given) and split them into partitions.

    The partitions depend on the data only (see :func:`partition_size_for`; ``workers`` and
    ``forked`` change nothing): without a ``partition_size`` of the user's, on the estimate
    ``estimate_s`` of :func:`estimate_seconds`, computed here when not given (it reads the
    first experiment's HDF5 metadata, no data), so a plan made here is the job's own. With
    ``previous`` (an update, :func:`~guideloom.export.update.open_previous`) the plan says
    which experiments are carried from it (:attr:`Partition.carried`). ``digests``: the
    selection's input evidence and index-row digests (:func:`selection_digests`), and
    ``update`` its update plan, when the caller has them already.
    """
    if selection is None:
        selection = select_experiments(spec)
    check_storable_ids(selection.ids, spec.dataset.index_file)
    if estimate_s is None and spec.partition_size is None:
        estimate_s = estimate_seconds(spec, selection)
    size = partition_size_for(spec, len(selection.locations), workers, estimate_s, forked)
    facts = digests or selection_digests(selection)
    if update is None and previous is not None:
        update = plan_update(previous, selection.ids, facts.inputs, facts.index_rows,
                             selection.locations, spec.verify_inputs)
    parts = []
    for index, start in enumerate(range(0, len(selection.locations), size)):
        stop = start + size
        carried = () if update is None else update.carried_from[start:stop]
        parts.append(Partition(index, start, selection.locations[start:stop],
                               selection.rows[start:stop],
                               carried if any(j >= 0 for j in carried) else ()))
    data = _data_fingerprint(spec, selection)
    return ExportPlan(selection, tuple(parts), size, spec.identity(selection.ids, size, data),
                      data, facts.inputs, facts.index_rows, update, facts.started_ns)


@dataclass(frozen=True)
class InputFacts:
    """What a job records of its selection's inputs before reading any: each experiment's
    input evidence (:func:`~guideloom.read.fingerprint.input_evidence`), its index-row digest,
    and ``started_ns``, the wall-clock time just before the evidence was taken."""

    inputs: tuple[Mapping[str, Any], ...]
    index_rows: tuple[str, ...]
    started_ns: int


def selection_digests(selection: Selection) -> InputFacts:
    """Each selected experiment's input evidence and index-row digest
    (:mod:`guideloom.export.provenance`; a local file costs one ``stat``)."""
    started = time.time_ns()
    return InputFacts(tuple(input_evidence(selection.locations)),
                      tuple(row_digests(selection.rows)), started)


def _data_fingerprint(spec: ExportSpec, selection: Selection) -> str:
    """The fingerprint of the index table and the selected files, for the job identity."""
    return as_root(spec.data_dir).fingerprint(_index_bytes(spec.dataset), selection.locations)


def _index_bytes(ds: Dataset) -> bytes:
    """The bytes of the index table, read by URL or from the dataset's folder."""
    return ds.root.index_bytes(ds)


TASK_STAGE = "export-part"  # <= 15 characters: the dashboard's progress panel shows it whole
PROBE_STAGE = "probe-schema"
JOB_TOKEN_CHARS = 8  # characters of the job identity in task keys


def estimate_seconds(spec: ExportSpec, selection: Selection) -> float:
    """Estimated in-process seconds of a job: records x (bytes to decode / rate + overhead).

    The bytes come from the HDF5 metadata of the first experiment (no data is read).
    """
    reader = RecordReader(spec.view)
    if not selection.locations[0].is_local:
        # the experiments reference_dtypes describes next, at once: one round trip, not two
        described = described_first(reader, selection.locations, selection.rows,
                                    REFERENCE_RECORDS)[0] or {}
    else:
        try:
            described = reader.shapes(selection.locations[0], selection.rows[0])
        except (ExperimentReadError, OSError):
            described = {}
    h5_aliases = {f.alias for f in spec.view.fields if f.is_h5}
    nbytes = sum(int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
                 for alias, (shape, dtype) in described.items() if alias in h5_aliases)
    rate, per_record = float(config.get("decode_bytes_per_s")), float(config.get("per_record_s"))
    return len(selection.locations) * (nbytes / rate + per_record)


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
                                                 _data_fingerprint(spec, selection)):
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


def kept_partition_size(spec: ExportSpec, writer: ExportFormat | type[ExportFormat],
                        previous: Previous) -> ExportSpec:
    """An update of a format whose partitions are units of its layout
    (:attr:`~guideloom.formats.base.ExportFormat.keeps_partitions`) keeps the previous
    generation's partition size unless the user gave one: where rows were only appended its
    units stay whole (a storage links them) and new ones follow."""
    size = previous.manifest.get("partition_size")
    if (spec.partition_size is not None or not writer.keeps_partitions
            or not isinstance(size, int) or size < 1):
        return spec
    return spec.replaced(partition_size=size)


@dataclass(frozen=True)
class JobPlan:
    """What a job decides before it is placed, in one place: ``guideloom run`` and its
    ``--dry-run`` both take it from :func:`plan_job`, so a dry run shows the plan the run
    follows.

    Attributes:
        spec: The job, with the partition size an update keeps or an interrupted run had.
        selection: The experiments, in output order.
        estimate_s: The estimated in-process seconds (an update's scaled to what it reads).
        n_tasks: The partitions the job splits into.
        forkable: Whether its partitions may run in processes forked from the driver.
        finishing: The partition size of this very job when only its finalize is left.
        previous: The export an update starts from.
        digests: The selection's input evidence (an update's, taken once).
        update: An update's plan.
    """

    spec: ExportSpec
    selection: Selection
    estimate_s: float
    n_tasks: int
    forkable: bool
    finishing: int | None = None
    previous: Previous | None = None
    digests: InputFacts | None = None
    update: UpdatePlan | None = None

    def export_plan(self) -> ExportPlan:
        """The partitions and identity of the job (:func:`plan_export` on this plan)."""
        return plan_export(self.spec, selection=self.selection, estimate_s=self.estimate_s,
                           previous=self.previous, digests=self.digests, update=self.update)


def plan_job(spec: ExportSpec, staging: Staging, writer: ExportFormat | type[ExportFormat],
             previous: Previous | None = None, clock: StepClock | None = None) -> JobPlan:
    """The job's plan: its selection, estimate (an update's scaled to the experiments it
    reads), partition count, finishing state and whether it may fork; starts nothing.
    ``clock`` (a run's) times the selection as its own step."""
    if previous is not None:  # an update of this very generation, partitioned as it was
        spec = kept_partition_size(spec.replaced(previous=previous.ref), writer, previous)
    selection = select_experiments(spec)
    if clock is not None:
        clock.lap(steps.SELECT)
    estimate = estimate_seconds(spec, selection)
    n = len(selection.locations)
    update = digests = None
    if previous is not None:
        digests = selection_digests(selection)  # once: the partitions' plan takes them too
        update = plan_update(previous, selection.ids, digests.inputs, digests.index_rows,
                             selection.locations, spec.verify_inputs)
        estimate *= (update.read + CARRY_COST * update.carried) / max(1, n)
    finishing = only_finalize_left(spec, staging, selection)
    if finishing is not None:  # this very job's partitions (its identity says so)
        spec = spec.replaced(partition_size=finishing)
    n_tasks = math.ceil(n / partition_size_for(spec, n, estimate_s=estimate))  # on any placement
    return JobPlan(spec, selection, estimate, n_tasks, forkable_job(spec, staging), finishing,
                   previous, digests, update)


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


def forkable_job(spec: ExportSpec, staging: Staging | None = None) -> bool:
    """Whether the job's partitions may run in processes forked from the driver: local data
    to a local target (see :mod:`guideloom.cluster.forked`)."""
    staging = staging or Staging.for_target(spec.target)
    return staging.is_local and as_root(spec.data_dir).is_local


def only_finalize_left(spec: ExportSpec, staging: Staging, selection: Selection) -> int | None:
    """The partition size of this very job when an interrupted run of it had written every
    partition and was finalizing (the rerun only finishes the driver's steps); else ``None``."""
    job = staging.read_job() or {}
    size = job.get("partition_size")
    if job.get("phase") != PHASE_FINALIZING or not isinstance(size, int):
        return None
    if job.get("identity") != spec.identity(selection.ids, size,
                                            _data_fingerprint(spec, selection)):
        return None
    return size


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
            monitor.totals(n, _experiments(done.values()))
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
        manifest = _finalize(spec, staging, writer, plan, schema, summaries, placed, monitor,
                             timings={"compute_s": compute_seconds, **task_seconds(summaries)},
                             started=started, hashes=hashes, previous=previous)
    except Exception as exc:  # the job failed (not Ctrl-C, not a kill): status says so
        record_failure(staging, exc)
        raise
    finally:
        if hashes is not None:
            hashes.close()
    return ExportResult(staging.url, manifest, resumed_partitions=len(done),
                        resumed_experiments=_experiments(done.values()), summaries=summaries,
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
    task = functools.partial(_forked_task, n, (spec, writer))

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


def _forked_task(n: int, job: Any,
                 context: tuple[Mapping[str, FieldSchema] | None, Mapping[str, str] | None],
                 part: Partition) -> PartitionSummary:
    """One partition in a forked worker, its decode threads sized to its share of the CPUs;
    ``context`` is ``(schema, reference)``, sent by the driver after the fork."""
    fastread.share_cores(n)
    schema, reference = context
    return _partition_task(job, schema, reference, part)


def prefix_hashes(writer: ExportFormat, schema: Mapping[str, FieldSchema] | None,
                  staging: Staging, dask: Any, done: Iterable[PartitionSummary]
                  ) -> PrefixHashes | None:
    """The row files ``croissant.json`` will hash, hashed as their partitions finish; only
    when the tasks run in this process (each partition's rows are then written and fsynced
    when its task returns here), else ``None``."""
    if dask is not None or not staging.is_local or schema is None:
        return None
    try:
        files = {name: f for name, f in writer.row_files(schema).items()
                 if os.path.getsize(f[0]) <= CROISSANT_HASH_LIMIT}
    except OSError:
        return None  # finalize hashes the files as ever
    if not files:
        return None
    hashes = PrefixHashes(files)
    for summary in done:  # resumed: partitions an earlier run finished
        hashes.rows_final(summary["start"], _experiments([summary]))
    return hashes


def task_seconds(summaries: Sequence[PartitionSummary]) -> dict[str, float]:
    """Seconds the tasks spent reading and transforming, and writing (the sink's ``write`` and
    ``close``), summed over partitions (task time, not wall time)."""
    return {"read_transform_s": round(sum(float(s.get("read_transform_s", 0.0))
                                          for s in summaries), 4),
            "write_s": round(sum(float(s.get("write_s", 0.0)) for s in summaries), 4)}


def _tasks_text(n: int) -> str:
    return f"{n} task{'s' * (n != 1)}"


def _experiments(summaries: Iterable[PartitionSummary]) -> int:
    return sum(len(s["written"]) + len(s["skipped"]) for s in summaries)


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
    shipped = dask.submit(_payload, payload, pure=False,
                          key=task_key(SHIPPED_STAGE, spec.view.name, token))
    # in memory before the partitions are submitted: they are then scheduled in their order
    # as for any data at hand (released all at once by a finishing task, they would not be)
    shipped.result()
    return shipped


def _payload(blob: bytes) -> bytes:
    """The job's bytes, as the result of a task that can be recomputed."""
    return blob


def _job(job: Any) -> tuple[ExportSpec, ExportFormat]:
    pair: tuple[ExportSpec, ExportFormat] = unpack(job) if isinstance(job, bytes) else job
    return pair


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
        future = dask.submit(_probe_task, shipped, reference, probe_locs, probe_rows, key=key,
                             pure=False)
        schema = future.result()
    staging.update_job(schema={a: s.to_json() for a, s in schema.items()})
    return schema


def probe_schema(
    spec: ExportSpec, locations: Sequence[Any], rows: Sequence[Mapping[str, Any]],
    allow_text: bool = False, reference: Mapping[str, str] | None = None,
    records: RecordSource | None = None,
) -> dict[str, FieldSchema]:
    """Shapes and dtypes from the first record that reads (runs on a worker).

    Without transforms the shapes are the HDF5 datasets' own, read from metadata only;
    otherwise the first record is read and transformed (``allow_text``: as the format takes
    it, for formats that fix only the keys). ``reference``: see :func:`reference_dtypes`.
    ``records`` reads the records instead of a reader of this call's own (the job's
    read-ahead, :class:`~guideloom.read.readahead.Peeking`).
    """
    reader = RecordReader(spec.view, verify_crc=spec.verify_crc, dtypes=reference)
    source: RecordSource = reader if records is None else records
    if not spec.transforms and spec.record_transform is None and locations:
        try:
            described = reader.shapes(locations[0], rows[0])
        except ExperimentReadError:
            described = None  # the full path below reports or skips it
        if described and all(dt.kind in NUMERIC_KINDS for _, dt in described.values()):
            return {a: FieldSchema(shape, dt.str) for a, (shape, dt) in described.items()}
    errors = []
    for loc, row in zip(locations, rows, strict=True):
        try:
            return schema_of(produce(spec, source, loc, row, allow_text=allow_text))
        except ExperimentReadError as exc:
            if spec.on_error == "raise":
                raise
            errors.append(exc)
    raise GuideloomError(
        f"no experiment among the first {len(errors)} could be read to learn the output "
        f"shapes; first error: {errors[0]}"
    )


def _probe_task(job: Any, reference: Mapping[str, str] | None, locations: Sequence[Any],
                rows: Sequence[Mapping[str, Any]]) -> dict[str, FieldSchema]:
    spec, writer = _job(job)
    return probe_schema(spec, locations, rows, writer.allow_text, reference)


def _partition_task(job: Any, schema: Mapping[str, FieldSchema] | None,
                    reference: Mapping[str, str] | None, part: Partition, *,
                    ahead: ReadAhead | None = None) -> PartitionSummary:
    spec, writer = _job(job)
    return run_partition(spec, writer, schema, part, reference, ahead=ahead)


def job_readahead(spec: ExportSpec, todo: Sequence[Partition],
                  reference: Mapping[str, str] | None = None) -> ReadAhead | None:
    """One :class:`ReadAhead` over the remote records of every partition of ``todo``, for
    partitions run one after another in this process: the next partition's records are
    fetched while this one's are transformed and written (a partition's own read-ahead would
    start cold at every partition). ``None`` when no record is remote."""
    locations = [loc for part in todo for loc in part.locations]
    if all(loc.is_local for loc in locations):
        return None
    rows = [row for part in todo for row in part.rows]
    reader = RecordReader(spec.view, verify_crc=spec.verify_crc, dtypes=reference)
    return ReadAhead(reader, locations, rows)


def run_partition(spec: ExportSpec, writer: ExportFormat,
                  schema: Mapping[str, FieldSchema] | None, part: Partition,
                  reference: Mapping[str, str] | None = None, *,
                  ahead: ReadAhead | None = None) -> PartitionSummary:
    """Read, transform and write one partition; mark it done; return a small summary.

    Runs on a worker. Idempotent: a re-run writes the same bytes to the same places.
    ``reference`` (see :func:`reference_dtypes`) holds every record's HDF5 datatypes to the
    job's. ``ahead`` (:func:`job_readahead`, left open) reads the records instead of a
    read-ahead of this partition's own.
    """
    t0 = time.time()
    fell_back = fallbacks.snapshot()
    keys = schema if not writer.needs_schema else None  # fixed keys only: shapes may vary
    schema = None if keys is not None else schema
    shared = ahead
    if ahead is None:
        reader = RecordReader(spec.view, verify_crc=spec.verify_crc, dtypes=reference)
        ahead = ReadAhead(reader, part.locations, part.rows)  # remote records: fetched ahead
    sink = writer.sink(part, schema)
    first = reuse_buffers(spec, schema, writer.copies_records)
    overlapped = None
    if first is not None and len(part.locations) > 1:
        overlapped = OverlappedWrites(sink, (first, reuse_buffers(spec, schema, True) or {}))
    written: list[Any] = []
    skipped: list[SkippedRecord] = []
    hashed: dict[str, str] = {}  # id -> the content digest of the input read
    hash_s = hash_cpu_s = hash_wait_s = 0.0  # hashing inputs; waiting for it after a decode
    hasher = Hasher()
    racy_ns = racy_margin_ns()
    decoded = 0  # bytes of the records produced (decoded and transformed)
    read_sizes: list[int] = []  # bytes of each record as read and decoded, before transforms
    dtypes: dict[str, list[str]] = {}  # alias -> every dtype its records had, first seen first
    produce_s = write_s = 0.0
    carried = part.carried
    previous = (None if not carried or spec.previous is None
                else previous_rows(spec.previous.root, spec.previous.export_id))
    n_carried = 0
    try:
        for k, (loc, row) in enumerate(zip(part.locations, part.rows, strict=True)):
            if carried and carried[k] >= 0:
                assert previous is not None
                if k == 0 or carried[k - 1] < 0 or carried[k - 1] != carried[k] - 1:
                    # a run of rows carried from consecutive rows starts here: carry it all
                    run = 1
                    while k + run < len(carried) and carried[k + run] == carried[k] + run:
                        run += 1
                    t_write = time.perf_counter()
                    if overlapped is not None:
                        overlapped.drain()
                    sink.carry(part.start + k, carried[k], run, previous)
                    write_s += time.perf_counter() - t_write
                    _carried_dtypes(dtypes, previous)
                    n_carried += run
                written.append(loc.sim_id)
                continue
            try:
                t_read = time.perf_counter()
                check = ReadCheck(loc, racy_ns)  # the input's stat before and after
                # on a helper thread, while this decodes (unless hashed in this state before)
                hashing = hasher.start(loc, None if spec.verify_inputs else check.known())
                arrays = produce(spec, ahead, loc, row, allow_text=writer.allow_text,
                                 raw=writer.raw_records,
                                 into=first if overlapped is None else overlapped.buffers(),
                                 on_read=read_sizes.append)
                if schema is not None:
                    check_schema(arrays, schema, loc)
                elif keys is not None:
                    check_keys(arrays, keys, loc)
                t_hash = time.perf_counter()
                digest = hashing.result()
                check.end(digest)
                hashed[str(loc.sim_id)] = digest.digest
                t_write = time.perf_counter()
                hash_s += digest.seconds
                hash_cpu_s += digest.cpu_s
                hash_wait_s += t_write - t_hash
                (sink if overlapped is None else overlapped).write(part.start + k, loc.sim_id,
                                                                   arrays)
                produce_s += t_write - t_read
                if overlapped is None:
                    write_s += time.perf_counter() - t_write
            except ExperimentReadError as exc:
                if spec.on_error == "raise":
                    raise
                skipped.append({"sim_id": loc.sim_id, "file": exc.file, "error": str(exc)})
                continue
            written.append(loc.sim_id)
            if isinstance(arrays, Mapping):
                for alias, arr in arrays.items():
                    decoded += int(getattr(arr, "nbytes", 0) or 0)
                    seen = dtypes.setdefault(alias, [])
                    dt = getattr(getattr(arr, "dtype", None), "str", "object")
                    if dt not in seen:
                        seen.append(dt)
    except BaseException:
        hasher.close()
        if shared is None:
            ahead.close()
        (sink if overlapped is None else overlapped).abort()
        raise
    hasher.close()
    if shared is None:
        ahead.close()
    if n_carried != sum(1 for j in carried if j >= 0):  # every carried row went to the sink
        (sink if overlapped is None else overlapped).abort()
        raise GuideloomError(f"partition {part.index} carried {n_carried} of "
                             f"{sum(1 for j in carried if j >= 0)} rows; nothing published")
    t_close = time.perf_counter()
    n_bytes = (sink if overlapped is None else overlapped).close()
    write_s += time.perf_counter() - t_close + (0.0 if overlapped is None else overlapped.busy_s)
    summary: PartitionSummary = {
        **cast(SummaryExtra, sink.extra_summary()),  # a plugin's own keys ride along untyped
        "index": part.index,
        "start": part.start,
        "written": written,
        "skipped": skipped,
        "bytes": n_bytes,
        "bytes_decoded": decoded,
        "bytes_decoded_input": sum(read_sizes),
        "started": t0,
        "seconds": time.time() - t0,
        "read_transform_s": produce_s,
        "write_s": write_s,
        "dtypes": dtypes,
        "host": platform.node(),
        "verify_crc": spec.verify_crc,
        "fallbacks": fallbacks.since(fell_back),
        "input_digests": hashed,
        "input_hash_s": hash_s,
        "input_hash_cpu_s": hash_cpu_s,
        "input_hash_wait_s": hash_wait_s,
    }
    if carried:
        summary["carried"] = n_carried
    writer.stage.write_marker(part.index, summary)
    fault_point("partition-marked")
    return summary


def _carried_dtypes(dtypes: dict[str, list[str]], previous: PreviousRows) -> None:
    """Add the dtypes of the previous generation's fields to a partition's ``dtypes`` (the
    rows it carried have them)."""
    for alias, entry in previous.manifest["fields"].items():
        seen = dtypes.setdefault(alias, [])
        for dt in entry.get("dtypes") or [entry.get("dtype")]:
            if isinstance(dt, str) and dt != VARIES and dt not in seen:
                seen.append(dt)


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
    task = _partition_task if ahead is None else functools.partial(_partition_task, ahead=ahead)

    def on_result(summary: PartitionSummary) -> None:
        monitor.task_done(summary)
        if hashes is not None:  # its rows are final: hashed while the next partitions run
            hashes.rows_final(summary["start"], _experiments([summary]))

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


PUBLISH_STEPS = 3  # describe (and fsync) the files, write export.json, rename into place
VARIES = "varies"  # the "dtype" of a field whose records have different dtypes


def variable_fields(summaries: Sequence[PartitionSummary]) -> dict[str, dict[str, Any]]:
    """The ``fields`` of an export without a schema (npz): every alias's dtype, or
    ``"varies"`` with the sorted ``"dtypes"`` when its records differ."""
    dtypes: dict[str, list[str]] = {}
    for summary in summaries:
        for alias, found in summary["dtypes"].items():
            seen = dtypes.setdefault(alias, [])
            for dt in [found] if isinstance(found, str) else found:  # str: an older marker
                if dt not in seen:
                    seen.append(dt)
    fields: dict[str, dict[str, Any]] = {}
    for alias, seen in sorted(dtypes.items()):
        if len(seen) == 1:
            fields[alias] = {"shape": None, "dtype": seen[0]}
        else:
            fields[alias] = {"shape": None, "dtype": VARIES, "dtypes": sorted(seen)}
    return fields


def _finalize(spec: ExportSpec, staging: Staging, writer: ExportFormat, plan: ExportPlan,
              schema: Mapping[str, FieldSchema] | None,
              summaries: list[PartitionSummary], placed: dict[str, Any], monitor: RunMonitor,
              timings: dict[str, float], started: float,
              hashes: PrefixHashes | None = None,
              previous: Previous | None = None) -> ExportManifest:
    ids = plan.selection.ids
    written = {i for s in summaries for i in s["written"]}
    skipped = [x for s in summaries for x in s["skipped"]]
    keep = np.array([i in written for i in ids], dtype=bool)
    if not keep.any():
        raise GuideloomError(
            f"every experiment failed; nothing published. First error: {skipped[0]['error']}"
        )
    monitor.phase(FINALIZE, detail=(f"closing the gaps of {len(skipped)} skipped experiments"
                                    if skipped and not keep.all() else ""))
    staging.update_job(phase=PHASE_FINALIZING)
    fault_point("finalize-started")
    if hasattr(writer, "finalize_progress"):  # a format that reports its finalize's progress
        writer.finalize_progress = monitor.step
    writer.finalize(None if keep.all() else keep)
    fault_point("rows-finalized")
    sim_ids = np.asarray([i for i, k in zip(ids, keep, strict=True) if k])
    writer.write_sim_ids(sim_ids, summaries)
    fault_point("sim-ids-written")
    clock = monitor.clock
    clock.lap(steps.ROWS)
    provenance = record_provenance(staging, plan, keep, summaries)
    fault_point("provenance-written")
    clock.lap(steps.PROVENANCE)
    monitor.phase(CHECKSUMS)
    monitor.step(0, 1, "files")
    checksums = record_checksums(staging, writer, summaries, len(sim_ids))
    monitor.step(1, 1, "files")
    fault_point("checksums-written")
    clock.lap(steps.CHECKSUMS)
    monitor.phase(PUBLISH)
    monitor.step(0, PUBLISH_STEPS, "steps")
    if not writer.needs_schema:  # npz probes a schema for its keys only
        fields = variable_fields(summaries)
    else:
        assert schema is not None  # probed before the partitions ran
        fields = {a: s.to_json() for a, s in schema.items()}
    fields = writer.fields(fields)
    if skipped:
        warn(
            f"export of view {spec.view.name!r} skipped "
            f"{summarize_ids([x['sim_id'] for x in skipped])}; first error: "
            f"{skipped[0]['error']} (all errors are listed in {EXPORT_MANIFEST})",
            SkippedDataWarning,
        )
    head: ManifestHead = {
        "format": MANIFEST_FORMAT,
        "format_version": FORMAT_VERSION,
        "kind": spec.output,
        "view": spec.view.name,
        "view_fields": [
            {"alias": f.alias, "source": f.source_id, "timesteps": f.timesteps}
            for f in spec.view.fields
        ],
        "fields": fields,
        "count": len(sim_ids),
        "sim_ids_sha256": hashlib.sha256(np.ascontiguousarray(sim_ids).tobytes()).hexdigest(),
        "sim_ids_dtype": sim_ids.dtype.str,
        "filters": {
            "sim_ids": None if spec.sim_ids is None else [str(i) for i in spec.sim_ids],
            "where": spec.where_description,
        },
        **spec.transform_names(),
        "on_error": spec.on_error,
        # every row was read with its zip member's CRC-32 checked (resumed partitions included)
        "verify_crc": all(s.get("verify_crc", False) for s in summaries),
        "skipped": skipped,
        "missing": [str(i) for i in plan.selection.missing],
        "partition_size": plan.partition_size,
        "n_partitions": len(plan.partitions),
        "identity": plan.identity,
        "options": {k: v for k, v in spec.options.items() if isinstance(v, str | int | bool)},
    }
    tail: ManifestTail = {
        "export_id": uuid.uuid4().hex,
        "guideloom_version": __version__,
        "placement": placed,
        "fallbacks": fallbacks.total(s.get("fallbacks") or {} for s in summaries),
        # every phase so far; publish_s covers describing the export up to this file (the
        # final rename after it takes milliseconds; the run report has it)
        "timings": {**monitor.timings(), "total_s": round(time.time() - started, 4),
                    **timings},
        "data_dir": str(spec.data_dir),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "recipe": spec.recipe(),
        "provenance": provenance,
    }
    # (an export that can be updated has its history: recipe and generations came together)
    history = list(previous.manifest.get("generations") or []) if previous else []
    tail["generations"] = [*history, history_entry(
        plan.update, len(history) + 1, len(sim_ids), len(skipped), tail["data_dir"],
        tail["created"], tail["export_id"], as_root(spec.data_dir).release_version)]
    if checksums:
        tail = {"checksums": checksums, **tail}
    # the format's entries override the head, the tail overrides them (a plugin's own keys
    # ride along untyped)
    manifest: ExportManifest = {**head, **cast(ManifestExtra, writer.manifest_extra()), **tail}
    if staging.is_local:  # a catalogue entry beside the data; export.json stays the last file
        described = staging.path("data", CROISSANT_NAME)
        digests = {} if hashes is None else hashes.finish(staging.path("data"))
        staging.write_json(described, describe_published(spec, writer, staging, manifest,
                                                         digests), durable=False)
        manifest[DESCRIPTION_KEY] = description_entry(described)  # checked on open and verify
        fault_point("description-written")
        monitor.step(1, PUBLISH_STEPS, "steps")
        clock.lap(steps.CROISSANT)
    monitor.step(2, PUBLISH_STEPS, "steps")
    manifest["steps"] = clock.rounded()  # those after it: ExportResult.steps
    staging.write_json(staging.path("data", EXPORT_MANIFEST), manifest, durable=False)
    clock.lap(steps.MANIFEST)
    if staging.is_local:
        # one pass for every file of data/ (rows, sim_ids, provenance, checksums, croissant,
        # export.json) and the folder: all of it is on disk before the job is marked
        # "publishing", the only state in which a staged data/ is ever published
        fsync_tree(staging.path("data"))
        clock.lap(steps.FSYNC)
    fault_point("manifest-written")
    staging.publish(spec.overwrite or previous is not None, export_id=manifest["export_id"])
    monitor.step(PUBLISH_STEPS, PUBLISH_STEPS, "steps")
    clock.lap(steps.PUBLISH)
    return manifest


def record_provenance(staging: Staging, plan: ExportPlan, keep: np.ndarray,
                      summaries: Sequence[PartitionSummary] = ()) -> ProvenanceEntry:
    """Write ``provenance.json`` (what each published row came from) into ``data/``; return
    the entry ``export.json`` keeps (its sha256).

    A row's content digest is the one its partition hashed while reading it, or, carried,
    the update plan's. The recorded start is the earliest of the plan's and of the
    partitions' (a resumed job's partitions may have hashed in an earlier run).
    """
    rows = np.flatnonzero(keep)
    hashed: dict[str, str] = {}
    for summary in summaries:
        hashed.update(summary.get("input_digests") or {})
    carried = plan.update.digests if plan.update is not None else ()
    ids = plan.selection.ids
    digests = []
    for k in rows:
        digest = carried[k] if carried and carried[k] else hashed.get(str(ids[k]))
        if not digest:  # a partition resumed from a marker of a guideloom before digests
            loc = plan.selection.locations[k]
            logger.info("guideloom: hashing the input of experiment %s (%s): its partition "
                        "recorded no digest", ids[k], loc.describe())
            digest = content_digest(loc).digest  # (the job's identity: the input unchanged)
        digests.append(digest)
    starts = [int(float(s["started"]) * 1e9) for s in summaries if s.get("input_digests")]
    started_ns = min([plan.started_ns or time.time_ns(), *starts])
    doc = provenance_document([plan.inputs[k] for k in rows], digests,
                              [plan.index_rows[k] for k in rows])
    # made durable with the rest of data/ by finalize's one fsync pass
    blob = staging.write_json(staging.path("data", PROVENANCE_FILE), doc, durable=False,
                              compact=True)
    return cast(ProvenanceEntry, provenance_entry(blob, started_ns))


def record_checksums(staging: Staging, writer: ExportFormat, summaries: list[PartitionSummary],
                     count: int) -> ChecksumsEntry | None:
    """Write ``checksums.json`` (the workers' per-row digests in published order, plus the
    format's whole small files) and return the entry ``export.json`` keeps, or ``None`` when
    the partitions were written without checksums."""
    files = {name: file_digest(staging.path("data", name))[0]
             for name in writer.checksummed_files()}
    doc = combine(summaries, count, files)
    if doc is None:
        return None
    staging.write_json(staging.path("data", CHECKSUMS_FILE), doc, durable=False,  # as above
                       compact=True)
    return manifest_entry(doc)


def describe_published(spec: ExportSpec, writer: ExportFormat, staging: Staging,
                       manifest: ExportManifest,
                       digests: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The Croissant 1.1 description of the staged export (``croissant.json``).

    Files up to :data:`CROISSANT_HASH_LIMIT` are hashed (sha256), unless ``digests`` (by
    absolute path, from :func:`prefix_hashes`) has theirs; larger ones are described
    without a hash, which would cost a second full read of the export.
    """
    data = staging.path("data")
    files = {key: name if "*" in name else os.path.join(data, name)
             for key, name in writer.described_files(manifest).items()}
    # the dataset's name, URL, licence and citation: its manifest as loaded has them (the
    # views a to_jsonld() adds to a copy of it are not described)
    return describe_export(manifest, files, source=origin_of(spec.dataset.manifest), root=data,
                           hash_limit=CROISSANT_HASH_LIMIT, digests=digests)
