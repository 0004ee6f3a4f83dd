"""The Dask runtime of guideloom's jobs, in one module: where a job runs (client choice and the
in-process/cluster decision), how it is split (partition sizing), how its tasks are named and fanned
out (with a progress bar), and the dashboard default.

``client`` arguments accepted everywhere (Python API, CLI ``--scheduler``, workflow files):

* ``None`` (default): the active ``distributed.Client`` if there is one; otherwise in-process
  when the planned work is small, and on the embedded local cluster
  (:mod:`guideloom.cluster.embedded`) when starting it pays;
* ``"sync"``: in-process, always;
* ``"local"`` / ``"local:N"``: the embedded local cluster (N workers), always;
* ``"fork"`` / ``"fork:N"``: an export's partitions in N processes forked from this one (one per
  core by default; Linux, local data; any format; see :mod:`guideloom.cluster.forked`), else
  in-process, the placement line saying why;
* ``"tls://host:port"``: a running ``dask scheduler`` that requires TLS, e.g. one started by
  ``cluster/local.py``; its credentials are found by
  :func:`guideloom.cluster.security.find_security` (a scheduler file named with
  ``--scheduler-file``, Dask's TLS configuration, or a guideloom state directory);
* ``"tcp://host:port"``: a running plain-TCP ``dask scheduler``;
* ``"slurm:N"`` / ``"pbs:N"``: N worker jobs submitted through dask-jobqueue for this job, with a
  scheduler in this process; every job is cancelled when the job ends
  (:mod:`guideloom.cluster.jobqueue`);
* a ``distributed.Client``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import math
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from guideloom import config, fastread
from guideloom.cluster import announce, dask_logs, embedded, security
from guideloom.cluster import page as page_module
from guideloom.errors import NoWorkersError, SchedulerUnreachableError

SYNC = "sync"
LOCAL = "local"
FORK = "fork"
FORKED = "forked"  # the placement mode of partitions run in processes forked from the driver
DEFAULT_DASHBOARD = security.DEFAULT_DASHBOARD
CLIENT_PATTERN = re.compile(
    r"^(local(:[1-9][0-9]*)?|fork(:[1-9][0-9]*)?|sync|(tcp|tls)://[^\s/:]+:[0-9]+"
    r"|(slurm|pbs):[1-9][0-9]*)$")
BATCH_KINDS = ("slurm", "pbs")
SYNC_REASON = "client='sync'"
FINISHING_REASON = "only the finalize of an interrupted run is left"

logger = logging.getLogger(__name__)

MAX_PARTITION = 64
MIN_TASK_S = 0.1  # estimated work below which records are not split into more tasks
# With one worker there is nothing to balance: partitions only bound the work a crash can lose
# and how often the progress bar moves, and each costs a few fsyncs; so they are larger.
MAX_SERIAL_PARTITION = 256
# Measured on a shared 2-core machine (benchmarks/export.py): a cluster of two workers costs a
# job 1.2 s when the machine is quiet and 1.9-3.1 s when it is loaded (start until both workers
# answer, plus the first task's imports on cold workers, plus close); a tiny export on a warm
# cluster takes 23-61 ms longer than in-process. The middle of that range:
CLUSTER_START_S = 2.0
WARM_DISPATCH_S = 0.05
# A reachable scheduler answers in milliseconds; Dask's default wait is 30 s (and it retries a
# refused port until then), which reads as a hang when no scheduler runs.
SCHEDULER_CONNECT_S = 3.0

ClientLike = Any  # distributed.Client | str | None
_printed: set[str] = set()


@dataclass(frozen=True)
class Placement:
    """Where a job runs and why.

    Attributes:
        client: The ``distributed.Client``, or ``None`` for in-process.
        mode: ``"in-process"``, ``"forked"`` (processes forked from this one, ``client`` is
            ``None``), ``"local-cluster"``, ``"client"`` (a given or active Client) or
            ``"scheduler"`` (an address).
        workers: Workers the job can use (1 in-process).
        reason: One line saying why, for the terminal and ``export.json``.
        cluster_start_s: Seconds spent starting the embedded local cluster for this job
            (``None``: none was started); the run reports it as its own phase.
        slots: Tasks the cluster runs at once per host (:func:`task_slots_by_host`), when
            the decision asked the scheduler already (``None``: ask when the tasks start).
    """

    client: Any
    mode: str
    workers: int
    reason: str
    cluster_start_s: float | None = None
    slots: dict[str, int] | None = None

    def to_json(self) -> dict[str, Any]:
        """The placement as recorded in ``export.json``."""
        return {"mode": self.mode, "workers": self.workers, "reason": self.reason}


@dataclass(frozen=True)
class ClientText:
    """A ``client`` given as text, parsed once: what :func:`placement` and
    :func:`preview_placement` both dispatch on.

    Attributes:
        text: The text as given.
        kind: ``"sync"``, ``"fork"``, ``"local"``, ``"slurm"``, ``"pbs"`` or ``"scheduler"``
            (a ``tcp://`` or ``tls://`` address).
        count: The ``N`` of ``local:N``, ``fork:N``, ``slurm:N`` or ``pbs:N`` (``None``: not
            given).
    """

    text: str
    kind: str
    count: int | None = None


def parse_client_text(text: str) -> ClientText:
    """``text`` parsed: ``sync``, ``local[:N]``, ``fork[:N]``, ``tcp://HOST:PORT``,
    ``tls://HOST:PORT``, ``slurm:N`` or ``pbs:N``.

    Raises:
        ValueError: Anything else.
    """
    if not CLIENT_PATTERN.match(text):
        raise ValueError("expected local, local:N, fork, fork:N, sync, tls://HOST:PORT, "
                         f"tcp://HOST:PORT, slurm:N or pbs:N, got {text!r}")
    if "://" in text:
        return ClientText(text, "scheduler")
    kind, _, count = text.partition(":")
    return ClientText(text, kind, int(count) if count else None)


def check_client_text(text: str) -> str:
    """``text`` if :func:`parse_client_text` accepts it.

    Raises:
        ValueError: Anything else.
    """
    parse_client_text(text)
    return text


def connect_scheduler(address: str) -> Any:
    """A ``distributed.Client`` of the scheduler at ``address`` (``tls://`` or ``tcp://``).

    A ``tls://`` scheduler's credentials come from
    :func:`~guideloom.cluster.security.find_security`.

    Raises:
        SchedulerCredentialsError: A ``tls://`` address whose credentials are nowhere.
        SchedulerUnreachableError: No scheduler answered within :data:`SCHEDULER_CONNECT_S`;
            the message says how to start one or to use the local cluster instead.
    """
    from distributed import Client

    from guideloom.cluster.security import SCHEME, find_security

    credentials = find_security(address)
    try:
        return Client(address, timeout=SCHEDULER_CONNECT_S, set_as_default=False,
                      security=credentials)
    except OSError as exc:  # distributed raises OSError (TimeoutError) when nobody answers
        if address.startswith(SCHEME):
            raise SchedulerUnreachableError(
                f"no Dask scheduler accepted a TLS connection at {address} within "
                f"{SCHEDULER_CONNECT_S:.0f} s with the credentials found for it: start one with "
                "`python3 cluster/local.py start` (it prints the address and how to connect), "
                "or use the local cluster instead (--scheduler local, client='local')") from exc
        port = address.rsplit(":", 1)[-1]
        raise SchedulerUnreachableError(
            f"no Dask scheduler answered at {address} within {SCHEDULER_CONNECT_S:.0f} s: "
            f"start one there with `dask scheduler --port {port}` (and workers with "
            f"`dask worker {address}`), or use the local cluster instead "
            "(--scheduler local, client='local')") from exc


def _first_worker(remote: Any, address: str) -> None:
    """Wait for a worker of the scheduler at ``address`` as long as Dask would have waited
    for one (``distributed.comm.timeouts.connect``, 30 s by default).

    Raises:
        NoWorkersError: None came; the message says how to start workers.
    """
    import dask.config
    from dask.utils import parse_timedelta

    wait = parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), "s")
    try:
        remote.wait_for_workers(1, timeout=wait)
    except TimeoutError as exc:
        raise NoWorkersError(
            f"the Dask scheduler at {address} has no workers (waited {wait:g} s): start them "
            f"with `dask worker {address}`, or use the local cluster instead "
            "(--scheduler local, client='local')") from exc


def active_client() -> Any:
    """The active ``distributed.Client``, or ``None`` (never imports distributed itself)."""
    if "distributed" not in sys.modules:
        return None
    from distributed import Client

    try:
        return Client.current()
    except ValueError:
        return None


def worker_count(client: Any) -> int:
    """Number of workers behind ``client`` (1 for in-process runs)."""
    return workers_and_slots(client)[0]


def workers_and_slots(client: Any) -> tuple[int, dict[str, int]]:
    """The number of workers behind ``client`` (1 for in-process runs) and
    :func:`task_slots_by_host`, from one question to the scheduler."""
    if client is None:
        return 1, {}
    workers = client.scheduler_info(n_workers=-1).get("workers", {})
    return max(1, len(workers)), _slots(workers)


def default_partition_size(n: int, workers: int, seconds_per_item: float | None = None,
                           dispatch_free: bool = False) -> int:
    """Items per task: about four tasks per worker, at most :data:`MAX_PARTITION`
    (:data:`MAX_SERIAL_PARTITION` with one worker, or with ``dispatch_free`` workers: processes
    forked from the driver, which pay no round trip per task and no work stealing to feed).

    With ``seconds_per_item`` (the estimate) and several workers, a task holds at least
    :data:`MIN_TASK_S` of work while every worker still gets one: each task pays a round trip to
    a worker and the fsync of its files, which would outweigh the work of a few small records.
    In-process partitions pay no round trip and stay small (finer resume after a crash).
    """
    cap = MAX_SERIAL_PARTITION if workers <= 1 or dispatch_free else MAX_PARTITION
    size = math.ceil(n / max(1, 4 * workers))
    per_item = seconds_per_item if seconds_per_item is not None and seconds_per_item > 0 else 0.0
    timed = per_item > 0
    if timed and workers > 1:
        size = max(size, min(math.ceil(MIN_TASK_S / per_item),
                             math.ceil(n / max(1, workers))))
    size = max(1, min(cap, size))
    if workers <= 1 or n <= size:
        return size
    # tasks of one size leave workers idle in the last round when their count is not a multiple
    # of the workers (21 records in tasks of 3 on 2 workers: 12 records on one, 9 on the other):
    # a somewhat smaller size may even the rounds out
    per_item = per_item if timed else 1.0
    smallest = max(math.ceil(size / 2), math.ceil(MIN_TASK_S / per_item) if timed else 1)
    return min(range(min(smallest, size), size + 1),
               key=lambda s: (_busiest_worker_s(n, s, workers, per_item), -s))


# An export's partitions follow from its data alone (the job identity includes them, so an
# interrupted export resumes on any placement): about TARGET_PARTITIONS of them (four per
# worker of a cluster of eight), each holding at least MIN_TASK_S of estimated work (a task's
# round trip and the fsync of its files would outweigh less) but none fewer than MIN_PARTITIONS
# (two workers both get one), at most MAX_TASK_S (a crash loses little; a large cluster's
# workers all get some) and at most MAX_SERIAL_PARTITION records.
TARGET_PARTITIONS = 32
MIN_PARTITIONS = 2
MAX_TASK_S = 2.0


def job_partition_size(n: int, seconds_per_item: float | None = None) -> int:
    """Items per partition of an export job of ``n`` records, from the data alone: the same
    for every placement (in-process, forked, the local cluster, a scheduler, batch jobs).

    ``seconds_per_item`` is the estimate from the data's metadata (see
    :func:`guideloom.export.plan.estimate_seconds`); the rule is in the comment above.
    """
    size = math.ceil(n / TARGET_PARTITIONS)
    if seconds_per_item is not None and seconds_per_item > 0:
        smallest = min(math.ceil(MIN_TASK_S / seconds_per_item), math.ceil(n / MIN_PARTITIONS))
        largest = max(1, math.floor(MAX_TASK_S / seconds_per_item))
        size = max(smallest, min(largest, size))
    return max(1, min(MAX_SERIAL_PARTITION, size))


TASK_OVERHEAD_S = 0.01  # a task's round trip to a worker and the fsync of its files


def _busiest_worker_s(n: int, size: int, workers: int, per_item: float) -> float:
    """Estimated seconds of the busiest of ``workers`` given ``n`` records in tasks of ``size``,
    handed out in order to whichever worker is free (round by round, the short task last)."""
    tasks = math.ceil(n / size)
    rounds = math.ceil(tasks / workers)
    in_last_round = tasks - (rounds - 1) * workers
    last = n - (tasks - 1) * size  # the short task, on a worker of the last round
    items = rounds * size if in_last_round >= 2 else (rounds - 1) * size + last
    return round(items * per_item + rounds * TASK_OVERHEAD_S, 9)


def _tasks_text(n: int) -> str:
    return f"{n} task{'s' * (n != 1)}"


def fork_problem() -> str | None:
    """Why an export's partitions cannot run in forked processes here, or ``None``."""
    from guideloom.cluster.forked import fork_problem as problem

    return problem()


def fork_workers(n_tasks: int) -> int:
    """Processes to fork for a job of ``n_tasks`` tasks: one per CPU this process may use."""
    return max(1, min(fastread.pool.usable_cpus(), n_tasks))


def choose_automatically(estimate_s: float, n_tasks: int,
                         in_process_tasks: int | None = None,
                         forkable: bool = False) -> tuple[str, str]:
    """``(mode, reason)`` for ``client=None`` with no active Client.

    The work runs in-process unless spreading it over the cores (in ``n_tasks`` tasks) saves
    more than the cluster costs: its start-up when none runs yet, a dispatch when one does.
    A job that saves too little for a cluster start but more than ``fork_start_s`` runs in
    processes forked from this one when it is ``forkable`` (an export of local data to a local
    target) and :func:`fork_problem` finds nothing against it.
    ``in_process_tasks`` is how many tasks the job has when it runs in-process, which the
    in-process reasons state (an extract job's partitions are sized for the workers that run
    them; an export's are the same everywhere and need no such count).
    """
    cores = embedded.default_worker_count()
    here = n_tasks if in_process_tasks is None else in_process_tasks
    work = f"about {estimate_s:.2f} s of work in {_tasks_text(here)}"
    if cores < 2 or n_tasks < 2:
        return "in-process", f"{work}; one core or one task: no cluster"
    saving = estimate_s * (1 - 1 / min(cores, n_tasks))
    spread = f"about {estimate_s:.2f} s of work in {_tasks_text(n_tasks)}"
    if embedded.running_cluster() is not None:
        if saving > config.get("warm_dispatch_s"):
            return "local-cluster", f"{spread}; reusing the running local cluster"
        return "in-process", f"{work}; too little to send to the running cluster"
    start_s = config.get("cluster_start_s")
    if saving > start_s:
        return "local-cluster", f"{spread}; starting a local cluster of {cores} workers pays"
    n = fork_workers(n_tasks)
    if forkable and n >= 2 and estimate_s * (1 - 1 / n) > config.get("fork_start_s"):
        problem = fork_problem()
        if problem is None:
            return FORKED, (f"{spread}; too little for a cluster (~{start_s:.0f} s to start): "
                            f"{n} processes forked from this one")
        work = f"{work}; not forked ({problem})"
    return "in-process", (f"{work}; starting a cluster (~{start_s:.0f} s) would not pay "
                          "(client='local' or --scheduler local forces one)")


def preview_placement(client: ClientLike, estimate_s: float, n_tasks: int,
                      in_process_tasks: int | None = None, forkable: bool = False,
                      finishing: bool = False) -> Placement:
    """Where :func:`placement` would run a job, decided the same way; starts nothing (a
    ``tcp://`` scheduler is asked for its worker count, a batch system is not asked)."""
    cores = embedded.default_worker_count()
    if finishing and (client is None or isinstance(client, str)):
        return Placement(None, "in-process", 1, FINISHING_REASON)
    if client is None:
        if active_client() is not None:
            return Placement(None, "client", worker_count(active_client()), "the active Client")
        mode, reason = choose_automatically(estimate_s, n_tasks, in_process_tasks, forkable)
        workers = {"in-process": 1, FORKED: fork_workers(n_tasks)}.get(mode, cores)
        return Placement(None, mode, workers, reason)
    if not isinstance(client, str):
        return Placement(None, "client", worker_count(client), "the given Client")
    parsed = parse_client_text(client)
    if parsed.kind == SYNC:
        return Placement(None, "in-process", 1, SYNC_REASON)
    if parsed.kind == FORK:
        return _forked(parsed, forkable)
    if parsed.kind == LOCAL:
        workers = parsed.count or cores
        running = embedded.running_cluster()
        reused = running is not None and running.n_workers == workers
        return Placement(None, "local-cluster", workers,
                         f"local cluster of {workers} workers "
                         f"({'reused' if reused else 'started when the job runs'})")
    if parsed.kind in BATCH_KINDS:
        jobs = int(parsed.count or 0)
        return Placement(None, parsed.kind, jobs, f"{jobs} {parsed.kind.upper()} worker jobs "
                                                  "(submitted when the job runs)")
    with connect_scheduler(client) as remote:
        workers = worker_count(remote)
    return Placement(None, "scheduler", workers, f"scheduler {client}")


@contextmanager
def placement(
    client: ClientLike = None,
    *,
    estimate_s: float | None = None,
    n_tasks: int = 1,
    dashboard_address: str | None = DEFAULT_DASHBOARD,
    quiet: bool = False,
    verbose: bool = False,
    batch_options: Mapping[str, Any] | None = None,
    in_process_tasks: int | None = None,
    forkable: bool = False,
    finishing: bool = False,
) -> Iterator[Placement]:
    """Decide where a job runs and yield the :class:`Placement` (connected while inside).

    This is the job's one placement decision, taken before anything of the job starts: the
    line it prints (and ``export.json``'s ``placement``) is where the job runs. A forced
    ``client="fork[:N]"`` that cannot fork here says why in that line and runs in-process.

    Args:
        client: See the module docstring.
        estimate_s: The job's estimated in-process seconds (used for ``client=None``).
        n_tasks: The number of tasks the job splits into on one worker per core.
        in_process_tasks: The number it splits into in-process (default ``n_tasks``): the
            placement line states this one when the job stays in-process.
        dashboard_address: Where the embedded cluster's dashboard listens (127.0.0.1 by
            default; a busy port is replaced by a free one); ``None`` disables it.
        quiet: Log neither the placement line nor the dashboard URL; on the embedded local
            cluster they are logged anyway, and ``quiet`` silences the one line printed on
            stderr when logging does not show them (:mod:`guideloom.cluster.announce`).
        verbose: Let Dask's own log lines through.
        batch_options: Keyword arguments for
            :func:`~guideloom.cluster.jobqueue.jobqueue_client` (``"slurm:N"``, ``"pbs:N"``).
        forkable: The job may run in processes forked from this one (an export of local data
            to a local target; see :mod:`guideloom.cluster.forked`).
        finishing: Only the driver's last steps of an interrupted run are left: with
            ``client`` ``None`` or text, no cluster is started and nothing forked.
    """
    if finishing and (client is None or isinstance(client, str)):
        yield _say(Placement(None, "in-process", 1, FINISHING_REASON), quiet)
        return
    parsed = parse_client_text(client) if isinstance(client, str) else None
    if parsed is not None and parsed.kind == SYNC:
        yield _say(Placement(None, "in-process", 1, SYNC_REASON), quiet)
        return
    if parsed is not None and parsed.kind == FORK:
        yield _say(_forked(parsed, forkable), quiet)
        return
    if client is None:
        active = active_client()
        if active is not None:
            asked = _announce(active.dashboard_link, quiet, client=active)
            n, slots = workers_and_slots(active)
            yield _say(Placement(active, "client", n, "the active Client", slots=slots), quiet)
            page_module.settle(asked)
            return
        mode, reason = choose_automatically(estimate_s or 0.0, n_tasks, in_process_tasks,
                                            forkable)
        if mode == "in-process":
            yield _say(Placement(None, mode, 1, reason), quiet)
            return
        if mode == FORKED:
            yield _say(Placement(None, mode, fork_workers(n_tasks), reason), quiet)
            return
        parsed = parse_client_text(LOCAL)
    if parsed is not None:
        with contextlib.ExitStack() as quiet_logs:
            if not verbose:  # while this job runs (the embedded cluster holds until it closes)
                quiet_logs.enter_context(dask_logs.quieted())
            yield from _placed_by_text(parsed, dashboard_address=dashboard_address, quiet=quiet,
                                       verbose=verbose, batch_options=batch_options)
        return
    if type(client).__name__ != "Client":
        raise TypeError(
            f"client must be a distributed.Client, an address, 'local[:N]' or 'sync', not "
            f"{client!r}")
    asked = _announce(getattr(client, "dashboard_link", None), quiet, client=client)
    n, slots = workers_and_slots(client)
    yield _say(Placement(client, "client", n, "the given Client", slots=slots), quiet)
    page_module.settle(asked)


def _forked(client: ClientText, forkable: bool) -> Placement:
    """The placement of ``client="fork[:N]"``: forked processes, or in-process and why not."""
    workers = client.count or fastread.pool.usable_cpus()
    problem = fork_problem() if forkable else "only exports of local data to local targets fork"
    if problem is not None:
        return Placement(None, "in-process", 1, f"client={client.text!r}, but {problem}")
    return Placement(None, FORKED, workers, f"client={client.text!r}: {workers} processes "
                                            "forked from this one")


def _placed_by_text(parsed: ClientText, *, dashboard_address: str | None, quiet: bool,
                    verbose: bool, batch_options: Mapping[str, Any] | None
                    ) -> Iterator[Placement]:
    """The placement of a ``client`` given as text: the embedded cluster, batch jobs or a
    scheduler address (see :func:`placement`)."""
    client = parsed.text
    if parsed.kind == LOCAL:
        began = time.monotonic()
        running, started = embedded.embedded_cluster(
            parsed.count, dashboard_address=dashboard_address, verbose=verbose)
        start_s = time.monotonic() - began if started else None
        link = running.dashboard_link
        _announce(link, False, page=True)  # records, whatever quiet says (see _say)
        reason = "started" if started else "reused"
        where = _say(Placement(running.client, "local-cluster", running.n_workers,
                               f"local cluster of {running.n_workers} workers ({reason})",
                               cluster_start_s=start_s), False)
        urls = (f"dashboard {link}, guideloom page {page_module.page_link(link)}" if link
                else "no dashboard")
        announce.tell(logger, f"guideloom: running {where.mode}: {where.reason}; {urls}", quiet)
        yield where
        return
    if parsed.kind in BATCH_KINDS:
        from guideloom.cluster.jobqueue import jobqueue_client

        jobs = int(parsed.count or 0)
        with jobqueue_client(parsed.kind, jobs, quiet=quiet,  # type: ignore[arg-type]
                             **dict(batch_options or {})) as batch:
            yield _say(Placement(batch, parsed.kind, jobs,
                                 f"{jobs} {parsed.kind.upper()} worker jobs"), quiet)
        return
    with connect_scheduler(client) as remote:
        asked = _announce(remote.dashboard_link, quiet, client=remote)
        _first_worker(remote, client)
        yield _say(Placement(remote, "scheduler", worker_count(remote),
                             f"scheduler {client}"), quiet)
        page_module.settle(asked)  # before the client closes


def _say(where: Placement, quiet: bool) -> Placement:
    if not quiet:
        logger.info("guideloom: running %s: %s", where.mode, where.reason)
    return where


def _announce(link: str | None, quiet: bool, page: bool = False,
              client: Any = None) -> concurrent.futures.Future[bool] | None:
    """Print the dashboard URL once per process, and the guideloom page's beside it when the
    scheduler serves it: ``page`` (the embedded cluster's does), else asked of ``client``'s
    scheduler without waiting (see :func:`guideloom.cluster.page.announce_page`: the line
    follows when the answer arrives); when it does not, how to get it. Returns the pending
    question, for :func:`guideloom.cluster.page.settle` once the job is done."""
    if not link or quiet or link in _printed:
        return None
    _printed.add(link)
    logger.info("Dask dashboard: %s", link)
    if page:
        logger.info("guideloom page: %s (experiments, phases, skips, rates)",
                    page_module.page_link(link))
        return None
    if client is None:
        return None
    return page_module.announce_page(link, client)


def serves_page(client: Any) -> bool:
    """Whether ``client``'s scheduler serves the guideloom page (it runs the page's plugin:
    the embedded cluster, or ``dask scheduler --preload guideloom.cluster.dashboard``).

    Asked without importing anything on the scheduler (see :mod:`guideloom.cluster.page`), so
    a scheduler without guideloom installed answers too: no page."""
    return page_module.serves_page(client)


def interrupted() -> None:
    """Stop the embedded cluster at once after Ctrl-C (workers are killed, not retired)."""
    embedded.close_cluster(fast=True)




# --- task names, fan-out and progress -------------------------------------------------------
def task_key(stage: str, *parts: Any) -> tuple[Any, ...]:
    """A Dask key ``(stage, *parts)``, e.g. ``("export-part", view, job, 3)``.

    Dask groups tasks on the dashboard by the key's first element (``key_split``), so the stage
    name (ASCII, hyphenated, at most 15 characters so the progress panel shows it whole:
    ``export-part``, ``probe-schema``, ``extract``) reads there and in logs; the view or
    archive, job and partition follow in the key.
    """
    return (stage, *parts)


IN_FLIGHT_PER_SLOT = 2  # tasks submitted ahead per worker thread (see run_partitions)


class _NoProgress:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def progress_bar(show: bool, total: int, *, initial: int = 0, unit: str, desc: str,
                 delay: float = 0.0) -> Any:
    """A tqdm bar, or a silent stand-in when ``show`` is false; ``delay``: seconds before it
    is first drawn (a bar that ends sooner is never drawn)."""
    if not show:
        return _NoProgress()
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, unit=unit, desc=desc, delay=delay)


