"""The ``guideloom`` command line (also ``python -m guideloom``).

Subcommands: ``run`` (a workflow file, or a shipped workflow by name), ``workflows`` (list the
shipped ones), ``inspect`` (an export), ``verify`` (an export's data against the checksums
recorded when it was written), ``status`` (a running or interrupted job), ``demo``,
``extract`` (zipped to loose layout), ``make-demo-data``, ``views``, and ``info`` and
``download`` (the published release on DaRUS).

Errors print one line and exit with code 2 (bad usage or input) or 1 (a job failed); Ctrl-C
prints one line and exits with 130. ``--verbose`` lets Dask's log lines and tracebacks through.

The package: :func:`main` here, the arguments in :mod:`.parser`, the subcommands in
:mod:`.commands`, what is printed (and the exit codes) in :mod:`.output`.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from guideloom import __version__ as __version__  # rddac's and ddacs' cli module had it
from guideloom.cli.commands import DEFAULT_DASHBOARD, trust_roots
from guideloom.cli.output import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE, log_lines, one_line
from guideloom.cli.parser import build_parser as build_parser
from guideloom.errors import GuideloomError, JobFailedError, UsageError, permission_denied


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
        with log_lines():
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
        trust_roots(args)
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
        print(f"guideloom: error: {one_line(exc)}", file=sys.stderr)
        return EXIT_FAILED
    except PermissionError as exc:  # a file we may not read or write: named, never "damaged"
        named = permission_denied(exc)
        text = " ".join((named.strerror or str(named)).split())
        print(f"guideloom: error: {text}", file=sys.stderr)
        return EXIT_FAILED
    except (UsageError, FileNotFoundError, FileExistsError, ValueError) as exc:
        print(f"guideloom: error: {one_line(exc)}", file=sys.stderr)
        return EXIT_USAGE
    except GuideloomError as exc:
        print(f"guideloom: error: {one_line(exc)}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        if verbose:
            raise
        print(f"guideloom: error: {type(exc).__name__}: {one_line(exc)}", file=sys.stderr)
        return EXIT_FAILED
