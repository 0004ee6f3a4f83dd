"""The ``guideloom`` command's arguments: the parser of every subcommand and the checks of their
values."""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path
from typing import Any, NoReturn

from guideloom import __version__
from guideloom.cli.commands import (
    DEMO_WORKFLOW,
    cmd_cache_clear,
    cmd_demo,
    cmd_download,
    cmd_extract,
    cmd_info,
    cmd_inspect,
    cmd_make_demo_data,
    cmd_preprocess,
    cmd_run,
    cmd_serve_release,
    cmd_status,
    cmd_verify,
    cmd_views,
    cmd_workflows,
)
from guideloom.cli.output import EXIT_USAGE

DASHBOARD_PATTERN = re.compile(r"^[^\s:]+:[0-9]+$")


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
    run.set_defaults(func=cmd_run)

    workflows = sub.add_parser("workflows", help="list the workflows shipped with guideloom")
    workflows.add_argument("--paths", action="store_true", help="show where each file is")
    workflows.set_defaults(func=cmd_workflows)

    inspect = sub.add_parser("inspect", help="describe an export (npy, npz, zarr, storage)")
    inspect.add_argument("export", help="export directory, zarr store path or URL")
    inspect.set_defaults(func=cmd_inspect)

    verify = sub.add_parser("verify", help="read a whole export and check it against the "
                                           "checksums recorded when it was written")
    verify.add_argument("export", help="export directory, zarr store path or URL")
    verify.set_defaults(func=cmd_verify)

    status = sub.add_parser("status", help="progress of a running or interrupted export")
    status.add_argument("path", help="the export's target or its .NAME.guideloom-staging dir")
    status.set_defaults(func=cmd_status)

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
    demo_cmd.set_defaults(func=cmd_demo)

    info = sub.add_parser("info", help="the published dataset on DaRUS: versions, files, "
                                       "changes")
    _release_options(info)
    info.set_defaults(func=cmd_info)

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
    dl.set_defaults(func=cmd_download)

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
    serve.set_defaults(func=cmd_serve_release)

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
    extract.set_defaults(func=cmd_extract)

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
    pre.set_defaults(func=cmd_preprocess)

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
    demo.set_defaults(func=cmd_make_demo_data)

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
    views.set_defaults(func=cmd_views)

    cache_cmd = sub.add_parser("cache", help="the on-disk cache of what remote reads learnt "
                                             "(archive directories, HDF5 metadata)")
    cache_sub = cache_cmd.add_subparsers(dest="cache_command", required=True, metavar="ACTION")
    clear = cache_sub.add_parser("clear", help="remove every entry (they are learnt again "
                                               "on the next remote read)")
    clear.set_defaults(func=cmd_cache_clear)
    return parser


def _add_trust_root(parser: argparse.ArgumentParser) -> None:
    """``--trust-root DIR`` (repeatable): links of other users into DIR are followed."""
    parser.add_argument("--trust-root", action="append", default=None, metavar="DIR",
                        help="follow symbolic links of the data directory that other users "
                             "made when they lead into DIR (repeatable; your own links are "
                             "followed anyway; adds to $GUIDELOOM_TRUSTED_ROOTS)")
