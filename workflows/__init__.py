"""The workflow files shipped with guideloom, and the transforms they reference.

In the source tree these are the top-level ``workflows/`` folder; installed, they are the package
``guideloom.workflows`` (``pyproject.toml`` maps one to the other, so there is one copy). Run one by
name with ``guideloom run force_signals``; ``guideloom workflows`` lists them. Their relative paths
(``demo-data/``, ``exports/``) are relative to the current directory.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

SUFFIX = ".toml"


def shipped_workflows() -> dict[str, Path]:
    """``{name: path}`` of every shipped workflow file, by file stem (``force_signals``)."""
    folder = resources.files(__name__)
    return {Path(str(entry)).stem: Path(str(entry)) for entry in sorted(
        folder.iterdir(), key=lambda e: e.name) if entry.name.endswith(SUFFIX)}


def find_shipped(name: str) -> Path | None:
    """The shipped workflow called ``name`` (``force_signals``, ``force-signals`` or with
    ``.toml``), or ``None``."""
    stem = name.removesuffix(SUFFIX).replace("-", "_")
    return shipped_workflows().get(stem)
