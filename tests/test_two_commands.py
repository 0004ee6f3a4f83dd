"""The README's two commands in fresh clones, with the virtual environment inside the clone.

Both commands run literally from the clone, their ``python3`` and ``guideloom`` those of a
``.venv`` made in it (its ``bin`` first on ``PATH``, as ``source .venv/bin/activate`` does), so
nothing is installed into the environment running the suite:

* the way most people do it, ``python3 -m venv .venv`` (every package installed into
  ``.venv``): the test command first, then the main command, then the test command again, so
  each runs after the other and the test command also runs in a clone the main command never
  touched;
* the main command first in a clone whose ``.venv`` shares this environment's packages
  (``--system-site-packages``: quick to install), then the test command.

The test command's pytest half runs, with its own options, on the tests that once broke in
such a clone (``./demo-data`` written by the main command, site-packages inside the clone,
``../shared`` absent beside it) and collects the whole set it names.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: Tests that broke in a clone like these: next to ./demo-data, with site-packages in the clone,
#: with no ../shared/reference beside it.
SENSITIVE = ["tests/test_workflow.py", "tests/test_import_effects.py",
             "tests/test_rddac_layouts.py"]

needs_git = pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                               reason="needs git and a git checkout to clone")


def readme_command(marker: str) -> str:
    """The fenced command after ``<!-- marker -->`` in README.md (as .ci/run reads it)."""
    text = (ROOT / "README.md").read_text()
    found = re.search(rf"<!-- {marker} -->\n```bash\n(.+?)\n```", text)
    assert found, f"README.md has no {marker} block"
    return found.group(1)


def readme_test_command() -> tuple[str, str]:
    """The README's test command as its install half and its pytest half."""
    install, _, tests = readme_command("test-command").partition(" && ")
    assert install.startswith("python3 -m pip install -e "), install
    assert tests.startswith("python3 -m pytest -q"), tests
    return install, tests


def in_venv(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
            "VIRTUAL_ENV": str(venv)}


def bash(command: str, clone: Path, env: dict[str, str], timeout: float
         ) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-euo", "pipefail", "-c", command], cwd=clone, env=env,
                          capture_output=True, text=True, timeout=timeout)


def fresh_clone(tmp_path: Path, *venv_options: str) -> tuple[Path, dict[str, str]]:
    """A clone of this repository, ``python3 -m venv [options] .venv`` made in it by this
    suite's Python."""
    clone = tmp_path / "guideloom"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=120)
    assert not (tmp_path / "shared").exists()  # nothing of ../shared beside this clone
    subprocess.run([sys.executable, "-m", "venv", *venv_options, ".venv"], cwd=clone,
                   check=True, timeout=120)
    return clone, in_venv(clone / ".venv")


def run_main_command(clone: Path, env: dict[str, str]) -> None:
    main = bash(readme_command("main-command"), clone, env, timeout=1200)
    assert main.returncode == 0, main.stdout[-2000:] + main.stderr[-3000:]
    export = clone / "demo-data" / "exports" / "force-signals"
    assert (export / "export.json").is_file(), "the demo did not export where the README says"
    assert f"output: {export}" in main.stdout


def run_test_command(clone: Path, env: dict[str, str], *, install: bool) -> str:
    """The test command (its install half when ``install``): its pytest half, with its own
    options, collects its whole set and runs :data:`SENSITIVE`; returns the run's summary."""
    install_half, tests = readme_test_command()
    if install:
        done = bash(install_half, clone, env, timeout=1500)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    collected = bash(f"{tests} -p no:cacheprovider --collect-only", clone, env, timeout=600)
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr[-2000:]
    assert re.search(r"^\d+(/\d+)? tests collected", collected.stdout, flags=re.M), \
        collected.stdout[-500:]
    ran = bash(f"{tests} -p no:cacheprovider -rs {' '.join(SENSITIVE)}", clone, env, timeout=900)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-2000:]
    summary = ran.stdout.strip().splitlines()[-1]
    assert re.search(r"^\d+ passed", summary), ran.stdout[-1500:]
    assert "failed" not in summary, ran.stdout[-1500:]
    return ran.stdout


def where_from(clone: Path, env: dict[str, str], module: str) -> Path:
    """The file ``python3`` of the clone's environment imports ``module`` from."""
    done = subprocess.run(["python3", "-c", f"import {module}; print({module}.__file__)"],
                          cwd=clone, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return Path(done.stdout.strip())


@pytest.mark.slow
@pytest.mark.timeout(3600)
@needs_git
def test_the_test_command_then_the_main_command_then_again_with_venv_in_the_clone(tmp_path):
    """``python3 -m venv .venv`` in the clone: site-packages (h5py, dask, ...) are inside it."""
    clone, env = fresh_clone(tmp_path)
    first = run_test_command(clone, env, install=True)
    assert where_from(clone, env, "guideloom") == clone / "guideloom" / "__init__.py"
    assert where_from(clone, env, "h5py").is_relative_to(clone / ".venv")
    # ../shared/reference is not beside the clone: its test skips, it does not fail
    assert "SKIPPED [1] tests/test_rddac_layouts.py" in first, first[-1500:]
    run_main_command(clone, env)
    run_test_command(clone, env, install=True)
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone,
                            capture_output=True, text=True, check=True, timeout=60)
    assert status.stdout == "", f"the two commands left files git sees:\n{status.stdout}"


@pytest.mark.slow
@pytest.mark.timeout(1800)
@needs_git
def test_main_command_then_the_test_command_in_one_fresh_clone(tmp_path):
    clone, env = fresh_clone(tmp_path, "--system-site-packages")
    run_main_command(clone, env)
    run_test_command(clone, env, install=False)  # its install step is the one just done
    assert where_from(clone, env, "guideloom") == clone / "guideloom" / "__init__.py"
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone,
                            capture_output=True, text=True, check=True, timeout=60)
    assert status.stdout == "", f"the two commands left files git sees:\n{status.stdout}"
