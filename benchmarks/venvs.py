"""The anchors' interpreters for side-by-side benchmarks: found, or made once.

rddac 2.0 (with ddacs 3.2.3) and GuideLoom 1.1 cannot share this environment (GuideLoom 1.1
takes guideloom's name and needs Python 3.13), so each runs in a throwaway venv outside the
repository. :func:`rddac_python` and :func:`gl11_python` return an interpreter that imports the
anchor: the one named by ``$GUIDELOOM_RDDAC_PYTHON`` / ``$GUIDELOOM11_PYTHON``, else the first
known venv that works, else a venv made now under the temporary directory with ``pip`` (the
packages come from the package index by name). ``None`` (with the reason logged) when none can
be had; the benchmark then prints its own side only.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

logger = logging.getLogger(__name__)

TMP = Path(tempfile.gettempdir())
RDDAC_PACKAGES = ("rddac==2.0.0", "ddacs==3.2.3")
GL11_PACKAGES = ("guideloom==1.1.0",)
RDDAC_CANDIDATES = ("/work/venv-rddac/bin/python", str(TMP / "rddac-venv" / "bin" / "python"))
GL11_CANDIDATES = ("/work/venv-gl11/bin/python", "/work/venv-gl11b/bin/python",
                   str(TMP / "gl11-venv" / "bin" / "python"))
PY313_CANDIDATES = ("/root/.pyenv/versions/3.13.0/bin/python", "python3.13")


def anchor_env() -> dict[str, str]:
    """This environment without what would make an anchor's interpreter import another
    package than its own (``PYTHONPATH`` pointing at a guideloom source tree would make
    GuideLoom 1.1's ``import guideloom`` import this guideloom instead)."""
    return {k: v for k, v in os.environ.items()
            if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONSAFEPATH")}


def anchor_run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run an anchor's interpreter: its own packages only, started in the temporary
    directory (never in a source tree, which ``sys.path[0]`` would put first)."""
    return subprocess.run(command, capture_output=True, text=True, env=anchor_env(),
                          cwd=tempfile.gettempdir(), **kwargs)  # type: ignore[call-overload]


def anchor_popen(command: list[str], **kwargs: object) -> subprocess.Popen[str]:
    """:func:`anchor_run`'s environment for a process that stays up."""
    return subprocess.Popen(command, text=True, env=anchor_env(), cwd=tempfile.gettempdir(),
                            **kwargs)  # type: ignore[call-overload]


def imports(python: str, module: str, version: str | None = None) -> bool:
    """Whether ``python`` imports ``module`` (of ``version``, when given)."""
    if not Path(python).is_file() and shutil.which(python) is None:
        return False
    check = (f"import {module}, importlib.metadata as m, pathlib, sys; "
             f"assert m.version({module!r}) == {version!r}; "
             f"assert pathlib.Path({module}.__file__).is_relative_to(sys.prefix)"
             if version else f"import {module}")
    return anchor_run([python, "-c", check]).returncode == 0


def _make_venv(base: str, folder: Path, packages: tuple[str, ...]) -> str | None:
    """A venv of ``base`` at ``folder`` with ``packages``; its python, or ``None``."""
    python = folder / "bin" / "python"
    logger.warning("making %s with %s (once)", folder, " ".join(packages))
    steps = [[base, "-m", "venv", str(folder)],
             [str(python), "-m", "pip", "install", "-q", *packages]]
    for step in steps:
        done = anchor_run(step)
        if done.returncode:
            logger.warning("%s failed: %s", " ".join(step[:3]),
                           (done.stderr.strip().splitlines() or ["?"])[-1])
            return None
    return str(python)


def _found_or_made(variable: str, candidates: tuple[str, ...], module: str, version: str,
                   bases: tuple[str, ...], folder: Path, packages: tuple[str, ...]) -> str | None:
    given = os.environ.get(variable)
    for python in ((given,) if given else ()) + candidates:
        if imports(python, module, version):
            return python
    for base in bases:
        if imports(base, "venv"):
            made = _make_venv(base, folder, packages)
            if made is not None and imports(made, module, version):
                return made
    logger.warning("no interpreter with %s %s (set %s)", module, version, variable)
    return None


def rddac_python(given: str | None = None) -> str | None:
    """An interpreter importing rddac 2.0.0: ``given``, ``$GUIDELOOM_RDDAC_PYTHON``, a known
    venv, or a venv of this Python made under the temporary directory."""
    if given:
        return given if imports(given, "rddac", "2.0.0") else None
    return _found_or_made("GUIDELOOM_RDDAC_PYTHON", RDDAC_CANDIDATES, "rddac", "2.0.0",
                          (sys.executable,), TMP / "rddac-venv", RDDAC_PACKAGES)


def gl11_python(given: str | None = None) -> str | None:
    """An interpreter importing GuideLoom 1.1.0 (Python 3.13): ``given``,
    ``$GUIDELOOM11_PYTHON``, a known venv, or a venv of a Python 3.13 made under the temporary
    directory."""
    if given:
        return given if imports(given, "guideloom", "1.1.0") else None
    return _found_or_made("GUIDELOOM11_PYTHON", GL11_CANDIDATES, "guideloom", "1.1.0",
                          PY313_CANDIDATES, TMP / "gl11-venv", GL11_PACKAGES)
