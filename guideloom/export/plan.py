"""An export job's plan, made in the driver before anything is placed: the experiments
selected, the cost estimate, the partitions and the job's identity (:func:`plan_job`, which
``guideloom run`` and its ``--dry-run`` both use; :func:`plan_export`)."""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from guideloom import config
from guideloom.cluster.runtime import job_partition_size
from guideloom.errors import ExperimentReadError, NothingToExportError
from guideloom.export import clock as steps
from guideloom.export.clock import StepClock
from guideloom.export.provenance import row_digests
from guideloom.export.spec import ExportSpec, Partition
from guideloom.export.staging import PHASE_FINALIZING, Staging
from guideloom.export.update import Previous, UpdatePlan, plan_update
from guideloom.formats import ExportFormat
from guideloom.read.fingerprint import input_evidence
from guideloom.read.records import REFERENCE_RECORDS, RecordReader, described_first
from guideloom.select.parse import Dataset
from guideloom.select.selection import Selection, check_storable_ids, select

CARRY_COST = 0.05  # an experiment carried by an update, in decoded experiments' time (a guess
# on the safe side: npy rows copied in the kernel at disk speed, npz files linked)
DRIVER_PROBE_MAX_S = 0.05  # a first record estimated cheaper than this is probed in the driver
# In-process cost model for choosing where a job runs (benchmarks/export.py measures both, on a
# shared 2-core machine): pointcloud-op10 exports at 400 MB/s of decoded HDF5 data (read, decode
# with the fast chunk path, write) on a quiet machine and 83-220 MB/s on a loaded one; each
# experiment costs 0.6-0.75 ms beyond its bytes (open, index, the seed's transform, write) when
# quiet, up to 1.7 ms loaded. The quiet figures:
DECODE_BYTES_PER_S = 400e6
PER_RECORD_S = 0.7e-3


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
    data = data_fingerprint(spec, selection)
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


def data_fingerprint(spec: ExportSpec, selection: Selection) -> str:
    """The fingerprint of the index table and the selected files, for the job identity."""
    return spec.data_dir.fingerprint(_index_bytes(spec.dataset), selection.locations)


def _index_bytes(ds: Dataset) -> bytes:
    """The bytes of the index table, read by URL or from the dataset's folder."""
    return ds.root.index_bytes(ds)


def estimate_seconds(spec: ExportSpec, selection: Selection) -> float:
    """Estimated in-process seconds of a job: records x (bytes to decode / rate + overhead).

    The bytes come from the HDF5 metadata of the first experiment (no data is read).
    """
    reader = RecordReader(spec.view)
    if spec.data_dir.high_latency:
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


def forkable_job(spec: ExportSpec, staging: Staging | None = None) -> bool:
    """Whether the job's partitions may run in processes forked from the driver: local data
    to a local target (see :mod:`guideloom.cluster.forked`)."""
    staging = staging or Staging.for_target(spec.target)
    return staging.is_local and spec.data_dir.can_fork


def only_finalize_left(spec: ExportSpec, staging: Staging, selection: Selection) -> int | None:
    """The partition size of this very job when an interrupted run of it had written every
    partition and was finalizing (the rerun only finishes the driver's steps); else ``None``."""
    job = staging.read_job() or {}
    size = job.get("partition_size")
    if job.get("phase") != PHASE_FINALIZING or not isinstance(size, int):
        return None
    if job.get("identity") != spec.identity(selection.ids, size,
                                            data_fingerprint(spec, selection)):
        return None
    return size