def task_slots_by_host(client: Any) -> dict[str, int]:
    """How many tasks the cluster runs at once on each host (worker threads summed)."""
    return _slots(client.scheduler_info(n_workers=-1).get("workers", {}))


def _slots(workers: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    slots: dict[str, int] = {}
    for info in workers.values():
        host = str(info.get("host", ""))
        slots[host] = slots.get(host, 0) + int(info.get("nthreads", 1) or 1)
    return slots


def sized_task(slots: Mapping[str, int], fn: Callable[..., Any], *args: Any) -> Any:
    """Run ``fn(*args)`` on a worker after sizing its decode threads to this worker's share of
    its host's CPUs (runs on the worker)."""
    from distributed import get_worker

    try:
        address = get_worker().address
    except ValueError:  # not inside a worker (a client's own local run)
        address = ""
    host = address.split("://")[-1].rsplit(":", 1)[0].strip("[]")
    fastread.share_cores(slots.get(host, 1))
    result = fn(*args)
    if isinstance(result, dict) and address:
        result.setdefault("worker", address)  # per-worker rates on the dashboard and report
    return result


SummaryT = TypeVar("SummaryT", bound=Mapping[str, Any])  # what one part's task returns


def run_partitions(
    dask: Any,
    fn: Callable[..., SummaryT],
    parts: Sequence[Any],
    *,
    args: tuple[Any, ...],
    key: Callable[[Any], tuple[Any, ...]],
    done: Callable[[SummaryT], int],
    progress: Any,
    on_result: Callable[[SummaryT], None] | None = None,
    slots: Mapping[str, int] | None = None,
) -> list[SummaryT]:
    """Run ``fn(*args, part)`` for every part; return the summaries as they complete.

    With ``dask=None`` the parts run here, one after the other. Otherwise each part is one task
    keyed ``key(part)``; the first failing task cancels the rest and its exception is raised
    with the worker's traceback. ``done(summary)`` counts the progress a summary stands for;
    ``on_result(summary)`` is called as each arrives (the export's monitor). ``slots``:
    :func:`task_slots_by_host`, when the caller asked the scheduler already. A task's summary
    is fetched as soon as it finishes (``as_completed(with_results=True)``), not by a round
    trip of this thread after it wakes.
    """
    results: list[SummaryT] = []
    try:
        if dask is None:
            for part in parts:
                summary = fn(*args, part)
                results.append(summary)
                progress.update(done(summary))
                if on_result is not None:
                    on_result(summary)
            return results
        from distributed import as_completed

        slots = dict(task_slots_by_host(dask) if slots is None else slots)
        # in their order, a few more than the workers run at once: an idle worker takes the
        # next part, not the last (work stealing takes from the end of a worker's queue), so a
        # zarr partition finds the partitions before it finished and writes its rows where
        # they belong
        window = max(1, IN_FLIGHT_PER_SLOT * sum(slots.values()))
        pending = list(reversed(parts))
        futures: list[Any] = []

        def submit_next() -> Any:
            part = pending.pop()
            future = dask.submit(sized_task, slots, fn, *args, part, key=key(part), pure=False,
                                 priority=len(parts) - len(futures))
            futures.append(future)
            return future

        first = [submit_next() for _ in range(min(window, len(pending)))]
        try:
            with dask.as_current():
                completed = as_completed(first, with_results=True, raise_errors=False)
            for future, value in completed:
                if future.status == "error":
                    error = future.exception()
                    pending.clear()
                    dask.cancel([f for f in futures if f is not future])
                    raise error.with_traceback(future.traceback())
                if isinstance(value, BaseException):  # cancelled meanwhile
                    raise value
                if pending:
                    completed.add(submit_next())
                summary = value
                results.append(summary)
                progress.update(done(summary))
                if on_result is not None:
                    on_result(summary)
        finally:
            running = [f for f in futures if not f.done()]
            if running:  # (a cancel of nothing is still a round trip to the scheduler)
                dask.cancel(running)
        return results
    finally:
        progress.close()
