"""``python -m guideloom`` runs the command-line interface."""

from guideloom.cli import main

raise SystemExit(main())
