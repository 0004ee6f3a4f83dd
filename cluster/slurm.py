#!/usr/bin/env python3
"""Start a Dask cluster of SLURM or PBS jobs (dask-jobqueue) configured by ``jobqueue.yaml``.

The scheduler runs in this process (on the login node); each job runs one ``dask worker``
with one thread, started with this Python. Keep this process running while the workflow runs,
and pass the printed address to ``guideloom run WORKFLOW --scheduler tls://HOST:PORT`` from
another shell. Scheduler, workers and clients talk TLS with throwaway credentials: the client's
copy is written to the private state folder (``--state-dir``, default
``~/.cache/guideloom/slurm-cluster``; ``tls/`` 0o700, files 0o600), where ``guideloom run``
finds it, and removed on exit; ``--no-tls`` runs plain TCP (less safe: anyone who reaches the
port can run code as you). Ctrl-C or SIGTERM cancels every job it submitted. Without
``sbatch``/``qsub`` on PATH it prints one line and exits 2.

Usage:
    python3 cluster/slurm.py --jobs 8                 # SLURM (SLURMCluster)
    python3 cluster/slurm.py --system pbs --jobs 8    # PBS (PBSCluster)
    python3 cluster/slurm.py --dry-run                # print the job script, submit nothing
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path
from typing import Any

from guideloom.cluster import jobqueue, security
from guideloom.errors import UnsafeFileError
from guideloom.runtime.private_files import private_dir

DEFAULT_CONFIG = Path(__file__).resolve().parent / "jobqueue.yaml"
SYSTEMS = jobqueue.KINDS


def load_jobqueue_config(
    system: str = "slurm", path: str | os.PathLike[str] = DEFAULT_CONFIG
) -> dict[str, Any]:
    """Read one system's section of a jobqueue YAML file as cluster keyword arguments.

    dask-jobqueue reads its configuration lazily, whenever it creates a job, so the file's
    values are passed to the cluster explicitly rather than through ``dask.config``; keys the
    file leaves out keep dask-jobqueue's defaults.

    Args:
        system: ``"slurm"`` or ``"pbs"``.
        path: YAML file with a top-level ``jobqueue`` mapping.

    Returns:
        Keyword arguments for ``SLURMCluster``/``PBSCluster`` (``cores``, ``memory``, ...).
    """
    return jobqueue.load_jobqueue_config(system, path)


def make_cluster(
    system: str = "slurm",
    config: str | os.PathLike[str] = DEFAULT_CONFIG,
    **overrides: Any,
) -> Any:
    """Create a ``SLURMCluster`` or ``PBSCluster`` from the config file, with no jobs yet.

    Nothing is submitted until the cluster is scaled, so this is also how to inspect
    ``cluster.job_script()``. The scheduler starts in this process; workers run this Python.

    Args:
        system: ``"slurm"`` or ``"pbs"``.
        config: jobqueue YAML file.
        **overrides: Keyword arguments for the cluster class, taking precedence over the file;
            ``scheduler_options`` is merged key by key (e.g. ``{"host": "127.0.0.1"}``).

    Returns:
        The dask-jobqueue cluster object (close it when done).
    """
    scheduler_options = overrides.pop("scheduler_options", None) or {}
    kwargs, _ = jobqueue.cluster_kwargs(system, config_file=config, job_options=overrides)
    kwargs["scheduler_options"].update(scheduler_options)
    return jobqueue.cluster_class(system)(**kwargs)


def main(argv: list[str] | None = None) -> int:
    """Command line: submit the jobs, print the address, wait for Ctrl-C or SIGTERM."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    parser.add_argument("--system", choices=SYSTEMS, default="slurm")
    parser.add_argument("--jobs", type=int, default=2, help="jobs = worker processes (2)")
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="jobqueue YAML")
    parser.add_argument("--dry-run", action="store_true", help="print the job script and exit")
    parser.add_argument(
        "--wait", type=int, default=1, help="wait for this many workers before printing (1)"
    )
    parser.add_argument(
        "--timeout", type=float, default=300, help="seconds to wait for them (300)"
    )
    parser.add_argument(
        "--state-dir", type=Path, default=security.SLURM_STATE_DIR,
        help="private folder (0700) for the scheduler file and the client's TLS credentials "
             f"(default {security.SLURM_STATE_DIR})",
    )
    parser.add_argument(
        "--no-tls", action="store_true",
        help="plain TCP instead of TLS: less safe, anyone who reaches the scheduler's port can "
             "run code as you",
    )
    args = parser.parse_args(argv)

    if args.dry_run:
        # a dry run submits nothing, so its throwaway scheduler listens on loopback only
        loopback = {"host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"}
        with make_cluster(args.system, args.config, scheduler_options=loopback) as cluster:
            print(cluster.job_script())
        return 0
    try:
        state_dir = _state_dir(args.state_dir)
        with jobqueue.jobqueue_client(
            args.system, args.jobs, config_file=args.config, min_workers=args.wait,
            wait_timeout=args.timeout, tls=not args.no_tls,
        ) as client:
            address = client.cluster.scheduler_address
            try:
                lines = _publish(client, address, state_dir, tls=not args.no_tls)
                print(f"scheduler: {address}")
                print(f"submitted: {args.jobs} {args.system.upper()} jobs, 1 worker x 1 thread "
                      "each")
                for line in lines:
                    print(line)
                print("stop:      Ctrl-C here (cancels the jobs)", flush=True)
                try:
                    threading.Event().wait()  # keep the scheduler alive until interrupted
                except KeyboardInterrupt:
                    print("stopping: cancelling jobs", flush=True)
            finally:
                security.forget_address(address)
                (state_dir / security.SCHEDULER_FILE_NAME).unlink(missing_ok=True)
                security.remove_credentials(state_dir)
    except (jobqueue.JobqueueError, UnsafeFileError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def _state_dir(path: Path) -> Path:
    """The private state folder (0o700), created if needed."""
    path = path.expanduser().resolve()
    path.parent.mkdir(parents=True, exist_ok=True)
    return private_dir(path, "the SLURM cluster's state folder")


def _publish(client: Any, address: str, state_dir: Path, *, tls: bool) -> list[str]:
    """Write the scheduler file (and the client's credentials); return how to connect."""
    if not tls:
        security.remove_credentials(state_dir)
        security.write_scheduler_file(state_dir, address)
        return [f"submit:    guideloom run WORKFLOW --scheduler {address}",
                "warning:   plain TCP (--no-tls): anyone who reaches the port can run code as you"]
    security.write_credentials(state_dir, client.cluster.security)
    security.write_scheduler_file(state_dir, address)
    security.record_address(address, state_dir)
    return [
        f"tls:       {security.tls_dir(state_dir)} (CA, certificate and key; only you can read "
        "them; removed on exit)",
        f"submit:    guideloom run WORKFLOW --scheduler {address}",
        *security.connect_lines(address, state_dir),
    ]


if __name__ == "__main__":
    raise SystemExit(main())
