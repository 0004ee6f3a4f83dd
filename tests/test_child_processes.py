"""The suite's own process discipline (tests/child_processes.py), with real processes and signals:
a child started by :func:`start_interruptible` ends on SIGINT even when the test process ignores
SIGINT (a background job of a non-interactive shell), and a test that leaves a process running
fails, the process killed (a child, and an orphan reparented to PID 1)."""

from __future__ import annotations

import os
import signal
import subprocess
import textwrap
from pathlib import Path

import psutil
import pytest

from tests.child_processes import start_interruptible

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def sigint_ignored():
    """This process with SIGINT ignored, as ``nohup sh -c 'pytest ... &'`` starts it."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_started_child_ends_on_sigint_although_the_test_process_ignores_it(sigint_ignored):
    proc = start_interruptible(["sleep", "600"])
    try:
        assert os.getpgid(proc.pid) == proc.pid  # a group of its own: killpg reaches it alone
        os.killpg(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=30) == -signal.SIGINT
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_a_plain_child_of_that_process_would_ignore_it(sigint_ignored):
    """The control: the disposition is inherited, so without the reset SIGINT does nothing
    (SIGINT is delivered before the SIGTERM sent after it, being the lower signal)."""
    proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        os.killpg(proc.pid, signal.SIGINT)
        os.killpg(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=30) == -signal.SIGTERM
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


LEAKING_TESTS = textwrap.dedent('''
    import subprocess
    from pathlib import Path

    import pytest

    def test_leaves_a_child(tmp_path):
        proc = subprocess.Popen(["sleep", "600"])
        Path("{pids}/child").write_text(str(proc.pid))

    def test_leaves_an_orphan(tmp_path):
        out = subprocess.run(["sh", "-c", "sleep 600 >/dev/null 2>&1 & echo $!"],
                             capture_output=True, text=True, check=True)
        Path("{pids}/orphan").write_text(out.stdout.strip())

    @pytest.mark.timeout(2)  # pytest-timeout's signal method fails it; teardown still runs
    def test_times_out_waiting_for_its_child(tmp_path):
        proc = subprocess.Popen(["sleep", "600"])
        Path("{pids}/timed_out").write_text(str(proc.pid))
        proc.wait()

    def test_waits_for_its_child():
        subprocess.run(["true"], check=True)
''')


def test_a_test_that_leaves_a_process_running_fails_and_the_process_is_killed(pytester,
                                                                               tmp_path,
                                                                               monkeypatch):
    # the generated suite imports the check from this checkout, wherever pytest was started
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    pids = tmp_path / "pids"
    pids.mkdir()
    pytester.makeconftest("from tests.child_processes import no_leaked_process  # noqa: F401\n")
    pytester.makepyfile(test_leaks=LEAKING_TESTS.format(pids=pids))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q",
                                           "-o", "timeout_method=signal")
    outcomes = result.parseoutcomes()
    assert (outcomes.get("passed"), outcomes.get("failed"), outcomes.get("errors")) == \
        (3, 1, 3), result.stdout.str()
    text = result.stdout.str()
    assert "Timeout" in text
    assert "ERROR at teardown of test_times_out_waiting_for_its_child" in text
    for name in ("child", "orphan", "timed_out"):
        pid = int((pids / name).read_text())
        assert f"pid {pid} " in text, text
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    assert "ERROR at teardown of test_leaves_a_child" in text
    assert "ERROR at teardown of test_leaves_an_orphan" in text
    assert "the test left 1 process(es) running (now killed)" in text
