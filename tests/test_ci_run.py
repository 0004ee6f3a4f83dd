"""``.ci/run``: the README's test command and the slow set, both run, both must pass.

The script runs here on small generated suites: a copy of ``.ci/run`` in a folder of its own,
beside a README.md whose two blocks run real pytest on them (``CI_RUN_NO_INSTALL=1``: no
system packages are installed, even as root).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

ROOT = Path(__file__).resolve().parents[1]

PASSING = "def test_ok():\n    assert True\n"
FAILING = "def test_broken():\n    assert False\n"
SLOW = "import pytest\n\n\n@pytest.mark.slow\ndef test_long():\n    assert {}\n"

README = """# a project

<!-- test-command -->
```bash
python3 -m pytest -q -p no:cacheprovider -m "not slow"
```

<!-- slow-test-command -->
```bash
python3 -m pytest -q -p no:cacheprovider -m slow
```
"""


def project(folder: Path, tests: dict[str, str], readme: str = README) -> Path:
    """``folder`` with ``.ci/run``, README.md, a pytest.ini registering ``slow``, and ``tests``."""
    (folder / ".ci").mkdir(parents=True)
    shutil.copy(ROOT / ".ci" / "run", folder / ".ci" / "run")
    (folder / "README.md").write_text(readme)
    (folder / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: long\n")
    (folder / "tests").mkdir()
    for name, text in tests.items():
        (folder / "tests" / name).write_text(text)
    return folder


def ci_run(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    env.update({"PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
                "CI_RUN_NO_INSTALL": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    return subprocess.run(["bash", str(folder / ".ci" / "run"), *args], cwd=folder.parent,
                          env=env, capture_output=True, text=True, timeout=120)


CASES = {
    "both pass": ({"test_a.py": PASSING, "test_b.py": SLOW.format("True")}, 0, (0, 0)),
    "the fast set fails": ({"test_a.py": FAILING, "test_b.py": SLOW.format("True")}, 1, (1, 0)),
    "the slow set fails": ({"test_a.py": PASSING, "test_b.py": SLOW.format("False")}, 1, (0, 1)),
    "no slow tests": ({"test_a.py": PASSING}, 1, (0, 5)),
}


@pytest.mark.fast_case("the slow set fails", "no slow tests")
@pytest.mark.parametrize("case", list(CASES))
def test_both_sets_run_and_both_must_pass(tmp_path, case):
    tests, code, (fast_code, slow_code) = CASES[case]
    done = ci_run(project(tmp_path / "repo", tests))
    out = done.stdout
    assert done.returncode == code, out + done.stderr
    # both commands ran, in order, whatever the first one's result
    fast = out.index('+ python3 -m pytest -q -p no:cacheprovider -m "not slow"')
    slow = out.index("+ python3 -m pytest -q -p no:cacheprovider -m slow")
    assert fast < slow
    said = {0: "passed", 1: "failed (exit code 1)",
            5: "collected no tests (pytest exit code 5): a failure"}
    assert f".ci/run: the test command (fast set) {said[fast_code]}" in out, out
    assert f".ci/run: the slow set {said[slow_code]}" in out, out
    if code:
        assert (f".ci/run: FAILED (test command: exit code {fast_code}, slow set: exit code "
                f"{slow_code})") in done.stderr
    else:
        assert out.rstrip().endswith(".ci/run: both sets passed"), out


# What each set sees of how it was launched: the fast set as a background job under nohup
# (SIGINT and SIGHUP ignored, the caller's session), the slow set in a session of its own with
# SIGINT at its default (issue 41). OUTER_SID is the session of the test running .ci/run.
LAUNCH_FAST = """import os, signal


def test_launched_under_nohup_in_the_background():
    assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    assert os.getsid(0) == int(os.environ["OUTER_SID"])
"""
LAUNCH_SLOW = """import os, signal

import pytest


