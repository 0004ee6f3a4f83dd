"""The ``guideloom`` command line (also ``python -m guideloom``).

Subcommands: ``run`` (a workflow file, or a shipped workflow by name), ``workflows`` (list the
shipped ones), ``inspect`` (an export), ``verify`` (an export's data against the checksums
recorded when it was written), ``status`` (a running or interrupted job), ``demo``,
``extract`` (zipped to loose layout), ``make-demo-data``, ``views``, and ``info`` and
``download`` (the published release on DaRUS).

Errors print one line and exit with code 2 (bad usage or input) or 1 (a job failed); Ctrl-C
prints one line and exits with 130. ``--verbose`` lets Dask's log lines and tracebacks through.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import re
import shlex
import signal
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, NoReturn

from guideloom import __version__
from guideloom.errors import GuideloomError, JobFailedError, UsageError, permission_denied

EXIT_USAGE = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130
logger = logging.getLogger(__name__)
DASHBOARD_PATTERN = re.compile(r"^[^\s:]+:[0-9]+$")
DEMO_WORKFLOW = "force_signals"
DEFAULT_DASHBOARD = "127.0.0.1:8787"


# --- helpers ------------------------------------------------------------------------------
def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds >= 0, not {text!r}")
    return value


def _positive(text: str) -> float:
    """A finite number above 0 (seconds a network wait may last, a rate)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number above 0, not {text!r}")
    return value


def _count(text: str) -> int:
    """A whole number >= 0 (retries, ...)."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, not {text!r}")
    return value


def _scheduler(text: str) -> str:
    from guideloom.cluster.runtime import check_client_text

    try:
        return check_client_text(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _dashboard(text: str) -> str:
    if not DASHBOARD_PATTERN.match(text):
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return text


def _human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def _dtype_name(text: str) -> str:
    import numpy as np

    try:
        return np.dtype(text).name
    except TypeError:
        return text


@contextmanager
def _warnings_as_lines() -> Iterator[None]:
    """Print warnings raised inside as ``guideloom: warning: ...`` lines (one each)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            seen = set()
            for w in caught:
                line = _one_line(w.message)  # type: ignore[arg-type]
                if line not in seen:
                    seen.add(line)
                    print(f"guideloom: warning: {line}", file=sys.stderr)


def _workflow_path(text: str | Path) -> Path:
    """A workflow file, or the shipped workflow of that name (``force_signals``)."""
    from guideloom.workflows import find_shipped, shipped_workflows

    path = Path(text)
    if path.is_file():
        return path
    shipped = None if path.parent != Path(".") else find_shipped(path.name)
    if shipped is not None:
        return shipped
    names = ", ".join(shipped_workflows())
    raise UsageError(f"workflow file not found: {path} (shipped workflows: {names}; "
                     "see guideloom workflows)")


def _load_workflow(args: argparse.Namespace):
    from guideloom.workflow import load_workflow

    data_dir = args.data_dir
    if data_dir is not None and data_dir.lower().startswith("doi:"):  # resolved here: --server
        from guideloom.read.roots import open_remote_root as open_root

        data_dir = open_root(data_dir, server=args.server, token=args.token)
    return load_workflow(_workflow_path(args.workflow), data_dir=data_dir,
                         output=args.output, import_user_code=not args.dry_run,
                         storage_options=_storage_options(args.storage_option))


