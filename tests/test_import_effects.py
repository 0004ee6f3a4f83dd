"""Importing guideloom, and every module of it, leaves the host process as it was.

Each check runs in a fresh interpreter (``python -c``) so nothing imported by the test session
hides an effect: the script records the threads, the levels of the loggers the embedded cluster
used to silence, the signal handlers, the open sockets and ``sys.modules``, imports, and records
again.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "guideloom"

SNAPSHOT = r"""
import json, logging, signal, sys, threading
import psutil

LOGGERS = ("asyncio", "tornado", "tornado.application", "bokeh", "distributed", "dask")

def snapshot():
    handlers = {}
    for sig in signal.valid_signals():
        try:
            handlers[str(sig)] = repr(signal.getsignal(sig))
        except (OSError, ValueError):
            pass
    return {
        "threads": sorted(t.name for t in threading.enumerate()),
        "levels": {n: logging.getLogger(n).level for n in LOGGERS},
        "root": logging.getLogger().level,
        "root_handlers": len(logging.getLogger().handlers),
        "signals": handlers,
        "sockets": len(psutil.Process().net_connections(kind="all")),
        "modules": sorted(sys.modules),
    }
"""

RUN = SNAPSHOT + r"""
import importlib
for name in json.loads(sys.argv[2]):  # third-party packages whose own import has effects
    importlib.import_module(name)
before = snapshot()
for name in json.loads(sys.argv[1]):
    importlib.import_module(name)
after = snapshot()
after["files"] = {name: getattr(sys.modules[name], "__file__", None) or ""
                  for name in set(after["modules"]) - set(before["modules"])}
print(json.dumps({"before": before, "after": after}))
"""

#: Imported before the first snapshot: importing distributed applies its logging configuration
#: (``tornado`` at CRITICAL, ``bokeh`` at ERROR, ...) and multiprocessing's ``__mp_main__``;
#: that is distributed's doing, measured away so what is left is guideloom's.
DEPENDENCIES = ["dask", "distributed", "dask.distributed"]


def module_names() -> list[str]:
    """Every importable guideloom module (``__main__`` runs the CLI, so it is left out)."""
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__main__":
            continue
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def in_an_environment(path: Path, root: Path = ROOT) -> bool:
    """Whether ``path`` lies in a Python environment inside ``root``: a folder holding
    ``pyvenv.cfg`` (``python3 -m venv .venv`` in the clone) or ``conda-meta`` (``conda create
    -p ./env``). Its packages are installed there, not part of the repository."""
    for folder in path.parents:
        if folder == root or not folder.is_relative_to(root):
            return False
        if (folder / "pyvenv.cfg").is_file() or (folder / "conda-meta").is_dir():
            return True
    return False


def repository_file(path: str, root: Path = ROOT) -> bool:
    """Whether a module's ``__file__`` is one of the repository's own files."""
    if not path:
        return False
    file = Path(path)
    return file.is_relative_to(root) and not in_an_environment(file, root)


def effects(names: list[str], tmp_path: Path, first: list[str]) -> tuple[dict, dict]:
    out = subprocess.run(
        [sys.executable, "-c", RUN, json.dumps(names), json.dumps(first)], cwd=tmp_path,
        capture_output=True, text=True, timeout=300, env=_clean_env(),
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return result["before"], result["after"]


def _clean_env() -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith("GUIDELOOM_")}
    env["GUIDELOOM_DRIVER"] = f"{os.getpid()}:0"  # what a worker sees: still no thread on import
    return env


def assert_unchanged(before: dict, after: dict) -> None:
    assert after["threads"] == before["threads"], "importing started a thread"
    assert after["levels"] == before["levels"], "importing changed a logger's level"
    assert after["root"] == before["root"]
    assert after["root_handlers"] == before["root_handlers"], "importing configured logging"
    assert after["signals"] == before["signals"], "importing installed a signal handler"
    assert after["sockets"] == before["sockets"], "importing opened a socket"
    assert set(before["modules"]) <= set(after["modules"]), "importing removed a module"
    outside = {name: path for name, path in after["files"].items()
               if not name.startswith("guideloom") and repository_file(path)}
    assert not outside, f"importing guideloom imported repository files: {outside}"


def test_a_virtual_environment_inside_the_clone_holds_no_repository_files(tmp_path):
    """``python3 -m venv .venv`` in the clone (a real one): what is installed there is not the
    repository's; the repository's own files are, and a sibling folder sharing the name's
    prefix is not."""
    root = tmp_path / "guideloom"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")],
                   check=True, timeout=120)
    (site,) = (root / ".venv" / "lib").glob("python3*/site-packages")
    installed = site / "h5py" / "__init__.py"
    installed.parent.mkdir()
    installed.write_text("")
    (root / "tests").mkdir()
    (root / "tests" / "helpers.py").write_text("")
    assert not repository_file(str(installed), root)
    assert repository_file(str(root / "tests" / "helpers.py"), root)
    assert not repository_file(str(tmp_path / "guideloom-venv" / "h5py" / "__init__.py"), root)
    assert not repository_file("", root)


def test_import_guideloom_has_no_side_effects(tmp_path):
    before, after = effects(["guideloom"], tmp_path, [])
    assert_unchanged(before, after)
    assert "distributed" not in after["modules"]  # import guideloom stays cheap


def test_importing_every_module_has_no_side_effects(tmp_path):
    """Every module; without torch (an optional extra), every module that imports without it:
    ``guideloom.pytorch`` and its modules raise an ImportError naming the extra instead
    (tests/test_import_paths.py checks that)."""
    names = module_names()
    if importlib.util.find_spec("torch") is None:
        names = [n for n in names if n != "guideloom.pytorch"
                 and not n.startswith("guideloom.pytorch.")]
    assert "guideloom.cluster.watchdog" in names
    assert "guideloom.cluster.embedded" in names
    before, after = effects(names, tmp_path, DEPENDENCIES)
    assert_unchanged(before, after)
    added = set(after["modules"]) - set(before["modules"])
    assert set(names) <= added


def test_the_watchdog_starts_only_when_asked(tmp_path):
    """The worker preload hook starts it; importing the module does not."""
    script = (
        "import os, threading\n"
        "os.environ['GUIDELOOM_DRIVER'] = f'{os.getpid()}:0'\n"  # a token that names no process
        "from guideloom.cluster import watchdog\n"
        "names = lambda: [t.name for t in threading.enumerate()]\n"
        "assert 'guideloom-driver-watchdog' not in names(), names()\n"
        "watchdog.POLL_SECONDS = 0.01\n"
        "assert watchdog.dask_setup(object()) is None\n"
        "threading.Event().wait(30)\n"  # the watchdog ends the process (exit code 0) long before
        "raise SystemExit(3)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60, env=_clean_env())
    assert out.returncode == 0, out.stderr


def test_importing_the_command_line_entry_module_runs_nothing():
    """``guideloom/__main__.py`` runs the CLI under ``python -m guideloom`` only: importing it
    (a documentation tool, a spawned child) must neither parse ``sys.argv`` nor exit."""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", "import guideloom.__main__; print('imported')",
                           "--no-such-flag"], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "imported"
    ran = subprocess.run([sys.executable, "-m", "guideloom", "--version"], capture_output=True,
                         text=True, timeout=120, check=False)
    assert ran.returncode == 0
    assert ran.stdout.strip()