@pytest.mark.slow
def test_launched_in_a_session_of_its_own():
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert os.getsid(0) != int(os.environ["OUTER_SID"])
    assert os.getpgid(0) == os.getsid(0)  # the session's one process group
"""


def test_the_fast_set_runs_under_nohup_and_the_slow_set_under_setsid(tmp_path):
    folder = project(tmp_path / "repo", {"test_fast.py": LAUNCH_FAST, "test_slow.py": LAUNCH_SLOW})
    os.environ["OUTER_SID"] = str(os.getsid(0))
    try:
        done = ci_run(folder)
    finally:
        del os.environ["OUTER_SID"]
    assert done.returncode == 0, done.stdout + done.stderr
    assert '-m "not slow"  (launched: nohup)' in done.stdout
    assert "-m slow  (launched: setsid)" in done.stdout
    assert ".ci/run: both sets passed" in done.stdout
    assert not (folder / "nohup.out").exists()
    assert not (tmp_path / "nohup.out").exists()


BLOCKING = """import os, threading
from pathlib import Path


def test_blocks():
    Path(os.environ["MARKER"]).write_text(str(os.getpid()))
    threading.Event().wait()
"""


def test_sigterm_to_ci_run_ends_the_running_set_whole(tmp_path):
    """The set runs in a process group of its own (SIGINT ignored in it): stopping .ci/run
    must end that group, not leave pytest running."""
    folder = project(tmp_path / "repo", {"test_a.py": BLOCKING})
    marker = tmp_path / "started"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    env.update({"PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
                "CI_RUN_NO_INSTALL": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
                "MARKER": str(marker)})
    proc = subprocess.Popen(["bash", str(folder / ".ci" / "run")], cwd=folder.parent, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not (marker.exists() and marker.read_text()):  # the test is running
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the generated test never started"
            time.sleep(0.02)
        pytest_pid = int(marker.read_text())
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 143
    try:
        _, alive = psutil.wait_procs([psutil.Process(pytest_pid)], timeout=30)
    except psutil.NoSuchProcess:
        alive = []
    assert not alive, "pytest outlived .ci/run"


def test_a_readme_without_the_slow_set_block_is_an_error(tmp_path):
    readme = README[:README.index("<!-- slow-test-command -->")]
    done = ci_run(project(tmp_path / "repo", {"test_a.py": PASSING}, readme), "--dry-run")
    assert done.returncode == 2
    assert done.stderr.strip() == (".ci/run: no command found after <!-- slow-test-command --> "
                                   "in README.md")
    assert "+ " not in done.stdout  # nothing ran


def test_the_readme_commands_are_the_fast_set_and_the_slow_set_of_the_whole_suite():
    """What ``.ci/run`` runs here: the README's install and ``-m "not slow"``, then
    ``-m slow``, each in two pytest-xdist workers: the two halves of the whole suite and
    nothing else."""
    done = subprocess.run(["bash", str(ROOT / ".ci" / "run"), "--dry-run"], capture_output=True,
                          text=True, timeout=60, env={**os.environ, "CI_RUN_NO_INSTALL": "1"})
    assert done.returncode == 0, done.stderr
    test_command, slow_command = done.stdout.splitlines()
    readme = (ROOT / "README.md").read_text()
    for marker, command in (("test-command", test_command), ("slow-test-command", slow_command)):
        assert f"<!-- {marker} -->\n```bash\n{command}\n```" in readme
    install, _, fast = test_command.partition(" && ")
    assert install == 'python3 -m pip install -e ".[test]" torch==2.13.0'
    assert fast == 'python3 -m pytest -q -m "not slow" -n 2'
    assert slow_command == "python3 -m pytest -q -m slow -n 2"


def test_ci_run_is_executable():
    assert os.access(ROOT / ".ci" / "run", os.X_OK)
    assert (ROOT / ".ci" / "run").read_text().startswith("#!/usr/bin/env bash\n")
