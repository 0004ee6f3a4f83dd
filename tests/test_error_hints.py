"""Errors a new user hits that must name the real cause and the fix, in one line, and fast:
the ``guideloom`` command in a subprocess from a temporary directory, and the Python API."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from guideloom.demo import make_demo_data
from tests.test_cli_newcomer import guideloom

NOBODY = "tcp://127.0.0.1:1"  # a privileged port: no scheduler listens there


@pytest.fixture
def project(tmp_path) -> Path:
    """A project directory with 4 small demo experiments in ./demo-data."""
    make_demo_data(tmp_path / "demo-data", n=4, scan_shape=(8, 10))
    return tmp_path


def assert_unreachable_hint(line: str) -> None:
    assert NOBODY in line
    assert "dask scheduler" in line and "--scheduler local" in line


@pytest.mark.parametrize("extra", [(), ("--dry-run",)], ids=["run", "dry-run"])
def test_an_unreachable_scheduler_fails_fast_and_says_how_to_start_one(project, extra):
    t0 = time.monotonic()
    out = guideloom("run", "force_signals", "--scheduler", NOBODY, *extra, cwd=project,
                    timeout=60)
    wall = time.monotonic() - t0
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("guideloom: error: no Dask scheduler answered at")
    assert_unreachable_hint(lines[0])
    assert wall < 10, f"the command took {wall:.1f} s to give up (Dask's default wait is 30 s)"
    assert not (project / "demo-data" / "exports").exists()


def test_an_unreachable_scheduler_from_python_is_an_oserror_within_5_s(demo_zip, tmp_path):
    from guideloom import export_to_numpy
    from guideloom.errors import SchedulerUnreachableError

    t0 = time.monotonic()
    with pytest.raises(OSError) as caught:
        export_to_numpy("force-curve", tmp_path / "out", data_dir=demo_zip, client=NOBODY)
    wall = time.monotonic() - t0
    assert isinstance(caught.value, SchedulerUnreachableError)
    assert_unreachable_hint(str(caught.value))
    assert "client='local'" in str(caught.value)
    assert wall < 5, f"gave up after {wall:.1f} s"
    assert not (tmp_path / "out").exists()
