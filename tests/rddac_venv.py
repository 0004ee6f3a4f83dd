"""The Python of a venv holding rddac 2.0 (``ddacs==3.2.3 'rddac[preprocessing]==2.0.0'`` with
guideloom's scikit-learn version), for the conformance tests that run rddac as a subprocess.

``GUIDELOOM_RDDAC_PYTHON`` names one; otherwise one is made once under the user's cache
(``$XDG_CACHE_HOME/guideloom-tests/rddac-2.0.0``), which takes about a minute with a warm pip
cache. Returns None (the tests skip, saying why) when neither works.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ENV = "GUIDELOOM_RDDAC_PYTHON"
REQUIREMENTS = ("ddacs==3.2.3", "rddac[preprocessing]==2.0.0")


def _sklearn_version() -> str:
    import sklearn

    return str(sklearn.__version__)


def _version_of(python: str, module: str) -> str | None:
    done = subprocess.run([python, "-c", f"import {module}; print({module}.__version__)"],
                          capture_output=True, text=True, timeout=120)
    return done.stdout.strip() if done.returncode == 0 else None


def rddac_python() -> tuple[str | None, str]:
    """``(python, why)``: the interpreter, or None and the reason it is not there."""
    wanted = _sklearn_version()
    explicit = os.environ.get(ENV)
    if explicit:
        found = _version_of(explicit, "sklearn")
        if found is None or _version_of(explicit, "rddac") is None:
            return None, f"{ENV}={explicit} has no rddac/scikit-learn"
        if found != wanted:
            return None, f"{ENV} has scikit-learn {found}, guideloom's is {wanted}"
        return explicit, ""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    venv = cache / "guideloom-tests" / f"rddac-2.0.0-sklearn-{wanted}"
    python = venv / "bin" / "python"
    if python.is_file() and _version_of(str(python), "rddac") is not None:
        return str(python), ""
    try:
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300,
                       capture_output=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *REQUIREMENTS,
                        f"scikit-learn=={wanted}"], check=True, timeout=900, capture_output=True)
    except (subprocess.SubprocessError, OSError) as exc:
        return None, f"could not make a venv with rddac 2.0 ({exc.__class__.__name__})"
    return str(python), ""
