"""The ``guideloom`` subcommands: one ``cmd_*`` function per subcommand, on the parsed arguments."""

from __future__ import annotations

import argparse
import contextlib
import logging
import math
import os
import shlex
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from guideloom.cli.output import (
    EXIT_FAILED,
    download_refusal,
    dtype_name,
    human_bytes,
    one_line,
    options_text,
    print_fields,
    print_plan,
    print_summary,
    show_plan,
    warnings_as_lines,
)
from guideloom.cluster.security import DEFAULT_DASHBOARD
from guideloom.errors import JobFailedError, UsageError

logger = logging.getLogger(__name__)
DEMO_WORKFLOW = "force_signals"


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
def cmd_run(args: argparse.Namespace) -> int:
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
        with warnings_as_lines(), wf.trusting():
            print_plan(wf, spec, scheduler, all_reasons=args.all_reasons)
        return 0
    with wf.trusting():  # the file's dataset.trusted_roots, while the job reads the data
        result, seconds, resumed_exps = _execute(spec, scheduler, dashboard, args.verbose,
                                                 batch, report=args.report)
    print_summary(result, seconds, resumed_exps)
    return 0


def _run_preprocess_step(wf: Any, scheduler: str | None) -> None:
    """A workflow's ``[preprocess]`` step, before its export (which reads its output)."""
    from guideloom.preprocess.job import preprocess

    step = wf.preprocess
    with warnings_as_lines(), wf.trusting():
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
    with warnings_as_lines():
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
            raise JobFailedError(f"job failed: {one_line(exc)}{hint}") from exc
    return result, time.perf_counter() - t0, result.resumed_experiments


# --- inspect and status -------------------------------------------------------------------
def _status(path: str):
    from guideloom.errors import NoJobError
    from guideloom.export.status import job_status

    try:
        return job_status(path)
    except NoJobError as exc:
        raise UsageError(str(exc)) from None


def cmd_status(args: argparse.Namespace) -> int:
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


def _inspect_rddac(path: str) -> int:
    """An rddac/ddacs export folder (no ``export.json``): what ``load_export`` reads from it,
    with its warning; its shapes and row counts checked as ``load_export`` checks them."""
    from guideloom.errors import IncompleteExportError
    from guideloom.reader import load_export

    print(f"export: {path}")
    try:
        with warnings_as_lines():
            m = load_export(path).manifest
    except IncompleteExportError as exc:  # as a damaged guideloom export: named, exit 1
        print(f"status: damaged: {one_line(exc)}")
        return EXIT_FAILED
    print(f"kind: {m['kind']} (written by {m.get('written_by')})")
    print(f"records: {m['count']}")
    print_fields(m)
    print(f"sim_ids: dtype {dtype_name(m['sim_ids_dtype'])}")
    print("status: unverified: no export.json, so no checksums, view, filters or transforms "
          "are recorded; shapes and row counts checked")
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
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
    print(f"kind: {m['kind']}" + options_text(m.get("options", {})))
    print(f"view: {m['view']} ({', '.join(f['alias'] for f in m.get('view_fields', []))})")
    print(f"records: {m['count']}")
    print_fields(m)
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


def cmd_verify(args: argparse.Namespace) -> int:
    """Exit 0 with one line when intact; 1 naming the file and row when damaged (or when no
    checksums were recorded: nothing proves it intact); 2 when the path is not an export."""
    from guideloom.errors import CorruptExportError, IncompleteExportError, UnverifiableExportError
    from guideloom.reader import open_sealed

    try:
        report = open_sealed(args.export).verify()  # never unpickles: verifying trusts nothing
    except (CorruptExportError, UnverifiableExportError) as exc:
        print(f"guideloom: error: {one_line(exc)}", file=sys.stderr)
        return EXIT_FAILED
    except IncompleteExportError as exc:  # unfinished, foreign: not an export to verify
        raise UsageError(str(exc)) from None
    print(report.line())
    return 0


