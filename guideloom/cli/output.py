"""What the ``guideloom`` command prints: one-line errors, sizes, plans, summaries and the
library's log records on stderr; and its exit codes."""

from __future__ import annotations

import logging
import math
import sys
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

EXIT_USAGE = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130


# --- helpers ------------------------------------------------------------------------------
def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def dtype_name(text: str) -> str:
    import numpy as np

    try:
        return np.dtype(text).name
    except TypeError:
        return text


@contextmanager
def warnings_as_lines() -> Iterator[None]:
    """Print warnings raised inside as ``guideloom: warning: ...`` lines (one each)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            seen = set()
            for w in caught:
                line = one_line(w.message)  # type: ignore[arg-type]
                if line not in seen:
                    seen.add(line)
                    print(f"guideloom: warning: {line}", file=sys.stderr)


def print_summary(result, seconds: float, resumed_exps: int) -> None:
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


def print_plan(wf, spec, scheduler: str | None, all_reasons: bool = False) -> None:
    from guideloom.cluster.runtime import preview_placement
    from guideloom.export.partition import PROBE_ATTEMPTS, probe_schema
    from guideloom.export.plan import plan_job
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
        print(f"  {alias:28s} {shape:24s} {dtype_name(fs.dtype):10s} {human_bytes(nbytes)}")
    print(f"  {'sim_ids':28s} {(n,)!s:24s} {'int64':10s} {human_bytes(8 * n)}")
    total += 8 * n
    if variable:
        print(f"  ({spec.output}: shapes may vary per experiment; shown and sized from the first "
              "record)")
    approx = "about " if variable else ""
    print(f"total: {approx}{human_bytes(total)} uncompressed ({total} bytes)")


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


def print_fields(m: Mapping[str, Any]) -> None:
    print("fields:")
    for alias, fs in sorted(m["fields"].items()):
        shape = "variable shape" if fs["shape"] is None else f"shape {tuple(fs['shape'])}"
        dtype = dtype_name(fs["dtype"])
        if fs.get("dtypes"):  # records of different dtypes (npz)
            dtype += f" ({', '.join(dtype_name(d) for d in fs['dtypes'])})"
        print(f"  {alias:28s} {shape:22s} dtype {dtype}")


def options_text(options: Mapping[str, Any]) -> str:
    shown = ", ".join(f"{k}={v}" for k, v in sorted(options.items()))
    return f" ({shown})" if shown else ""


def download_refusal(plan: Any, sims: Any = None) -> str | None:
    """Ask before downloading; ``None`` when the user confirmed, else why nothing is fetched.

    Without a terminal on stdin (a script, a pipe, cron) nobody can answer: that is a refusal
    too, so a script without ``--yes`` fails instead of silently doing nothing.
    """
    if not sys.stdin.isatty():
        return "cannot ask for confirmation (stdin is not a terminal); pass --yes"
    count = len(plan.to_fetch) + (len(sims.to_fetch) if sims is not None else 0)
    size = plan.bytes_to_fetch + (sims.bytes_to_fetch if sims is not None else 0)
    try:
        answer = input(f"download {count} file(s), {human_bytes(size)}, to {plan.out}? [y/N] ")
    except EOFError:
        return "not confirmed (no input); pass --yes to download without asking"
    if answer.strip().lower() in ("y", "yes"):
        return None
    return "download declined"


def show_plan(plan: Any) -> None:
    print(f"{plan.title or plan.doi} (version {plan.version}) from {plan.server}")
    for f in plan.files:
        state = "present" if f in plan.present else "to fetch"
        print(f"  {f.relpath:40s} {human_bytes(f.size):>10s}  {state}")
    print(f"{len(plan.to_fetch)} of {len(plan.files)} file(s) to fetch, "
          f"{human_bytes(plan.bytes_to_fetch)}, into {plan.out.resolve()}")


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
def log_lines() -> Iterator[None]:
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
