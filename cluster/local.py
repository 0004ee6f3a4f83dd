#!/usr/bin/env python3
"""Start, inspect and stop a Dask scheduler and N worker processes on this machine (127.0.0.1).

Usage:
    python3 cluster/local.py start --workers 2 [--port 0] [--dashboard-port 0] [--state-dir DIR]
                                   [--no-tls]
    python3 cluster/local.py status [--state-dir DIR]
    python3 cluster/local.py stop [--state-dir DIR]

``start`` returns once the scheduler reports all workers, and prints the scheduler address
(``tls://127.0.0.1:PORT``), the dashboard URL, the ``/guideloom`` page's URL (the scheduler
preloads ``guideloom.cluster.dashboard``) and how to connect: ``guideloom run WORKFLOW
--scheduler tls://127.0.0.1:PORT`` finds the credentials in the state folder (``DIR/tls``,
readable by you only); from Python, ``Client(address,
security=guideloom.cluster.security.load(DIR))``. ``--no-tls`` starts plain-TCP processes that
any local user can use to run code as you. ``stop`` terminates exactly the PIDs recorded in the
state file.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

_CHECKOUT = Path(__file__).resolve().parent.parent
if (_CHECKOUT / "guideloom" / "__init__.py").is_file():
    # use the package of the checkout this script belongs to, even if another one is installed
    sys.path.insert(0, str(_CHECKOUT))

from guideloom.cluster import local_procs as cluster_procs  # noqa: E402
from guideloom.cluster import security  # noqa: E402
from guideloom.errors import UnsafeFileError  # noqa: E402


def _connect_lines(procs: cluster_procs.LocalClusterProcesses) -> list[str]:
    """How to reach the cluster: the CLI, Python and Dask's configuration variables."""
    if not procs.tls:
        return [f"submit:    guideloom run WORKFLOW --scheduler {procs.address}",
                "warning:   plain TCP (--no-tls): anyone on this machine who finds the port "
                "can run code as you"]
    return [
        f"tls:       {security.tls_dir(procs.state_dir)} (CA, certificate and key; only you "
        "can read them)",
        f"submit:    guideloom run WORKFLOW --scheduler {procs.address}",
        f"       or: guideloom run WORKFLOW --scheduler-file {procs.scheduler_file}",
        *security.connect_lines(procs.address, procs.state_dir),
    ]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cluster/local.py", description="Local Dask scheduler + worker processes."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    state_help = ("folder for the state file, TLS credentials and logs, created with mode 0700 "
                  f"(default {cluster_procs.DEFAULT_STATE_DIR})")

    start = sub.add_parser("start", help="start a scheduler and N workers")
    start.add_argument("--workers", "-n", type=int, default=2, help="worker processes (2)")
    start.add_argument("--port", type=int, default=0, help="scheduler port (0: any free port)")
    start.add_argument(
        "--dashboard-port", type=int, default=0, help="dashboard port (0: any free port)"
    )
    start.add_argument("--no-dashboard", action="store_true", help="do not start the dashboard")
    start.add_argument("--nthreads", type=int, default=1, help="threads per worker (keep 1)")
    start.add_argument(
        "--memory-limit", default=None, help="memory limit per worker (default: RAM / workers)"
    )
    start.add_argument(
        "--pythonpath",
        action="append",
        default=[],
        help="extra import path for the workers, e.g. where transform modules live (repeatable)",
    )
    start.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for workers")
    start.add_argument("--state-dir", type=Path, default=None, help=state_help)
    start.add_argument(
        "--no-tls", action="store_true",
        help="plain TCP instead of TLS: less safe, anyone on this machine who finds the port "
             "can run code as you",
    )

    stop = sub.add_parser("stop", help="stop the recorded scheduler and workers by PID")
    stop.add_argument("--timeout", type=float, default=15.0, help="seconds before SIGKILL")
    stop.add_argument("--state-dir", type=Path, default=None, help=state_help)

    status = sub.add_parser("status", help="show the recorded cluster")
    status.add_argument("--json", action="store_true", help="print JSON")
    status.add_argument("--state-dir", type=Path, default=None, help=state_help)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line.

    Args:
        argv: Arguments without the program name; defaults to ``sys.argv[1:]``.

    Returns:
        Process exit code.
    """
    args = _parser().parse_args(argv)
    if args.command == "start":
        try:
            procs = cluster_procs.start_local_cluster(
                args.workers,
                port=args.port,
                dashboard_port=None if args.no_dashboard else args.dashboard_port,
                state_dir=args.state_dir,
                nthreads=args.nthreads,
                memory_limit=args.memory_limit,
                pythonpath=args.pythonpath,
                timeout=args.timeout,
                tls=not args.no_tls,
                page=True,  # the /guideloom page beside the dashboard
            )
        except (cluster_procs.LocalClusterError, UnsafeFileError, TimeoutError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"scheduler: {procs.address}")
        print(f"dashboard: {procs.dashboard_url or '(disabled)'}")
        if procs.page_url is not None:
            print(f"page:      {procs.page_url} (guideloom's exports: experiments, phases, "
                  "skips, rates)")
        print(f"workers:   {len(procs.workers)} (1 thread each)")
        print(f"pids:      {' '.join(map(str, procs.pids))}")
        print(f"state:     {procs.state_file}")
        for line in _connect_lines(procs):
            print(line)
        print(f"stop:      python3 cluster/local.py stop --state-dir {procs.state_dir}")
        return 0
    if args.command == "stop":
        report = cluster_procs.stop_local_cluster(args.state_dir, timeout=args.timeout)
        if report is None:
            print("no local cluster recorded; nothing to stop")
            return 0
        print(f"stopped: {report}")
        return 0
    status = cluster_procs.cluster_status(args.state_dir)
    if args.json:
        print(json.dumps(status, indent=2))
    elif status.get("state_file") is None:
        print("no local cluster recorded")
    else:
        print(f"scheduler: {status['address']} ({'up' if status['running'] else 'down'})")
        print(f"dashboard: {status['dashboard_url']}")
        if status.get("page_url"):
            print(f"page:      {status['page_url']}")
        print(f"workers:   {status['n_workers']} connected")
        print(f"tls:       {'on' if status.get('tls') else 'off (plain TCP)'}")
        print(f"pids:      {status['running_pids']} alive of {status['pids']}")
    return 0 if status["running"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