def _storage_option(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` of ``--storage-option``: the value as JSON when it parses (numbers,
    booleans, objects), else as a string; never shown in an error (it may be a secret)."""
    key, sep, value = text.partition("=")
    if not sep or not key or any(not part for part in key.split(".")):
        raise argparse.ArgumentTypeError(
            f"expected KEY=VALUE (e.g. key=..., client_kwargs.endpoint_url=http://...), not "
            f"{key + '=...' if sep else 'an argument without ='}")
    try:
        return key, json.loads(value)
    except ValueError:
        return key, value


def _storage_options(pairs: Sequence[tuple[str, Any]] | None) -> dict[str, Any]:
    """The ``--storage-option`` pairs as fsspec storage options (a dotted key nests:
    ``client_kwargs.endpoint_url=...``)."""
    options: dict[str, Any] = {}
    for key, value in pairs or ():
        *parents, last = key.split(".")
        level = options
        for part in parents:
            level = level.setdefault(part, {})
            if not isinstance(level, dict):
                raise UsageError(f"--storage-option {key}: {part} is already set to a value")
        level[last] = value
    return options


_SECRET_FLAGS = ("--storage-option", "--token")


def _command_line() -> str:
    """This command, runnable from any directory (relative paths stay right); the values of
    ``--storage-option`` and ``--token`` are left out (the hint is stored with the job)."""
    shown, hide = [], False
    for arg in sys.argv[1:]:
        if hide:
            shown.append(f"{arg.partition('=')[0]}=..." if "=" in arg else "...")
            hide = False
            continue
        flag, eq, value = arg.partition("=")
        if flag in _SECRET_FLAGS:
            if eq:
                shown.append(f"{flag}={value.partition('=')[0]}=..." if "=" in value
                             else f"{flag}=...")
            else:
                shown.append(arg)
                hide = True
            continue
        shown.append(arg)
    return f"{shlex.join(['cd', os.getcwd()])} && {shlex.join(['guideloom', *shown])}"


# --- run ----------------------------------------------------------------------------------
def _cmd_run(args: argparse.Namespace) -> int:
    wf = _load_workflow(args)
    if args.verify_crc:  # the command line adds the check; it never turns off the file's
        wf.verify_crc = True
    if args.verify_inputs:  # (the same: added, never turned off)
        wf.verify_inputs = True
    if args.code_version is not None:  # the command line's wins over the file's
        wf.code_version = args.code_version
    if args.update and args.overwrite:
        raise UsageError("give --update (carry the unchanged rows) or --overwrite (write the "
                         "export again), not both")
    scheduler, batch = _client_choice(args, wf)
    if wf.preprocess is not None:
        if args.dry_run:
            print(f"workflow: {wf.file} ({wf.name}); dry run: would preprocess "
                  f"{', '.join(wf.preprocess.modalities) or 'all modalities'} into "
                  f"{wf.preprocess.out}, then export from there")
            if not wf.preprocess.out.is_dir():
                return 0
        else:
            _run_preprocess_step(wf, scheduler)
    spec = wf.to_spec(overwrite=args.overwrite, update=args.update or None)
    dashboard = args.dashboard or wf.dashboard or DEFAULT_DASHBOARD
    if args.dry_run:
        with _warnings_as_lines(), wf.trusting():
            _print_plan(wf, spec, scheduler, all_reasons=args.all_reasons)
        return 0
    with wf.trusting():  # the file's dataset.trusted_roots, while the job reads the data
        result, seconds, resumed_exps = _execute(spec, scheduler, dashboard, args.verbose,
                                                 batch, report=args.report)
    _print_summary(result, seconds, resumed_exps)
    return 0


def _run_preprocess_step(wf: Any, scheduler: str | None) -> None:
    """A workflow's ``[preprocess]`` step, before its export (which reads its output)."""
    from guideloom.preprocess.job import preprocess

    step = wf.preprocess
    with _warnings_as_lines(), wf.trusting():
        report = preprocess(step.modalities or None, data_dir=wf.data_dir, out_dir=step.out,
                            config=step.config, overwrite=step.overwrite, client=scheduler,
                            show_progress=True)
    for line in report.lines():
        print(f"preprocess: {line}")
    if report.errors:
        first = next(iter(report.errors.values()))
        raise JobFailedError(f"preprocess: {len(report.errors)} experiment(s) failed; "
                             f"first: {first}")


def _client_choice(args: argparse.Namespace, wf: Any = None) -> tuple[str | None, dict[str, Any]]:
    """The ``client`` text and batch options: the command line wins over the workflow file."""
    if sum(map(bool, (args.cluster, args.scheduler, args.scheduler_file))) > 1:
        raise UsageError("give one of --scheduler, --scheduler-file and --cluster")
    if args.scheduler_file is not None:
        from guideloom.cluster.security import use_scheduler_file

        return use_scheduler_file(args.scheduler_file), {}
    if args.jobs is not None and not args.cluster:
        raise UsageError("--jobs goes with --cluster slurm|pbs")
    if args.cluster:
        return f"{args.cluster}:{args.jobs or 1}", {}
    if args.scheduler or wf is None:
        return args.scheduler, {}
    return wf.client_and_batch_options()


def _execute(spec, scheduler: str | None, dashboard: str, verbose: bool,
             batch: dict[str, Any] | None = None,
             report: Path | None = None) -> tuple[Any, float, int]:
    """Run the job; return ``(ExportResult, wall seconds, experiments resumed)``; ``report``:
    the HTML run report to write after it."""
    from guideloom.errors import (
        ManifestError,
        NoJobError,
        NothingToExportError,
        UnsafeFileError,
        UnsafeTargetError,
    )
    from guideloom.export import run_export
    from guideloom.export.status import job_status
    from guideloom.export.update import UpdateRefusedError

    t0 = time.perf_counter()
    with _warnings_as_lines():
        try:
            result = run_export(spec, client=scheduler, show_progress=True,
                                dashboard_address=dashboard, verbose=verbose,
                                resume_hint=f"rerun `{_command_line()}`", batch_options=batch,
                                report=report)
        except FileExistsError:
            raise UsageError(f"{spec.target} already holds a complete export; pass --overwrite "
                             "to replace it") from None
        except (UnsafeTargetError, UnsafeFileError, NothingToExportError, ManifestError,
                UpdateRefusedError) as exc:
            raise UsageError(str(exc)) from None  # the input, not the job: exit 2, no resume
        except (KeyboardInterrupt, UsageError):
            raise
        except Exception as exc:
            if verbose:
                raise
            try:
                kept = job_status(spec.target)
            except NoJobError:
                kept = None
            hint = ""
            if kept is not None and not kept.complete and kept.failed is not None:
                hint = f" ({kept.rerun_advice()})"  # what a rerun keeps, and what it does not
            elif kept is not None and not kept.complete and kept.partitions_done:
                hint = (f" ({kept.kept_text} are kept in {kept.staging_dir}; rerun to "
                        "resume)")
            raise JobFailedError(f"job failed: {_one_line(exc)}{hint}") from exc
    return result, time.perf_counter() - t0, result.resumed_experiments


def _print_summary(result, seconds: float, resumed_exps: int) -> None:
    m = result.manifest
    generation = (m.get("generations") or [{}])[-1].get("generation", 1)
    if result.up_to_date:
        print(f"up to date: {result.target} (generation {generation}, {m['count']} records of "
              f"view {m['view']!r}): nothing was added, removed or changed since it was "
              "written")
        return
    fresh = m["count"] + len(m["skipped"]) - resumed_exps
    print(f"wrote {m['count']} records of view {m['view']!r} to {result.target} "
          f"({m['kind']}, {m['n_partitions']} partitions)")
    if result.update is not None:
        u = result.update
        print(f"updated to generation {generation}: {u['added']} added, {u['removed']} "
              f"removed, {u['changed']} changed (read), {u['carried']} carried unchanged "
              "(not decoded)")
    if result.resumed_partitions:
        print(f"resumed: {result.resumed_partitions} partitions ({resumed_exps} experiments) "
              "were finished by an earlier run")
    skipped = m["skipped"]
    if skipped:
        first = "; ".join(" ".join(str(s["error"]).split()) for s in skipped[:3])
        print(f"skipped: {len(skipped)} experiments ({first}{'; …' if len(skipped) > 3 else ''})")
    else:
        print("skipped: 0")
    if m["missing"]:
        print(f"missing: {len(m['missing'])} experiments without local data "
              f"({', '.join(m['missing'][:10])}{', …' if len(m['missing']) > 10 else ''})")
    rate = fresh / seconds if seconds > 0 else math.inf
    print(f"wall time: {seconds:.2f} s, throughput: {rate:.1f} experiments/s "
          f"({fresh} processed in this run)")
    print(f"output: {result.target}")


def _print_plan(wf, spec, scheduler: str | None, all_reasons: bool = False) -> None:
    from guideloom.cluster.runtime import preview_placement
    from guideloom.export.run import PROBE_ATTEMPTS, plan_job, probe_schema
    from guideloom.export.staging import Staging
    from guideloom.export.status import IDENTITY_SHOWN
    from guideloom.export.update import UpdateRefusedError, open_previous
    from guideloom.formats import get_format
    from guideloom.workflow.references import DeferredReference

    previous = None
    if spec.update:  # partitioned as the update will be (a storage or zarr keeps its own)
        try:
            previous = open_previous(spec, check_recipe=False)
        except UpdateRefusedError:
            previous = None  # said below, with the plan
    # the run's own plan (plan_job) and placement decision (preview_placement)
    job = plan_job(spec, Staging.for_target(spec.target), get_format(spec.output), previous)
    spec = job.spec
    where = preview_placement(scheduler, job.estimate_s, job.n_tasks, forkable=job.forkable,
                              finishing=job.finishing is not None)
    plan = job.export_plan()
    deferred = [fn.ref for fn in (*spec.transforms.values(), spec.record_transform)
                if isinstance(fn, DeferredReference)]
    n = len(plan.selection.locations)
    print(f"workflow: {wf.file} ({wf.name}); dry run, nothing is written")
    print(f"runs: {where.mode}: {where.reason} ({where.workers} "
          f"worker{'s' * (where.workers != 1)})")  # as the run's "running MODE: REASON" line
    print(f"view: {spec.view.name} ({', '.join(spec.view.aliases)})")
    print(f"filters: sim_ids={'all' if spec.sim_ids is None else len(spec.sim_ids)}, "
          f"where={spec.where_description or '-'}")
    names = spec.transform_names()
    fields = ", ".join(f"{a}={f}" for a, f in names["transforms"].items()) or "-"
    print(f"transforms: fields: {fields}; record: {names['record_transform'] or '-'}")
    missing = plan.selection.missing
    print(f"experiments: {n} with local data"
          + (f", {len(missing)} selected but missing" if missing else ""))
    identity = "decided when it runs" if deferred else plan.identity[:IDENTITY_SHOWN]
    print(f"partitions: {len(plan.partitions)} of up to {plan.partition_size} experiments "
          f"(job {identity}, on_error={spec.on_error})")
    print(f"output: {spec.output} -> {spec.target}"
          + (f" ({wf.compression})" if wf.compression != "none" else ""))
    if spec.update:
        _print_update_plan(spec, plan, bool(deferred), all_reasons)
        return
    _print_target_note(spec)
    if deferred:
        print(f"  arrays: made by {', '.join(deferred)}, which a dry run neither imports nor "
              "runs (a workflow file is code: its modules run when the job does)")
        return
    schema = probe_schema(spec, plan.selection.locations[:PROBE_ATTEMPTS],
                          plan.selection.rows[:PROBE_ATTEMPTS])
    variable = not get_format(spec.output).needs_schema
    total = 0
    for alias, fs in sorted(schema.items()):
        nbytes = fs.row_bytes * n
        total += nbytes
        shape = f"{fs.shape} per record" if variable else str((n, *fs.shape))
        print(f"  {alias:28s} {shape:24s} {_dtype_name(fs.dtype):10s} {_human_bytes(nbytes)}")
    print(f"  {'sim_ids':28s} {(n,)!s:24s} {'int64':10s} {_human_bytes(8 * n)}")
    total += 8 * n
    if variable:
        print(f"  ({spec.output}: shapes may vary per experiment; shown and sized from the first "
              "record)")
    approx = "about " if variable else ""
    print(f"total: {approx}{_human_bytes(total)} uncompressed ({total} bytes)")


def _print_update_plan(spec, plan, deferred: bool, all_reasons: bool = False) -> None:
    """What ``--update`` would do: the counts, the bytes to read and to carry (from the
    previous generation's files and the members' sizes; no record is decoded, inputs whose
    evidence changed are hashed), and per experiment why it is read or how it is carried."""
    from guideloom.export.update import (
        DRY_RUN_SHOWN,
        UpdateRefusedError,
        open_previous,
        preview_update,
    )

    try:
        previous = open_previous(spec, check_recipe=not deferred)
    except UpdateRefusedError as exc:
        print(f"update: refused: {exc}")
        return
    if previous is None:
        print(f"update: nothing at {spec.target} yet: this run is a full export")
        return
    preview = preview_update(previous, plan, spec.verify_inputs)
    print(f"update: {preview.line()}")
    for line in preview.reasons(None if all_reasons else DRY_RUN_SHOWN):
        print(f"  {line}")
    if deferred:
        print("  (the transforms are not imported by a dry run: that they are the export's is "
              "checked when the update runs)")


def _print_target_note(spec) -> None:
    from guideloom.export.status import staging_for

    staging = staging_for(spec.target)
    if staging.target_complete():
        action = "replaces it" if spec.overwrite else "fails; add --overwrite to replace it"
        print(f"note: {staging.url} already holds a complete export; this run {action}")


# --- inspect and status -------------------------------------------------------------------
def _status(path: str):
    from guideloom.errors import NoJobError
    from guideloom.export.status import job_status

    try:
        return job_status(path)
    except NoJobError as exc:
        raise UsageError(str(exc)) from None


def _cmd_status(args: argparse.Namespace) -> int:
    status = _status(args.path)
    print(f"{status.target}: {status.line()}")
    if status.problem is not None:
        return EXIT_FAILED
    if not status.complete and not status.job:  # running (starting): nothing staged yet
        return 0
    if not status.complete:
        if status.last_partition_age_s is not None:
            print(f"last partition finished {status.last_partition_age_s:.0f} s ago")
        print(f"job {status.identity}: view {status.job.get('view')!r}, output "
              f"{status.job.get('output')}, staging area {status.staging_dir}")
        if status.running is not None:
            print(f"running now ({status.running}); wait for it, or stop it")
        elif status.failed is not None:
            print(f"not running (failed): {status.rerun_advice()}")
        elif not status.lock_visible:
            print(f"running, or interrupted: {status.resume_hint} to resume it")
        else:
            print(f"not running (interrupted): {status.resume_hint} to resume it")
    return 0


def _print_fields(m: Mapping[str, Any]) -> None:
    print("fields:")
    for alias, fs in sorted(m["fields"].items()):
        shape = "variable shape" if fs["shape"] is None else f"shape {tuple(fs['shape'])}"
        dtype = _dtype_name(fs["dtype"])
        if fs.get("dtypes"):  # records of different dtypes (npz)
            dtype += f" ({', '.join(_dtype_name(d) for d in fs['dtypes'])})"
        print(f"  {alias:28s} {shape:22s} dtype {dtype}")


def _inspect_rddac(path: str) -> int:
    """An rddac/ddacs export folder (no ``export.json``): what ``load_export`` reads from it,
    with its warning; its shapes and row counts checked as ``load_export`` checks them."""
    from guideloom.errors import IncompleteExportError
    from guideloom.reader import load_export

    print(f"export: {path}")
    try:
        with _warnings_as_lines():
            m = load_export(path).manifest
    except IncompleteExportError as exc:  # as a damaged guideloom export: named, exit 1
        print(f"status: damaged: {_one_line(exc)}")
        return EXIT_FAILED
    print(f"kind: {m['kind']} (written by {m.get('written_by')})")
    print(f"records: {m['count']}")
    _print_fields(m)
    print(f"sim_ids: dtype {_dtype_name(m['sim_ids_dtype'])}")
    print("status: unverified: no export.json, so no checksums, view, filters or transforms "
          "are recorded; shapes and row counts checked")
    return 0


def _cmd_inspect(args: argparse.Namespace) -> int:
    from guideloom.formats.rddac_layout import is_rddac_export

    if is_rddac_export(args.export):  # load_export reads it (with a warning): so does this
        return _inspect_rddac(str(args.export))
    status = _status(args.export)
    if status.problem is not None:
        print(f"export: {status.target}")
        print(f"status: {status.line()}")
        return EXIT_FAILED
    if not status.complete:
        print(f"export: {status.target}")
        if status.running is not None:  # (running, or starting: nothing to advise)
            print(f"status: {status.line()}")
        elif status.failed is not None:
            print(f"status: {status.line()}; {status.rerun_advice()}")
        else:
            print(f"status: {status.line()}; rerun the job to finish it")
        return 0
    root, m = status.target, status.manifest
    print(f"export: {root}")
    print(f"kind: {m['kind']}" + _options_text(m.get("options", {})))
    print(f"view: {m['view']} ({', '.join(f['alias'] for f in m.get('view_fields', []))})")
    print(f"records: {m['count']}")
    _print_fields(m)
    filters = m.get("filters", {})
    ids = filters.get("sim_ids")
    print(f"filters: sim_ids={'all' if ids is None else len(ids)}, "
          f"where={filters.get('where') or '-'}")
    fields = ", ".join(f"{a}={f}" for a, f in (m.get("transforms") or {}).items()) or "-"
    print(f"transforms: fields: {fields}; record: {m.get('record_transform') or '-'}")
    print(f"on_error: {m.get('on_error')}; skipped: {len(m.get('skipped', []))}; "
          f"missing: {len(m.get('missing', []))}")
    print(f"status: {status.line()}; created {m.get('created', '?')}")
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    """Exit 0 with one line when intact; 1 naming the file and row when damaged (or when no
    checksums were recorded: nothing proves it intact); 2 when the path is not an export."""
    from guideloom.errors import CorruptExportError, IncompleteExportError, UnverifiableExportError
    from guideloom.reader import open_sealed

    try:
        report = open_sealed(args.export).verify()  # never unpickles: verifying trusts nothing
    except (CorruptExportError, UnverifiableExportError) as exc:
        print(f"guideloom: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_FAILED
    except IncompleteExportError as exc:  # unfinished, foreign: not an export to verify
        raise UsageError(str(exc)) from None
    print(report.line())
    return 0


def _options_text(options: Mapping[str, Any]) -> str:
    shown = ", ".join(f"{k}={v}" for k, v in sorted(options.items()))
    return f" ({shown})" if shown else ""


# --- demo ---------------------------------------------------------------------------------
def _cmd_demo(args: argparse.Namespace) -> int:
    import numpy as np

    from guideloom.demo import make_demo_data
    from guideloom.reader import load_export
    from guideloom.workflow import load_workflow

    workflow = _workflow_path(args.workflow or DEMO_WORKFLOW)
    data_dir = Path(args.data_dir).absolute()
    demo = make_demo_data(data_dir, n=args.n)
    print(f"demo data: {len(demo.ids)} experiments ({demo.layout} layout) in {demo.data_dir}")
    output = args.output or data_dir / "exports" / "force-signals"
    wf = load_workflow(workflow, data_dir=data_dir, output=output)
    spec = wf.to_spec(overwrite=True)
    scheduler, batch = _client_choice(args)
    if scheduler is None and not args.cluster:  # the demo shows the cluster and its dashboard
        scheduler = "local"
    result, seconds, _ = _execute(spec, scheduler, args.dashboard, args.verbose, batch)
    _print_summary(result, seconds, 0)

    export = load_export(result.target)
    t0 = time.perf_counter()
    total = 0.0
    for row in export:
        total += float(row["max_total_force"])
    read_s = time.perf_counter() - t0
    n = len(export)
    task_s = sum(s["seconds"] for s in result.summaries)
    print(f"export   : {seconds * 1e3 / n:8.3f} ms/record wall "
          f"({task_s * 1e3 / n:.3f} ms/record inside the tasks), {n} records; overhead "
          f"(wall minus task time) {seconds - task_s:.3f} s, "
          f"{result.manifest['placement']['mode']}")
    print(f"read back: {read_s * 1e3 / n:8.3f} ms/record with load_export "
          f"(memory-mapped), {n} records")
    print(f"check    : sum of max_total_force = {total:.1f} kN; "
          f"rows follow sim_ids {export.sim_ids[:5].tolist()}…; "
          f"force {export[0]['force'].shape} {np.dtype(export[0]['force'].dtype).name}")
    if args.keep_dashboard:
        _keep_dashboard_open(args.keep_dashboard)
    return 0


def _keep_dashboard_open(seconds: float) -> None:
    """Keep the embedded cluster, and so its dashboard, open for ``seconds`` (inf: until Ctrl-C)."""
    import threading

    from guideloom.cluster.embedded import running_cluster

    cluster = running_cluster()
    if cluster is None or not cluster.dashboard_link:
        print("no dashboard to keep open: the export did not run on the embedded cluster "
              "(use --scheduler local)")
        return
    until = ("until Ctrl-C" if math.isinf(seconds)
             else f"for {seconds:g} s (Ctrl-C closes it sooner)")
    print(f"dashboard: {cluster.dashboard_link} stays open {until}", flush=True)
    with suppress(KeyboardInterrupt):
        threading.Event().wait(None if math.isinf(seconds) else seconds)
    print("dashboard closed", flush=True)


# --- the published release: info and download ----------------------------------------------
def _release_options(p: argparse.ArgumentParser) -> None:
    from guideloom.net.dataverse import RDDAC_DOI, SERVER_ENV, TOKEN_ENV

    p.add_argument("--token", default=argparse.SUPPRESS,
                   help=f"Dataverse API token for drafts or restricted files, sent as the "
                        f"X-Dataverse-key header (better: the {TOKEN_ENV} environment "
                        "variable, which other users cannot see in the process list)")
    p.add_argument("--server", default=None, metavar="URL",
                   help=f"Dataverse server (default ${SERVER_ENV}, else DaRUS)")
    p.add_argument("--doi", default=RDDAC_DOI, help=f"dataset persistent id (default {RDDAC_DOI})")
    p.add_argument("--timeout", type=_positive, default=60.0, metavar="SECONDS",
                   help="seconds per connect or read before a retry (default 60)")
    p.add_argument("--retries", type=_count, default=5, metavar="N",
                   help="retries of the file list and of each file after a 429/5xx, reset or "
                        "timeout, with doubling waits from 0.5 s (default 5; a server name "
                        "that does not resolve is not retried)")


def _cmd_info(args: argparse.Namespace) -> int:
    from guideloom.net.dataverse import dataset_versions, title_of

    versions = dataset_versions(server=args.server, doi=args.doi, token=args.token,
                                timeout=args.timeout, retries=args.retries)
    latest = versions[0] if versions else {}
    print(title_of(latest) or args.doi)
    print(f"  persistent id: {args.doi}")
    print(f"  license:       {(latest.get('license') or {}).get('name', 'unknown')}")
    rows = []
    for v in versions:
        number = f"{v.get('versionNumber', '?')}.{v.get('versionMinorNumber', 0)}"
        names: set[str] = {name for f in v.get("files", [])
                           if (name := (f.get("dataFile") or {}).get("filename")) is not None}
        size = sum(int((f.get("dataFile") or {}).get("filesize") or 0) for f in v.get("files", []))
        date = str(v.get("releaseTime") or v.get("createTime") or "-")[:10]
        rows.append((number, str(v.get("versionState", "?")), date, names, size))
    print(f"{'version':9s} {'state':10s} {'released':10s} {'files':>6s} {'size':>10s}  changes")
    for i, (number, state, date, names, size) in enumerate(rows):
        if i + 1 < len(rows):
            older = rows[i + 1][3]
            changes = [f"+{n}" for n in sorted(names - older)] + \
                      [f"-{n}" for n in sorted(older - names)]
            change = " ".join(changes) or "no changes"
        else:
            change = "first version"
        print(f"{number:9s} {state:10s} {date:10s} {len(names):6d} {_human_bytes(size):>10s}  "
              f"{change}")
    print("download one with: guideloom download --version VERSION (--small for the sample)")
    return 0


def _refusal(plan: Any, sims: Any = None) -> str | None:
    """Ask before downloading; ``None`` when the user confirmed, else why nothing is fetched.

    Without a terminal on stdin (a script, a pipe, cron) nobody can answer: that is a refusal
    too, so a script without ``--yes`` fails instead of silently doing nothing.
    """
    if not sys.stdin.isatty():
        return "cannot ask for confirmation (stdin is not a terminal); pass --yes"
    count = len(plan.to_fetch) + (len(sims.to_fetch) if sims is not None else 0)
    size = plan.bytes_to_fetch + (sims.bytes_to_fetch if sims is not None else 0)
    try:
        answer = input(f"download {count} file(s), {_human_bytes(size)}, to {plan.out}? [y/N] ")
    except EOFError:
        return "not confirmed (no input); pass --yes to download without asking"
    if answer.strip().lower() in ("y", "yes"):
        return None
    return "download declined"


def _show_plan(plan: Any) -> None:
    print(f"{plan.title or plan.doi} (version {plan.version}) from {plan.server}")
    for f in plan.files:
        state = "present" if f in plan.present else "to fetch"
        print(f"  {f.relpath:40s} {_human_bytes(f.size):>10s}  {state}")
    print(f"{len(plan.to_fetch)} of {len(plan.files)} file(s) to fetch, "
          f"{_human_bytes(plan.bytes_to_fetch)}, into {plan.out.resolve()}")


def _cmd_download(args: argparse.Namespace) -> int:
    from guideloom.releases.release import (
        plan_download,
        plan_simulations,
        run_download,
        wants_simulations,
    )

    if args.remove_zip and not args.extract:
        raise UsageError("--remove-zip deletes the zips after --extract; pass both")
    version = args.version_option or args.version
    plan = plan_download(args.out, version=version, files=args.files, small=args.small,
                         token=args.token, server=args.server, doi=args.doi,
                         timeout=args.timeout, retries=args.retries)
    sims = plan_simulations(args.out, token=args.token, server=args.server,
                            timeout=args.timeout, retries=args.retries) \
        if wants_simulations(args.files, args.small, args.no_sim, args.doi) else None
    quiet = args.quiet
    if not quiet:
        _show_plan(plan)
        if sims is not None:
            print("the matching DDACS simulations (skip them with --no-sim):")
            _show_plan(sims)
    fetching = bool(plan.to_fetch or (sims is not None and sims.to_fetch))
    refusal = None if not fetching or args.yes or quiet else _refusal(plan, sims)
    if refusal is not None:
        logger.debug("download of %s refused: %s", plan.doi, refusal)
        print(f"guideloom: {refusal}: nothing was downloaded", file=sys.stderr)
        return EXIT_FAILED
    for one in (plan, sims):
        if one is None:
            continue
        first = one is plan
        report = run_download(one, token=args.token, parallel=args.parallel,
                              timeout=args.timeout, retries=args.retries,
                              show_progress=not quiet, extract=args.extract and first,
                              remove_zip=args.remove_zip and first,
                              client=args.scheduler or "sync", private=args.private)
        if not quiet:
            print(f"downloaded {len(report.downloaded)} file(s) "
                  f"({_human_bytes(report.bytes_fetched)}) in {report.seconds:.1f} s into "
                  f"{one.out}; {len(report.present)} were already present and verified")
            if report.extract is not None:
                print(f"extracted {len(report.extract.extracted)} experiments to "
                      f"{plan.out / 'h5'}")
    return 0


def _cmd_serve_release(args: argparse.Namespace) -> int:
    import threading

    from guideloom.releases.server import ReleaseServer, make_demo_release

    root = Path(args.dir)
    if args.demo:
        make_demo_release(root, n=args.n)
    server = ReleaseServer(root, doi=args.doi, port=args.port, rate=args.rate)
    size = sum(f.size for f in server.files)
    url = server.url
    print(f"serving {root} ({len(server.files)} files, {_human_bytes(size)}) as {args.doi} at "
          f"{url} (127.0.0.1 only); Ctrl-C stops it\n"
          f"  guideloom info --server {url}\n"
          f"  guideloom download --small --yes --server {url}\n"
          f"  guideloom run force_signals --data-dir {args.doi} --server {url} "
          "--output exports/force-signals", flush=True)
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    server.start()
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        server.stop()
    print("stopped", flush=True)
    return 0


# --- extract ------------------------------------------------------------------------------
def _cmd_extract(args: argparse.Namespace) -> int:
    from guideloom.export.extract import ExtractError, extract_zips

    try:
        with _warnings_as_lines():
            report = extract_zips(args.data_dir, source=args.manifest,
                                  client=_client_choice(args)[0],
                                  remove_zip=args.remove_zip, overwrite=args.overwrite,
                                  show_progress=True)
    except ExtractError as exc:
        raise JobFailedError(_one_line(exc)) from exc
    h5 = Path(args.data_dir) / "h5"
    print(f"extracted {len(report.extracted)} experiments ({_human_bytes(report.bytes)}) to "
          f"{h5} in {report.seconds:.2f} s; {len(report.skipped_existing)} were already loose")
    if report.removed_archives:
        print(f"removed archives: {', '.join(Path(a).name for a in report.removed_archives)}")
    for archive, reason in report.kept_archives.items():
        print(f"kept archive {Path(archive).name}: {reason}")
    if report.cleaned_tmp:
        print(f"removed {len(report.cleaned_tmp)} temporary files of an interrupted run")
    return 0


# --- preprocess ---------------------------------------------------------------------------
def _cmd_preprocess(args: argparse.Namespace) -> int:
    from guideloom.preprocess import params
    from guideloom.preprocess.job import choose_stages, preprocess

    if args.dump_config:
        print(params.dump(), end="")
        return 0
    config = params.load(args.config) if args.config else None
    names = choose_stages(args.modalities)
    if args.workers is not None and args.workers < 1:
        raise UsageError("--workers must be at least 1")
    client = _client_choice(args)[0]
    if client is None and args.workers is not None:
        client = "sync" if args.workers == 1 else f"local:{args.workers}"
    out = args.out or (None if "://" in args.data_dir or args.data_dir.startswith("doi:")
                       else os.path.join(args.data_dir, "processed"))
    quiet = args.quiet
    if not quiet:
        print(f"modalities: {', '.join(names)}\nraw data: {args.data_dir}\noutput: {out}\n"
              f"experiments: {args.ids or args.split or 'all'}\n"
              "raw files are never modified; processed files are written separately")
    if not (args.yes or quiet):
        try:
            answer = input("proceed? [y/N] ")
        except EOFError:
            print("\nnot confirmed (no input); pass --yes to preprocess without asking")
            return 0
        if answer.strip().lower() not in ("y", "yes"):
            print("preprocess cancelled")
            return 0
    with _warnings_as_lines():
        report = preprocess(names, data_dir=args.data_dir, out_dir=out, ids=args.ids,
                            split=args.split, config=config, overwrite=args.overwrite,
                            client=client, labels=args.labels,
                            rebuild_models=args.rebuild_models, show_progress=not quiet,
                            quiet=quiet, run_report=args.report)
    if not quiet:
        for line in report.lines():
            print(line)
        print(f"finished in {report.seconds:.1f} s ({report.out_dir})")
    if report.errors:
        first = next(iter(report.errors.values()))
        raise JobFailedError(f"{len(report.errors)} experiment(s) failed; first: {first}")
    return 0


# --- workflows ----------------------------------------------------------------------------
def _cmd_workflows(args: argparse.Namespace) -> int:
    from guideloom.workflow.load import read_document
    from guideloom.workflows import shipped_workflows

    shipped = shipped_workflows()
    width = max([18, *(len(name) for name in shipped)])  # the names' column, as wide as needed
    for name, path in shipped.items():
        doc = read_document(path)
        kind = doc.get("output", {}).get("kind", "?")
        print(f"{name:{width}s} {kind:8s} {doc.get('description', '').strip()}")
        if args.paths:
            print(f"{'':{width}s} {path}")
    print("run one with: guideloom run NAME (paths are relative to the current directory)")
    return 0


def _cmd_cache_clear(args: argparse.Namespace) -> int:
    from guideloom.read.roots import clear_remote_cache

    folder, count, size = clear_remote_cache()
    print(f"removed {count} entr{'y' if count == 1 else 'ies'} ({size / 1024:.0f} KiB) from "
          f"{folder}")
    return 0


# --- existing commands --------------------------------------------------------------------
def _cmd_make_demo_data(args: argparse.Namespace) -> int:
    from guideloom.demo import make_demo_data
    from guideloom.errors import NotDemoDataError

    try:
        demo = make_demo_data(
            args.data_dir, n=args.n, scan_shape=tuple(args.scan_shape), layout=args.layout,
            seed=args.seed, force=args.force,
        )
    except NotDemoDataError as exc:
        raise UsageError(f"{exc.path} is not empty and was not made by make-demo-data; choose "
                         "an empty directory, or pass --force to write the demo files into it"
                         ) from None
    print(f"wrote {len(demo.ids)} experiments ({demo.layout} layout, scans "
          f"{demo.scan_shape[0]}x{demo.scan_shape[1]}) to {demo.data_dir}")
    return 0


def _cmd_views(args: argparse.Namespace) -> int:
    from guideloom.select.views import describe_views

    data_dir: Any = args.data_dir
    if data_dir.lower().startswith("doi:"):  # resolved here, on --server with --token
        from guideloom.read.roots import open_remote_root

        data_dir = open_remote_root(data_dir, server=args.server, token=args.token)
    elif args.server is not None:
        raise UsageError("--server names the Dataverse server a DOI is resolved on; "
                         f"{args.data_dir} is not a DOI")
    for line in describe_views(data_dir, source=args.manifest):
        print(line)
    return 0


# --- parser -------------------------------------------------------------------------------
class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit code 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _add_cluster_options(p: argparse.ArgumentParser, *, workflow: bool = True,
                         default: str | None = None) -> None:
    if default is None:
        default = (("the workflow's [run] scheduler, else " if workflow else "")
                   + "in-process for small jobs and a local cluster when it pays")
    p.add_argument("--scheduler", type=_scheduler, default=None,
                   help="local (one worker per core), local:N, sync (in-process), fork, "
                        "fork:N (processes forked from this one; local data), tls://HOST:PORT "
                        "(a cluster/local.py or cluster/slurm.py scheduler; "
                        "its credentials are found in its state folder) or tcp://HOST:PORT "
                        f"(default: {default})")
    p.add_argument("--scheduler-file", type=Path, default=None, metavar="FILE",
                   help="the scheduler file of a running cluster (STATE_DIR/scheduler.json, "
                        "printed by cluster/local.py start); its TLS credentials are read "
                        "from STATE_DIR/tls")
    p.add_argument("--dashboard", type=_dashboard, default=None, metavar="HOST:PORT",
                   help="dashboard address of an embedded local cluster "
                        "(default 127.0.0.1:8787, or a free port when it is busy)")
    p.add_argument("--cluster", choices=("slurm", "pbs"), default=None,
                   help="submit --jobs worker jobs to SLURM or PBS (dask-jobqueue; site settings "
                        "from cluster/jobqueue.yaml or your Dask config); all are cancelled "
                        "when the command ends")
    p.add_argument("--jobs", type=int, default=None, metavar="N",
                   help="worker jobs for --cluster (default 1)")
    p.add_argument("--verbose", action="store_true",
                   help="show Dask's log lines and full tracebacks")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = _Parser(
        prog="guideloom",
        description="Croissant/HDF5 experiments to training-ready arrays, on Dask.",
    )
    parser.add_argument("--version", action="version", version=f"guideloom {__version__}")
    parser.add_argument("--token", default=None, help=argparse.SUPPRESS)  # rddac's place for it
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run a workflow file (an export job)")
    run.add_argument("workflow", type=Path,
                     help="the workflow file (.toml), or the name of a shipped workflow "
                          "(see guideloom workflows)")
    _add_cluster_options(run)
    run.add_argument("--dry-run", action="store_true",
                     help="print the plan (experiments, partitions, arrays) and write nothing")
    run.add_argument("--overwrite", action="store_true", help="replace a complete export")
    run.add_argument("--update", action="store_true",
                     help="update the complete export at the output path: read only the "
                          "experiments added or changed since it was written, carry the "
                          "other rows (with --dry-run: print what it would do)")
    run.add_argument("--code-version", default=None, metavar="VERSION",
                     help="the version of the transforms' code, named by you: replaces their "
                          "automatic code identity (needed to update with transforms that "
                          "read the environment, files or the clock); overrides the file's "
                          "[transforms] code_version (docs/updating.md)")
    run.add_argument("--data-dir", default=None,
                     help="use this data directory instead of the file's dataset.data_dir "
                          "(a path, an https:// or s3:// URL of a release, or its DOI)")
    run.add_argument("--server", default=None, metavar="URL",
                     help="Dataverse server a DOI --data-dir is resolved on (default "
                          "$GUIDELOOM_DATAVERSE_URL, else DaRUS)")
    run.add_argument("--token", default=argparse.SUPPRESS,
                     help="Dataverse API token for a DOI --data-dir (better: the "
                          "GUIDELOOM_DATAVERSE_TOKEN environment variable)")
    run.add_argument("--storage-option", action="append", type=_storage_option, default=None,
                     metavar="KEY=VALUE",
                     help="an fsspec storage option for a remote --data-dir (repeatable; "
                          "VALUE is JSON or a string; a dotted KEY nests: "
                          "client_kwargs.endpoint_url=http://...); see docs/remote.md")
    _add_trust_root(run)
    run.add_argument("--output", default=None,
                     help="write here instead of the file's output.path (path or zarr URL)")
    run.add_argument("--verify-crc", action="store_true",
                     help="check the CRC-32 of each stored zip member before its data is used "
                          "(one extra pass over each member; default: trust partial reads)")
    run.add_argument("--verify-inputs", action="store_true",
                     help="with --update: hash every carried experiment's input again and "
                          "compare it with the digest the export recorded (default: only "
                          "inputs whose size, times, inode or checksum changed)")
    run.add_argument("--all", action="store_true", dest="all_reasons",
                     help="with --update --dry-run: list every experiment's reason, not the "
                          "first 20")
    run.add_argument("--report", type=Path, default=None, metavar="FILE.html",
                     help="write a self-contained HTML run report there after the run "
                          "(phases, task stream per worker, throughput, skipped experiments)")
    run.set_defaults(func=_cmd_run)

    workflows = sub.add_parser("workflows", help="list the workflows shipped with guideloom")
    workflows.add_argument("--paths", action="store_true", help="show where each file is")
    workflows.set_defaults(func=_cmd_workflows)

    inspect = sub.add_parser("inspect", help="describe an export (npy, npz, zarr, storage)")
    inspect.add_argument("export", help="export directory, zarr store path or URL")
    inspect.set_defaults(func=_cmd_inspect)

    verify = sub.add_parser("verify", help="read a whole export and check it against the "
                                           "checksums recorded when it was written")
    verify.add_argument("export", help="export directory, zarr store path or URL")
    verify.set_defaults(func=_cmd_verify)

    status = sub.add_parser("status", help="progress of a running or interrupted export")
    status.add_argument("path", help="the export's target or its .NAME.guideloom-staging dir")
    status.set_defaults(func=_cmd_status)

    demo_cmd = sub.add_parser("demo", help="make demo data, export it on the embedded local "
                                           "cluster (dashboard URL printed), read it back and "
                                           "compare timings")
    demo_cmd.add_argument("--data-dir", type=Path, default=Path("demo-data"),
                          help="where the demo data goes (default ./demo-data)")
    demo_cmd.add_argument("--n", type=int, default=36, help="experiments (default 36)")
    demo_cmd.add_argument("--output", default=None,
                          help="export target (default DATA_DIR/exports/force-signals)")
    demo_cmd.add_argument("--workflow", type=Path, default=None,
                          help=f"workflow to run (default the shipped {DEMO_WORKFLOW})")
    demo_cmd.add_argument("--keep-dashboard", type=_seconds, nargs="?", const=math.inf,
                          default=0.0, metavar="SECONDS",
                          help="after the export, keep the cluster and its dashboard open for "
                               "SECONDS (no value: until Ctrl-C)")
    _add_cluster_options(demo_cmd, default="local, the embedded cluster with its dashboard")
    demo_cmd.set_defaults(func=_cmd_demo)

    info = sub.add_parser("info", help="the published dataset on DaRUS: versions, files, "
                                       "changes")
    _release_options(info)
    info.set_defaults(func=_cmd_info)

    from guideloom.net.dataverse import DEFAULT_VERSION
    from guideloom.releases.release import DEFAULT_OUT

    dl = sub.add_parser("download", help="download the published release (or --small, the "
                                         "sample) into rddac's layout, verified and resumable")
    dl.add_argument("version", nargs="?", default=DEFAULT_VERSION,
                    help=f"dataset version (default {DEFAULT_VERSION}; also :latest-published, "
                         ":draft with a token)")
    dl.add_argument("--version", dest="version_option", default=None, metavar="VERSION",
                    help="the same as the positional VERSION")
    dl.add_argument("--files", nargs="+", metavar="FILE", help="only these file names")
    dl.add_argument("--small", action="store_true",
                    help="the sample bundle: process_parameters.csv, metadata.json, sample.zip")
    dl.add_argument("--out", type=Path, default=Path(DEFAULT_OUT), metavar="PATH",
                    help=f"output directory (default ./{DEFAULT_OUT})")
    dl.add_argument("--extract", action="store_true",
                    help="extract the zips to OUT/h5/ afterwards (as guideloom extract)")
    dl.add_argument("--remove-zip", action="store_true",
                    help="delete each zip once extracted and verified (with --extract)")
    dl.add_argument("--no-sim", action="store_true",
                    help="skip the DDACS simulations (doi:10.18419/DARUS-4801, rddac.zip) a full "
                         "download brings into OUT/simulation/ for `preprocess pointcloud`")
    dl.add_argument("-y", "--yes", action="store_true", help="do not ask before downloading")
    dl.add_argument("-q", "--quiet", action="store_true",
                    help="no output and no progress bar; implies --yes (errors still on stderr)")
    dl.add_argument("--parallel", type=int, default=4, metavar="N",
                    help="files fetched at once (default 4)")
    dl.add_argument("--private", action="store_true",
                    help="files readable by you only (mode 0600); default: the mode your umask "
                         "gives, as for every file you write (colleagues can read a shared "
                         "copy)")
    dl.add_argument("--scheduler", type=_scheduler, default=None,
                    help="where --extract runs: sync (default), local, local:N or tcp://HOST:PORT")
    _release_options(dl)
    dl.set_defaults(func=_cmd_download)

    serve = sub.add_parser("serve-release", help="serve a release folder as a Dataverse "
                                                  "dataset on 127.0.0.1, to try info, download "
                                                  "and DOI runs offline")
    serve.add_argument("dir", help="the release folder: metadata.json, process_parameters.csv "
                                   "and the zips (at the top or in h5/), as download writes")
    serve.add_argument("--demo", action="store_true",
                       help="first write a demo release there (make-demo-data and a "
                            "sample.zip holding the published sample's 18 experiment ids, "
                            "0, 500, 1002, ..., 8500, as the tutorials use)")
    serve.add_argument("--n", type=_count, default=12,
                       help="experiments 0..N-1 of --demo besides the sample's (default 12)")
    serve.add_argument("--port", type=_count, default=0,
                       help="port on 127.0.0.1 (default: a free one, printed)")
    serve.add_argument("--rate", type=_positive, default=None, metavar="BYTES_PER_S",
                       help="send bodies at most this fast, to stop a download halfway and "
                            "resume it (default: as fast as it goes)")
    from guideloom.net.dataverse import RDDAC_DOI

    serve.add_argument("--doi", default=RDDAC_DOI,
                       help=f"the persistent id it answers to (default {RDDAC_DOI})")
    serve.set_defaults(func=_cmd_serve_release)

    extract = sub.add_parser("extract", help="turn the zipped layout into loose h5/<id>.h5 "
                                             "files, in parallel, atomically per file")
    extract.add_argument("data_dir", type=str,
                         help="the dataset directory: its zip archives are extracted to "
                              "DATA_DIR/h5/")
    extract.add_argument("--manifest", type=Path, default=None,
                         help="manifest path (default DATA_DIR/metadata.json)")
    extract.add_argument("--remove-zip", action="store_true",
                         help="delete each archive once all its members are loose and verified")
    extract.add_argument("--overwrite", action="store_true",
                         help="extract members even when a loose file already exists")
    _add_trust_root(extract)
    _add_cluster_options(extract, workflow=False)
    extract.set_defaults(func=_cmd_extract)

    pre = sub.add_parser("preprocess", help="rddac's reference cleaning of the raw "
                                            "measurements into DATA_DIR/processed/<id>.h5")
    pre.add_argument("modalities", nargs="*", metavar="MODALITY",
                     help="any of force, sheet, oil, pointcloud (default: all)")
    pre.add_argument("--data-dir", default="./data", metavar="PATH",
                     help="the raw dataset: a folder, an https:// or s3:// URL or a DOI "
                          "(default ./data)")
    pre.add_argument("--out", default=None, metavar="PATH",
                     help="the processed folder (default DATA_DIR/processed)")
    pre.add_argument("--ids", default=None, metavar="IDS", help="ids such as 0-999 or 42,1035")
    pre.add_argument("--split", choices=("train", "val", "test"), default=None,
                     help="only the experiments of one predefined split")
    pre.add_argument("--workers", type=int, default=None, metavar="N",
                     help="N worker processes (a local cluster; 1: in-process); default: "
                          "in-process for small jobs, a local cluster when it pays")
    pre.add_argument("--overwrite", action="store_true",
                     help="recompute what the processed files already hold")
    pre.add_argument("--config", default=None, metavar="TOML",
                     help="processing parameters over the defaults (rddac's keys; see "
                          "--dump-config)")
    pre.add_argument("--dump-config", action="store_true",
                     help="print the default processing parameters as TOML and exit")
    pre.add_argument("--rebuild-models", action="store_true",
                     help="retrain the cached fin classifier (pointcloud)")
    pre.add_argument("--labels", default=None, metavar="DIR",
                     help="the fin classifier's labels (pointcloud; default: rddac's "
                          "published labels)")
    pre.add_argument("--report", type=Path, default=None, metavar="FILE",
                     help="write an HTML run report (phases, placement, tasks, failures)")
    pre.add_argument("-y", "--yes", action="store_true", help="do not ask before starting")
    pre.add_argument("-q", "--quiet", action="store_true",
                     help="no output or progress bar; implies --yes")
    _add_cluster_options(pre, workflow=False)
    pre.set_defaults(func=_cmd_preprocess)

    demo = sub.add_parser("make-demo-data", help="write a deterministic RDDAC-shaped dataset")
    demo.add_argument("data_dir", type=Path,
                      help="directory to write (created; one make-demo-data made before is "
                           "regenerated)")
    demo.add_argument("--n", type=int, default=36, help="number of experiments (default 36)")
    demo.add_argument("--scan-shape", type=int, nargs=2, default=(100, 160), metavar=("Y", "X"),
                      help="scan grid; the real one is 2000 3200 (default 100 160)")
    demo.add_argument("--layout", choices=("zip", "loose"), default="zip",
                      help="zip: concave.zip and convex.zip holding 0042.h5 members, as "
                           "published (default); loose: h5/0042.h5 files")
    demo.add_argument("--seed", type=int, default=0,
                      help="seed of every random draw; the same arguments give the same data "
                           "(default 0)")
    demo.add_argument("--force", action="store_true",
                      help="write into a non-empty directory that make-demo-data did not make")
    demo.set_defaults(func=_cmd_make_demo_data)

    views = sub.add_parser("views", help="list views with field shapes and dtypes")
    views.add_argument("data_dir", type=str,
                       help="the data directory, or an https:// or s3:// URL or DOI of a release")
    views.add_argument("--manifest", type=Path, default=None,
                       help="manifest path (default DATA_DIR/metadata.json)")
    views.add_argument("--server", default=None, metavar="URL",
                       help="Dataverse server a DOI is resolved on (default "
                            "$GUIDELOOM_DATAVERSE_URL, else DaRUS)")
    views.add_argument("--token", default=argparse.SUPPRESS,
                       help="Dataverse API token for a DOI (better: the "
                            "GUIDELOOM_DATAVERSE_TOKEN environment variable)")
    _add_trust_root(views)
    views.set_defaults(func=_cmd_views)

    cache_cmd = sub.add_parser("cache", help="the on-disk cache of what remote reads learnt "
                                             "(archive directories, HDF5 metadata)")
    cache_sub = cache_cmd.add_subparsers(dest="cache_command", required=True, metavar="ACTION")
    clear = cache_sub.add_parser("clear", help="remove every entry (they are learnt again "
                                               "on the next remote read)")
    clear.set_defaults(func=_cmd_cache_clear)
    return parser


def _add_trust_root(parser: argparse.ArgumentParser) -> None:
    """``--trust-root DIR`` (repeatable): links of other users into DIR are followed."""
    parser.add_argument("--trust-root", action="append", default=None, metavar="DIR",
                        help="follow symbolic links of the data directory that other users "
                             "made when they lead into DIR (repeatable; your own links are "
                             "followed anyway; adds to $GUIDELOOM_TRUSTED_ROOTS)")


def _trust_roots(args: argparse.Namespace) -> None:
    """Add ``--trust-root`` folders to the configuration's ``trusted_roots``."""
    from guideloom import config

    given = getattr(args, "trust_root", None)
    if given:
        kept = (config.get("trusted_roots") or "").split(os.pathsep)
        config.set(trusted_roots=[*filter(None, kept), *(os.path.abspath(d) for d in given)])


def _exit_interrupted() -> NoReturn:
    """Ctrl-C: kill our workers, print one line, and leave now (exit 130).

    The process ends with ``os._exit`` so that no graceful shutdown of Dask (which waits for
    connections and logs while it does) delays the exit or prints anything; staged partitions
    are already on disk for a resume.
    """
    from guideloom.cluster.embedded import abandon_cluster

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not interrupt this
    abandon_cluster()
    print("guideloom: interrupted", file=sys.stderr)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(EXIT_INTERRUPTED)


class _StderrLines(logging.Handler):
    """Each guideloom log record as one line on the current ``sys.stderr`` (what the library
    printed before it logged): the command line's only handler."""

    terminal = True  # records reach stderr: the library prints no line of its own beside them

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except Exception:
            self.handleError(record)


@contextmanager
def _log_lines() -> Iterator[None]:
    """Print the ``guideloom`` loggers' records at ``log_level`` (INFO) and above while the
    command runs; the logger's level and handlers are as before afterwards."""
    from guideloom import config

    handler = _StderrLines()
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger("guideloom")
    level = root.level
    root.setLevel(config.get("log_level"))
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def _subparser(parser: argparse.ArgumentParser, command: str | None
               ) -> argparse.ArgumentParser:
    """The parser of ``command`` (``parser`` itself when there is none)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            return action.choices[command]
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (Ctrl-C exits the process with 130)."""
    try:
        with _log_lines():
            return _main(argv)
    except KeyboardInterrupt:
        _exit_interrupted()


def _main(argv: Sequence[str] | None) -> int:
    parser = build_parser()
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:  # the hint names the subcommand's help, which lists its options
            _subparser(parser, getattr(args, "command", None)).error(
                f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # --help, or a usage error already printed as one line
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    if getattr(args, "command", None) == "demo":
        args.dashboard = args.dashboard or DEFAULT_DASHBOARD
    verbose = getattr(args, "verbose", False)
    func: Callable[[argparse.Namespace], int] = args.func
    from guideloom.cluster import dask_logs

    try:
        from guideloom import config

        config.check_environment()  # a bad GUIDELOOM_* value fails now, naming the variable
        _trust_roots(args)
        if verbose:
            return func(args)
        # errors reach the user as one line; Dask's own logs only with --verbose (importing
        # distributed later sets its levels again: the placement quiets them once more)
        with dask_logs.quieted(import_distributed=False):
            return func(args)
    except BrokenPipeError:  # `guideloom inspect X | head -1`: the reader has gone
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except JobFailedError as exc:
        print(f"guideloom: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_FAILED
    except PermissionError as exc:  # a file we may not read or write: named, never "damaged"
        named = permission_denied(exc)
        text = " ".join((named.strerror or str(named)).split())
        print(f"guideloom: error: {text}", file=sys.stderr)
        return EXIT_FAILED
    except (UsageError, FileNotFoundError, FileExistsError, ValueError) as exc:
        print(f"guideloom: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except GuideloomError as exc:
        print(f"guideloom: error: {_one_line(exc)}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        if verbose:
            raise
        print(f"guideloom: error: {type(exc).__name__}: {_one_line(exc)}", file=sys.stderr)
        return EXIT_FAILED
