"""The preprocess job: the selection fanned out on Dask, one processed file per experiment.

The driver checks the parameters, guards the output folder, selects the experiments (through
the read layer: local folders, zips, URLs and DOIs alike), prepares what the stages need once,
and runs one task per partition of experiments (task group ``preprocess``) on the placement
exports use (:func:`guideloom.cluster.runtime.placement`: in-process, the embedded local
cluster, a scheduler address, SLURM/PBS). A task opens each raw experiment read-only, reads
only the groups its stages need, writes the new file beside its final name and publishes it
(:mod:`guideloom.preprocess.publish`). What a file already holds for the same raw input and
the same processing is kept (``exists``); a changed input or parameter redoes the
experiment's stages; ``overwrite`` redoes everything selected.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import resource
import shutil
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import h5py

from guideloom.cluster.embedded import default_worker_count
from guideloom.cluster.runtime import (
    FORKED,
    default_partition_size,
    placement,
    progress_bar,
    run_partitions,
    task_key,
)
from guideloom.errors import ExperimentReadError
from guideloom.preprocess import inputs, publish
from guideloom.preprocess import params as params_mod
from guideloom.preprocess.stages import STAGES, STATUSES, prepare, stage
from guideloom.read.hdf5 import open_h5py
from guideloom.read.locations import Location

logger = logging.getLogger(__name__)

TASK_STAGE = "preprocess"
#: Root attributes of the raw files that the processed files drop (obsolete counts), as rddac.
OBSOLETE_ROOT_ATTRS = frozenset({"n_force_measurements", "n_sheet_measurements",
                                 "n_oil_measurements", "n_pointcloud_measurements"})
#: In-process cost model of one experiment per stage (seconds), for the placement decision.
STAGE_SECONDS = {"force": 2e-3, "sheet": 1e-3, "oil": 3e-3, "pointcloud": 60.0}
STATUS_TEXT = {
    "processed": "processed",
    "exists": "already in the output file, skipped (use --overwrite to recompute)",
    "no_group": "skipped, the raw file has no such measurement",
    "no_file": "skipped, no raw file for this experiment id",
    "error": "failed",
}


@dataclass(frozen=True)
class Item:
    """One experiment to process: where its raw file is, its output name, and its input's cheap
    evidence (:func:`guideloom.preprocess.inputs.evidence_of`)."""

    loc: Location
    name: str
    input: Mapping[str, Any]


@dataclass(frozen=True)
class Part:
    """The experiments one task processes."""

    index: int
    items: tuple[Item, ...]


@dataclass(frozen=True)
class Job:
    """What every task needs: small and picklable (shipped to the workers)."""

    out_dir: str
    stages: tuple[str, ...]
    config: Mapping[str, Mapping[str, Any]]
    fingerprints: Mapping[str, str]
    overwrite: bool
    prepared: Mapping[str, Any]
    started_ns: int = field(default_factory=time.time_ns)


@dataclass
class PreprocessReport:
    """What :func:`preprocess` did.

    Attributes:
        stages: The modalities run, in order.
        counts: Per modality, experiments per status (``processed``, ``exists``, ``no_group``,
            ``no_file``, ``error``).
        errors: Experiment id → the one-line error (it names the experiment and the file).
        out_dir: The processed folder.
        placement: Where the tasks ran (the placement's mode).
        seconds: Wall time of the whole call.
        peak_rss: The largest peak resident memory of a process that ran tasks (bytes).
        removed_tmp: Temporary files of interrupted runs that were removed.
    """

    stages: tuple[str, ...]
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    errors: dict[Any, str] = field(default_factory=dict)
    out_dir: str = ""
    placement: str = ""
    seconds: float = 0.0
    peak_rss: int = 0
    removed_tmp: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        """The status table, one line per modality (as rddac prints it)."""
        out = []
        for name in self.stages:
            counts = self.counts.get(name, {})
            parts = [f"{counts[s]} {STATUS_TEXT[s]}" for s in STATUSES if counts.get(s)]
            out.append(f"{name}: {', '.join(parts) if parts else 'nothing selected'}")
        return out


def parse_ids(text: str) -> list[int]:
    """An id selection such as ``0-999``, ``42,1035`` or ``0-10,42`` (rddac's syntax).

    Raises:
        ValueError: A part is not an integer or a range ``A-B`` with ``A <= B``.
    """
    out: dict[int, None] = {}
    for token in (t.strip() for t in text.split(",")):
        if not token:
            continue
        try:
            if "-" in token[1:]:
                cut = token.index("-", 1)
                first, last = int(token[:cut]), int(token[cut + 1:])
                if first > last:
                    raise ValueError
                out.update(dict.fromkeys(range(first, last + 1)))
            else:
                out[int(token)] = None
        except ValueError:
            raise ValueError(f"--ids: {token!r} is neither an id nor a range A-B") from None
    return list(out)


def choose_stages(modalities: Iterable[str] | None) -> tuple[str, ...]:
    """The modalities to run, in rddac's order; all installed ones when none are named.

    Raises:
        ValueError: An unknown modality, or ``pointcloud`` named when it is not installed.
    """
    named = list(modalities or ())
    for name in named:
        stage(name)
    if not named:
        available = [n for n in params_mod.MODALITIES
                     if n != "pointcloud" or params_mod.pointcloud_module() is not None]
        if len(available) < len(params_mod.MODALITIES):
            logger.warning("pointcloud: the stage is not installed here; skipped")
        return tuple(available)
    if "pointcloud" in named and params_mod.pointcloud_module() is None:
        raise ValueError("pointcloud: the stage is not installed (guideloom.preprocess."
                         "pointcloud); run force, sheet and oil by naming them")
    return tuple(n for n in params_mod.MODALITIES if n in named)


def preprocess(
    modalities: Iterable[str] | None = None,
    *,
    data_dir: str | Path,
    out_dir: str | Path | None = None,
    ids: str | Iterable[int] | None = None,
    split: str | None = None,
    config: Mapping[str, Mapping[str, Any]] | None = None,
    overwrite: bool = False,
    client: Any = None,
    labels: str | None = None,
    rebuild_models: bool = False,
    storage_options: Mapping[str, Any] | None = None,
    show_progress: bool = False,
    quiet: bool = False,
    run_report: str | Path | None = None,
) -> PreprocessReport:
    """Process the raw measurements of the selected experiments into ``out_dir/<id>.h5``.

    Args:
        modalities: Any of ``force``, ``sheet``, ``oil``, ``pointcloud`` (default: all
            installed).
        data_dir: The raw dataset: a folder (zips or loose files), an ``https://`` or fsspec
            URL, or a DOI.
        out_dir: The processed folder (default ``DATA_DIR/processed`` for a local folder).
        ids: An id selection (``"0-999,1035"`` or ids).
        split: Only the experiments of this ``split`` in the index table.
        config: Parameter overrides per modality (rddac's keys; see ``--dump-config``).
        overwrite: Recompute what the files already hold.
        client: Where to run (as the exports take it: ``None``, ``"sync"``, ``"local:N"``, an
            address, ``"slurm:N"``, a ``Client``).
        labels: The fin classifier's labels folder (pointcloud).
        rebuild_models: Retrain the cached fin classifier (pointcloud).
        storage_options: fsspec options for a remote ``data_dir``.
        show_progress: Show a progress bar.
        quiet: Do not log the placement line.
        run_report: An HTML run report to write after the run (phases, placement, tasks,
            skips: :mod:`guideloom.export.report`).

    Returns:
        A :class:`PreprocessReport`; experiments that failed are in ``errors`` (the others
        were published).

    Raises:
        ValueError: A parameter out of range, an unknown modality, an unsafe output folder, or
            a selection that cannot be made; raised before anything is written.
    """
    started = time.monotonic()
    names = choose_stages(modalities)
    params_mod.check(config or {})
    values = params_mod.merge(config)
    from guideloom.read.roots import folder_of

    folder = folder_of(data_dir)
    if out_dir is None:
        if folder is None:
            raise ValueError("--out is needed when --data-dir is a URL or DOI")
        out_dir = os.path.join(folder, "processed")
    out = os.path.abspath(str(out_dir))
    publish.guard_out_dir(None if folder is None else str(folder), out)
    ds, selection, no_file = _select(data_dir, ids, split, storage_options)
    prepared = prepare(names, values, out_dir=out, data_dir=str(data_dir), labels=labels,
                       rebuild=rebuild_models)
    job = Job(out, names, {n: values[n] for n in names},
              {n: STAGES[n].fingerprint(values[n], prepared.get(n)) for n in names},
              overwrite, prepared)
    report = PreprocessReport(names, {n: {} for n in names}, out_dir=out)
    report.removed_tmp = publish.prepare_out_dir(out)
    publish.write_index(out, ds.index_file, ds.root.index_bytes(ds))
    for _ in no_file:
        for n in names:
            _count(report, n, "no_file")
    locations = list(selection)
    items = [Item(loc, publish.output_name(loc.sim_id), evidence)
             for loc, evidence in zip(locations, inputs.evidence_of(locations), strict=True)]
    if items:
        _run_items(job, items, report, client, show_progress, quiet, run_report,
                   forkable=ds.root.can_fork)
    for error in report.errors.values():
        logger.error("%s", error)
    report.seconds = time.monotonic() - started
    return report


def _run_items(job: Job, items: Sequence[Item], report: PreprocessReport, client: Any,
               show_progress: bool, quiet: bool, run_report: str | Path | None, *,
               forkable: bool) -> None:
    """Fan the experiments out on the placement and gather their outcomes into ``report``;
    the run's phases, tasks and failures go to the dashboard page and the run report as an
    export's do (:class:`~guideloom.export.progress.RunMonitor`); ``forkable``: the data
    root may be read from forked processes (:attr:`~guideloom.read.roots.DataRoot.can_fork`)."""
    from guideloom.export.progress import PLAN, TASKS, RunMonitor

    started = time.time()
    title = f"preprocess {'+'.join(job.stages)}"
    monitor = RunMonitor(title, job.out_dir, "processed-h5", len(items),
                         show_progress=show_progress, started=started)
    monitor.phase(PLAN, at=started)
    estimate = len(items) * sum(STAGE_SECONDS[n] for n in job.stages)
    n_tasks = len(_parts(items, default_partition_size(len(items), default_worker_count())))
    status = "failed"
    try:
        with placement(client, estimate_s=estimate, n_tasks=n_tasks, quiet=quiet,
                       forkable=forkable) as where:
            report.placement = where.mode
            monitor.attach(where.client)
            monitor.placement({**where.to_json(), "estimate_s": round(estimate, 4)})
            parts = _parts(items, default_partition_size(len(items), where.workers))
            forked = _fork(job, parts, where.workers) if where.mode == FORKED else None
            if where.mode == FORKED and forked is None:
                report.placement = "in-process"
            monitor.phase(TASKS, total=len(items), tasks=len(parts),
                          detail=f"{len(parts)} tasks of experiments")
            token = os.urandom(4).hex()

            def seen(summary: dict[str, Any]) -> None:
                monitor.task_done({
                    "index": summary["index"], "seconds": summary["seconds"],
                    "written": [o[0] for o in summary["outcomes"] if o[2] is None],
                    "skipped": [{"sim_id": o[0], "file": o[3], "error": o[2]}
                                for o in summary["outcomes"] if o[2] is not None]})

            if forked is not None:
                with forked as (workers, _):
                    summaries = workers.run(on_result=seen)  # type: ignore[arg-type]
            else:
                summaries = run_partitions(
                    where.client, run_part, parts, args=(job,),
                    key=lambda part: task_key(TASK_STAGE, "+".join(job.stages), token,
                                              part.index),
                    done=lambda s: len(s["outcomes"]),
                    progress=progress_bar(False, 0, unit="", desc=""), on_result=seen)
        status = "published"
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        monitor.finish(status)
        if run_report is not None:
            from guideloom.export.report import write_report

            write_report(run_report, monitor.state)
    for summary in summaries:
        report.peak_rss = max(report.peak_rss, summary["peak_rss"])
        for sim_id, statuses, error, _ in summary["outcomes"]:
            for n, state in statuses.items():
                _count(report, n, state)
            if error is not None:
                report.errors[sim_id] = error


RUN_FOLDER = publish.RUN_FOLDER


@contextlib.contextmanager
def _forked_workers(job: Job, parts: Sequence[Part], n: int, folder: str) -> Iterator[Any]:
    from guideloom.cluster.forked import ForkedWorkers

    def task(_context: Any, part: Part) -> None:
        summary = run_part(job, part)
        tmp = os.path.join(folder, f".part-{part.index}.json")
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(summary, fh)
        os.replace(tmp, os.path.join(folder, f"part-{part.index}.json"))

    def summary_of(part: Part) -> Any:
        with open(os.path.join(folder, f"part-{part.index}.json"), encoding="utf-8") as fh:
            return json.load(fh)

    try:
        with ForkedWorkers(min(n, len(parts)), task, parts, summary_of,
                           describe=lambda p: f"partition {p.index}") as workers:
            yield workers, folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _fork(job: Job, parts: Sequence[Part], n: int) -> Any:
    """The tasks in ``n`` processes forked from this one (their summaries travel through a
    folder of the run in the output folder), or ``None`` when this process cannot fork now
    (the tasks then run here)."""
    from guideloom.cluster.forked import fork_problem

    problem = fork_problem()
    if problem is not None:
        logger.info("guideloom: running in-process: not forked after all: %s", problem)
        return None
    folder = os.path.join(job.out_dir, f"{RUN_FOLDER}{os.getpid()}-{os.urandom(4).hex()}")
    os.mkdir(folder)
    return _forked_workers(job, parts, n, folder)


def _count(report: PreprocessReport, name: str, status: str) -> None:
    counts = report.counts.setdefault(name, {})
    counts[status] = counts.get(status, 0) + 1


def _parts(items: Sequence[Item], size: int) -> list[Part]:
    size = max(1, int(size))
    return [Part(i, tuple(items[s:s + size])) for i, s in enumerate(range(0, len(items), size))]


def _select(data_dir: str | Path, ids: str | Iterable[int] | None, split: str | None,
            storage_options: Mapping[str, Any] | None
            ) -> tuple[Any, tuple[Location, ...], list[Any]]:
    """The dataset, the locations of the selected experiments with raw data (in index order),
    and the ids named by ``ids`` that have none."""
    from guideloom.select.selection import resolve_dataset, select

    ds, root = resolve_dataset(data_dir, None, None, storage_options=storage_options)
    wanted = parse_ids(ids) if isinstance(ids, str) else None if ids is None else list(ids)
    where = None
    if split is not None:
        index = ds.index()
        if not index.rows or "split" not in index.rows[0]:
            raise ValueError(f"--split needs a 'split' column in {index.path.name}")

        def where(row: Mapping[str, Any]) -> bool:
            return bool(row["split"] == split)

    if wanted is not None:
        known = set(ds.index().ids)
        wanted = [i for i in wanted if i in known]
    sel = select(ds, root, sim_ids=wanted, where=where, warn_missing=False, order="index")
    return ds, sel.locations, list(sel.missing) if wanted is not None else []


def run_part(job: Job, part: Part) -> dict[str, Any]:
    """Process one partition's experiments (runs on a worker); a failing experiment is
    reported in its outcome, the others go on."""
    started = time.perf_counter()
    outcomes = []
    published = False
    for item in part.items:
        statuses, error, wrote = process_item(job, item)
        published |= wrote
        outcomes.append((item.loc.sim_id, statuses, error, item.loc.describe()))
    if published:
        publish.fsync_dir(job.out_dir)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"index": part.index, "outcomes": outcomes, "peak_rss": peak,
            "seconds": time.perf_counter() - started}


def _current(job: Job, record: Mapping[str, Any] | None, same_input: bool, name: str
             ) -> str | None:
    """The status a stage keeps from the existing file (``exists`` or ``no_group``), or
    ``None`` when it must run."""
    if job.overwrite or record is None or not same_input:
        return None
    entry = record["stages"].get(name)
    if not isinstance(entry, dict) or entry.get("fingerprint") != job.fingerprints[name]:
        return None
    if entry.get("status") == "no_group":
        return "no_group"
    if entry.get("status") == "processed" and STAGES[name].group in record["groups"]:
        return "exists"
    return None


def process_item(job: Job, item: Item) -> tuple[dict[str, str], str | None, bool]:
    """One experiment: ``(status per stage, the error or None, whether a file was published)``.

    Nothing is published for an experiment that fails: its previous file (or none) stays.
    """
    final = os.path.join(job.out_dir, item.name)
    record = publish.read_record(final)
    same_input = (not job.overwrite and record is not None
                  and inputs.unchanged(record.get("input"), item.loc, item.input))
    statuses: dict[str, str] = {}
    todo = []
    for name in job.stages:
        kept = _current(job, record, same_input, name)
        if kept is None:
            todo.append(name)
        else:
            statuses[name] = kept
    if not todo:
        return statuses, None, False
    tmp = publish.temp_path(job.out_dir, item.name)
    try:
        _write(job, item, record if same_input else None, todo, tmp, statuses)
        publish.publish(tmp, final)
    except Exception as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        where = item.loc.describe()
        text = " ".join(str(exc).split()) or type(exc).__name__
        if not isinstance(exc, ExperimentReadError):
            text = f"experiment {item.loc.sim_id}: {where}: {text}"
        for name in todo:
            statuses[name] = "error"
        return statuses, text, False
    return statuses, None, True


def _write(job: Job, item: Item, record: Mapping[str, Any] | None, todo: Sequence[str],
           tmp: str, statuses: dict[str, str]) -> None:
    """The new file at ``tmp``: the raw root attributes, what the previous file holds for the
    stages not redone, then each stage's group, and the record."""
    members = [(m, None) for n in todo for m in STAGES[n].members]
    opened = open_h5py(item.loc)
    try:
        opened.prefetch(members)
        with opened.file() as raw, h5py.File(tmp, "w") as out:
            for key, value in raw.attrs.items():
                if key not in OBSOLETE_ROOT_ATTRS and key != publish.RECORD_ATTR:
                    out.attrs[key] = value
            entries: dict[str, Any] = {}
            if record is not None:  # (only a record of this very input is passed)
                entries = _carry(record, todo, out)
            for name in todo:
                status = STAGES[name].run(raw, out, job.config[name], job.prepared.get(name))
                statuses[name] = status
                entries[name] = {"fingerprint": job.fingerprints[name], "status": status}
            recorded = inputs.record(item.loc, item.input, job.started_ns)
            out.attrs[publish.RECORD_ATTR] = json.dumps({"input": recorded,
                                                         "stages": entries}, sort_keys=True)
    finally:
        opened.close()


def _carry(record: Mapping[str, Any], todo: Sequence[str], out: h5py.File
           ) -> dict[str, Any]:
    """Copy the previous file's groups of the stages not redone now (their records too)."""
    entries: dict[str, Any] = {}
    for name, entry in record["stages"].items():
        if name in todo or name not in STAGES or not isinstance(entry, dict):
            continue
        entries[name] = entry
    groups = [STAGES[n].group for n, e in entries.items() if e.get("status") == "processed"]
    if groups:
        with h5py.File(record["path"], "r") as old:
            for group in groups:
                if group in old:
                    old.copy(old[group], out, name=group)
    return entries
