"""mypy on the source tree guideloom is imported from: 0 errors with the project's configuration
(``[tool.mypy]`` in pyproject.toml), ``--strict`` clean for ``guideloom/formats`` and
``guideloom/export``, the real classes satisfying the format protocols (tests/typing_seams.py),
and the lazy top-level names (``guideloom.load``…) typed for editors, not ``Any``.

That the wheel ships ``py.typed`` is checked in tests/test_packaging.py.
"""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import guideloom

SOURCE_ROOT = Path(guideloom.__file__).resolve().parents[1]  # the tree guideloom is read from
CONFIG = SOURCE_ROOT / "pyproject.toml"
SEAMS = Path(__file__).with_name("typing_seams.py")

NO_CONFIG = not (CONFIG.is_file() and "[tool.mypy]" in CONFIG.read_text())
pytestmark = pytest.mark.skipif(
    NO_CONFIG,
    reason=f"guideloom is not imported from a source tree with its pyproject.toml ({SOURCE_ROOT})",
)


@pytest.fixture(scope="module")
def mypy_cache(tmp_path_factory) -> Path:
    """One cache for this module's runs (the first is cold, the others reuse it)."""
    return tmp_path_factory.mktemp("mypy-cache")


def _command(cache: Path, args: tuple[str, ...]) -> list[str]:
    return [sys.executable, "-m", "mypy", "--config-file", str(CONFIG), "--cache-dir", str(cache),
            "--no-color-output", "--no-error-summary", *args]


def mypy(cache: Path, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """``python -m mypy ARGS`` in the source root with its configuration (the run
    :func:`prestart` started for these arguments, if there is one)."""
    key = tuple(map(str, args))
    started = _STARTED.pop(key, None)
    if started is None:
        return subprocess.run(_command(cache, key), cwd=SOURCE_ROOT, capture_output=True,
                              text=True, timeout=600)
    try:
        stdout, stderr = started.communicate(timeout=600)
    except BaseException:  # a timeout or Ctrl-C while waiting: the run ends with the test
        started.kill()
        started.communicate()
        raise
    return subprocess.CompletedProcess(started.args, started.returncode, stdout, stderr)


PROTOCOL_ARGS = ("--strict", "--follow-imports=silent", str(SEAMS))
_STARTED: dict[tuple[str, ...], subprocess.Popen[str]] = {}


def prestart(items: list[pytest.Item], config: pytest.Config) -> None:
    """Start the protocol check's mypy (a cold run of ~30 s) as collection ends, when it is
    among the tests to run (tests/conftest.py calls this): it checks while the tests before it
    run on the other core, and the test reads its result. Same command, its own cache."""
    if not any(item.name == "test_the_real_classes_satisfy_the_format_protocols"
               for item in items) or NO_CONFIG:
        return
    if os.environ.get("PYTEST_XDIST_WORKER"):  # every worker collects it, one runs it: the
        return  # test starts its mypy then, while the other worker goes on
    cache = Path(tempfile.mkdtemp(prefix="guideloom-mypy-cache-"))
    proc = subprocess.Popen(_command(cache, PROTOCOL_ARGS), cwd=SOURCE_ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _STARTED[PROTOCOL_ARGS] = proc

    def stop() -> None:  # the test did not run (-x, Ctrl-C): end the run, drop its cache
        if _STARTED.pop(PROTOCOL_ARGS, None) is not None:
            proc.kill()
            proc.communicate()
        shutil.rmtree(cache, ignore_errors=True)

    config.add_cleanup(stop)


def errors(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stdout.splitlines() if ": error:" in line]


@pytest.mark.slow  # a whole-package mypy run: ~30 s
def test_mypy_finds_no_errors_in_the_package(mypy_cache):
    result = mypy(mypy_cache, "guideloom")
    assert errors(result) == [], result.stdout[-4000:]
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]


STRICT_PACKAGES = ("guideloom/read", "guideloom/select", "guideloom/export", "guideloom/formats",
                   "guideloom/cluster")


def test_the_layered_packages_are_strict_clean(mypy_cache):
    """``mypy --strict`` on the packages of the layers (issue 40), in the fast set."""
    result = mypy(mypy_cache, "--strict", "--follow-imports=silent", *STRICT_PACKAGES)
    assert errors(result) == [], result.stdout[-4000:]
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]


def test_the_real_classes_satisfy_the_format_protocols(mypy_cache):
    result = mypy(mypy_cache, *PROTOCOL_ARGS)
    assert errors(result) == [], result.stdout
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow  # a whole-package mypy run: ~30 s
def test_the_lazy_top_level_names_are_typed_for_editors(mypy_cache, tmp_path):
    user = tmp_path / "user_code.py"
    user.write_text("import guideloom\n"
                    "reveal_type(guideloom.load)\n"
                    "reveal_type(guideloom.load_export)\n"
                    "reveal_type(guideloom.Export)\n"
                    "reveal_type(guideloom.export.export)\n"
                    "ds: guideloom.Dataset = guideloom.load('manifest.json')\n"
                    "n: str = guideloom.load_export('out').manifest['count']\n")
    result = mypy(mypy_cache, "--follow-imports=silent", user)
    revealed = [line.split("Revealed type is ", 1)[1] for line in result.stdout.splitlines()
                if "Revealed type is" in line]
    assert len(revealed) == 4, result.stdout
    assert not [r for r in revealed if r.strip('"') == "Any"], revealed
    assert "-> guideloom.select.parse.Dataset" in revealed[0], revealed[0]  # where it is defined
    assert "-> guideloom.reader.Export" in revealed[1], revealed[1]
    # the manifest's count is an int: assigning it to a str is the one error
    assert [e.split(": error: ")[1] for e in errors(result)] == [
        'Incompatible types in assignment (expression has type "int", variable has type "str")'
        "  [assignment]"], result.stdout


def test_every_lazy_name_is_imported_for_type_checkers():
    tree = ast.parse((SOURCE_ROOT / "guideloom" / "__init__.py").read_text())
    checked: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom):
                    # "X as X": re-exported for mypy --strict users too
                    assert all(a.asname == a.name for a in stmt.names), ast.unparse(stmt)
                    checked |= {a.name for a in stmt.names}
    assert set(guideloom._LAZY) - checked == set()
