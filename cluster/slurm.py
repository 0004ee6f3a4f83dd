#!/usr/bin/env python3
"""Start a Dask cluster of SLURM or PBS jobs (dask-jobqueue) configured by ``jobqueue.yaml``.

The scheduler runs in this process (on the login node); each job runs one ``dask worker``
with one thread. Keep this process running while the workflow runs, and pass the printed
address to ``guideloom run WORKFLOW --scheduler tcp://HOST:PORT`` from another shell.

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

import yaml

DEFAULT_CONFIG = Path(__file__).resolve().parent / "jobqueue.yaml"
SYSTEMS = ("slurm", "pbs")


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
    if system not in SYSTEMS:
        raise ValueError(f"system must be one of {SYSTEMS}, not {system!r}")
    with open(path) as fh:
        data = yaml.safe_load(fh) or {}
    section = (data.get("jobqueue") or {}).get(system)
    if not section:
        raise ValueError(f"{path}: no 'jobqueue.{system}' section")
    # the config key "name" is the job name; as a keyword it is called job_name
    renamed = {"name": "job_name"}
    return {renamed.get(key, key.replace("-", "_")): value for key, value in section.items()}


def make_cluster(
    system: str = "slurm",
    config: str | os.PathLike[str] = DEFAULT_CONFIG,
    **overrides: Any,
) -> Any:
    """Create a ``SLURMCluster`` or ``PBSCluster`` from the config file, with no jobs yet.

    Nothing is submitted until the cluster is scaled, so this is also how to inspect
    ``cluster.job_script()``. The scheduler starts in this process.

    Args:
        system: ``"slurm"`` or ``"pbs"``.
        config: jobqueue YAML file.
        **overrides: Keyword arguments for the cluster class, taking precedence over the file;
            ``scheduler_options`` is merged key by key (e.g. ``{"host": "127.0.0.1"}``).

    Returns:
        The dask-jobqueue cluster object (close it when done).
    """
    from dask_jobqueue import PBSCluster, SLURMCluster

    kwargs = load_jobqueue_config(system, config)
    scheduler_options = {**(kwargs.get("scheduler_options") or {})}
    scheduler_options.update(overrides.pop("scheduler_options", None) or {})
    kwargs.update(overrides)
    kwargs["scheduler_options"] = scheduler_options
    cls = SLURMCluster if system == "slurm" else PBSCluster
    return cls(**kwargs)


def main(argv: list[str] | None = None) -> int:
    """Command line: build the cluster, scale it, print the address, wait for Ctrl-C."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--system", choices=SYSTEMS, default="slurm")
    parser.add_argument("--jobs", type=int, default=2, help="jobs = worker processes (2)")
    parser.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help="jobqueue YAML")
    parser.add_argument("--dry-run", action="store_true", help="print the job script and exit")
    parser.add_argument(
        "--wait", type=int, default=0, help="wait for this many workers before printing (0)"
    )
    args = parser.parse_args(argv)

    # a dry run submits nothing, so its throwaway scheduler needs to listen on loopback only
    overrides: dict[str, Any] = (
        {"scheduler_options": {"host": "127.0.0.1", "dashboard_address": "127.0.0.1:0"}}
        if args.dry_run
        else {}
    )
    with make_cluster(args.system, args.config, **overrides) as cluster:
        if args.dry_run:
            print(cluster.job_script())
            return 0
        cluster.scale(jobs=args.jobs)
        print(f"scheduler: {cluster.scheduler_address}")
        print(f"dashboard: {cluster.dashboard_link}  (bound to 127.0.0.1: use an SSH tunnel)")
        print(f"submitted: {args.jobs} {args.system.upper()} jobs, 1 worker x 1 thread each")
        if args.wait:
            from distributed import Client

            with Client(cluster) as client:
                client.wait_for_workers(args.wait)
            print(f"workers:   {args.wait} connected")
        print(f"submit:    guideloom run WORKFLOW --scheduler {cluster.scheduler_address}")
        print("stop:      Ctrl-C here (cancels the jobs)")
        sys.stdout.flush()
        try:
            threading.Event().wait()  # keep the scheduler alive until interrupted
        except KeyboardInterrupt:
            print("stopping: cancelling jobs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
