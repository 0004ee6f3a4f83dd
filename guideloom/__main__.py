"""``python -m guideloom`` runs the command-line interface."""

from guideloom.cli import main

if __name__ == "__main__":  # importing this module (a tool, a spawned child) runs nothing
    raise SystemExit(main())
