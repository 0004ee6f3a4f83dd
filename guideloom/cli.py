"""The ``guideloom`` command line (also ``python -m guideloom``).

Errors print one line and exit with code 2 (bad usage or input) or 1 (a job failed).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from guideloom.errors import GuideloomError

EXIT_USAGE = 2
EXIT_FAILED = 1


class UsageError(GuideloomError):
    """A problem with what the user asked for: exit code 2."""


def _cmd_make_demo_data(args: argparse.Namespace) -> int:
    from guideloom.demo import make_demo_data

    demo = make_demo_data(
        args.data_dir, n=args.n, scan_shape=tuple(args.scan_shape), layout=args.layout,
        seed=args.seed,
    )
    print(f"wrote {len(demo.ids)} experiments ({demo.layout} layout, scans "
          f"{demo.scan_shape[0]}x{demo.scan_shape[1]}) to {demo.data_dir}")
    return 0


def _cmd_views(args: argparse.Namespace) -> int:
    from guideloom.inspect_views import describe_views

    for line in describe_views(args.data_dir, source=args.manifest):
        print(line)
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="guideloom",
        description="Croissant/HDF5 experiments to training-ready arrays, on Dask.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    demo = sub.add_parser("make-demo-data", help="write a deterministic RDDAC-shaped dataset")
    demo.add_argument("data_dir", type=Path)
    demo.add_argument("--n", type=int, default=36, help="number of experiments (default 36)")
    demo.add_argument("--scan-shape", type=int, nargs=2, default=(100, 160), metavar=("Y", "X"),
                      help="scan grid; the real one is 2000 3200 (default 100 160)")
    demo.add_argument("--layout", choices=("zip", "loose"), default="zip")
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(func=_cmd_make_demo_data)

    views = sub.add_parser("views", help="list views with field shapes and dtypes")
    views.add_argument("data_dir", type=Path)
    views.add_argument("--manifest", type=Path, default=None,
                       help="manifest path (default DATA_DIR/metadata.json)")
    views.set_defaults(func=_cmd_views)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] = args.func
    try:
        return func(args)
    except (UsageError, FileNotFoundError, ValueError) as exc:
        print(f"guideloom: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except GuideloomError as exc:
        print(f"guideloom: error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("guideloom: interrupted", file=sys.stderr)
        return 130