# --- demo ---------------------------------------------------------------------------------
def cmd_demo(args: argparse.Namespace) -> int:
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
    print_summary(result, seconds, 0)

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
    with contextlib.suppress(KeyboardInterrupt):
        threading.Event().wait(None if math.isinf(seconds) else seconds)
    print("dashboard closed", flush=True)


def cmd_info(args: argparse.Namespace) -> int:
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
        print(f"{number:9s} {state:10s} {date:10s} {len(names):6d} {human_bytes(size):>10s}  "
              f"{change}")
    print("download one with: guideloom download --version VERSION (--small for the sample)")
    return 0


def cmd_download(args: argparse.Namespace) -> int:
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
        show_plan(plan)
        if sims is not None:
            print("the matching DDACS simulations (skip them with --no-sim):")
            show_plan(sims)
    fetching = bool(plan.to_fetch or (sims is not None and sims.to_fetch))
    refusal = None if not fetching or args.yes or quiet else download_refusal(plan, sims)
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
                  f"({human_bytes(report.bytes_fetched)}) in {report.seconds:.1f} s into "
                  f"{one.out}; {len(report.present)} were already present and verified")
            if report.extract is not None:
                print(f"extracted {len(report.extract.extracted)} experiments to "
                      f"{plan.out / 'h5'}")
    return 0


def cmd_serve_release(args: argparse.Namespace) -> int:
    import threading

    from guideloom.releases.server import ReleaseServer, make_demo_release

    root = Path(args.dir)
    if args.demo:
        make_demo_release(root, n=args.n)
    server = ReleaseServer(root, doi=args.doi, port=args.port, rate=args.rate)
    size = sum(f.size for f in server.files)
    url = server.url
    print(f"serving {root} ({len(server.files)} files, {human_bytes(size)}) as {args.doi} at "
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
def cmd_extract(args: argparse.Namespace) -> int:
    from guideloom.export.extract import ExtractError, extract_zips

    try:
        with warnings_as_lines():
            report = extract_zips(args.data_dir, source=args.manifest,
                                  client=_client_choice(args)[0],
                                  remove_zip=args.remove_zip, overwrite=args.overwrite,
                                  show_progress=True)
    except ExtractError as exc:
        raise JobFailedError(one_line(exc)) from exc
    h5 = Path(args.data_dir) / "h5"
    print(f"extracted {len(report.extracted)} experiments ({human_bytes(report.bytes)}) to "
          f"{h5} in {report.seconds:.2f} s; {len(report.skipped_existing)} were already loose")
    if report.removed_archives:
        print(f"removed archives: {', '.join(Path(a).name for a in report.removed_archives)}")
    for archive, reason in report.kept_archives.items():
        print(f"kept archive {Path(archive).name}: {reason}")
    if report.cleaned_tmp:
        print(f"removed {len(report.cleaned_tmp)} temporary files of an interrupted run")
    return 0


# --- preprocess ---------------------------------------------------------------------------
def cmd_preprocess(args: argparse.Namespace) -> int:
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
    with warnings_as_lines():
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
def cmd_workflows(args: argparse.Namespace) -> int:
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


def cmd_cache_clear(args: argparse.Namespace) -> int:
    from guideloom.read.roots import clear_remote_cache

    folder, count, size = clear_remote_cache()
    print(f"removed {count} entr{'y' if count == 1 else 'ies'} ({size / 1024:.0f} KiB) from "
          f"{folder}")
    return 0


# --- existing commands --------------------------------------------------------------------
def cmd_make_demo_data(args: argparse.Namespace) -> int:
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


def cmd_views(args: argparse.Namespace) -> int:
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


def trust_roots(args: argparse.Namespace) -> None:
    """Add ``--trust-root`` folders to the configuration's ``trusted_roots``."""
    from guideloom import config

    given = getattr(args, "trust_root", None)
    if given:
        kept = (config.get("trusted_roots") or "").split(os.pathsep)
        config.set(trusted_roots=[*filter(None, kept), *(os.path.abspath(d) for d in given)])
