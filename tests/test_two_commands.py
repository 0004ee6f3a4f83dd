"""The README's two commands, main command first, in one fresh clone.

The main command runs literally (its ``python3`` and ``guideloom`` are those of a new virtual
environment that shares this environment's packages, so nothing is installed into the
environment running the suite). The test command then collects the whole suite in the same
clone, and runs the tests that once broke when ``./demo-data`` existed, next to the data the main
command wrote.
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


def readme_command(marker: str) -> str:
    """The fenced command after ``<!-- marker -->`` in README.md (as .ci/run reads it)."""
    text = (ROOT / "README.md").read_text()
    found = re.search(rf"<!-- {marker} -->\n```bash\n(.+?)\n```", text)
    assert found, f"README.md has no {marker} block"
    return found.group(1)


def in_venv(venv: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return {**env, "PATH": f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
            "VIRTUAL_ENV": str(venv)}


@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(),
                    reason="needs git and a git checkout to clone")
def test_main_command_then_the_test_command_in_one_fresh_clone(tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=120)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True, timeout=120)
    env = in_venv(venv)

    main = subprocess.run(["bash", "-euo", "pipefail", "-c", readme_command("main-command")],
                          cwd=clone, env=env, capture_output=True, text=True, timeout=600)
    assert main.returncode == 0, main.stdout[-2000:] + main.stderr[-3000:]
    export = clone / "demo-data" / "exports" / "force-signals"
    assert (export / "export.json").is_file(), "the demo did not export where the README says"
    assert f"output: {export}" in main.stdout

    # The test command's second half (its install step is the one just done), in that clone:
    test_command = readme_command("test-command")
    assert test_command.endswith("python3 -m pytest -q"), test_command
    collected = subprocess.run(["python3", "-m", "pytest", "-q", "--collect-only"], cwd=clone,
                               env=env, capture_output=True, text=True, timeout=600)
    assert collected.returncode == 0, collected.stdout[-3000:] + collected.stderr[-2000:]
    assert re.search(r"^\d+ tests collected", collected.stdout, flags=re.M), collected.stdout[-500:]
    ran = subprocess.run(["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "tests/test_workflow.py"], cwd=clone, env=env, capture_output=True,
                         text=True, timeout=600)
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-2000:]
    assert re.search(r"^\d+ passed", ran.stdout.splitlines()[-1]), ran.stdout[-500:]
