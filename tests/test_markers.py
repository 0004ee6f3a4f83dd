"""The suite's own rules: registered markers only, a per-test timeout, and markers that match
what each test needs (docs/testing.md).

The pytester runs use this repository's ``[tool.pytest.ini_options]`` as they are; the
collection check collects the real suite in-process (nothing runs) and reads each item's
markers.
"""

from __future__ import annotations

import inspect
import re
import tomllib
from collections import defaultdict
from pathlib import Path

import psutil
import pytest

from tests.conftest import CLUSTER_CLIENT, FIXTURE_MARKERS

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
KINDS = ("slow", "cluster", "slurm", "browser")
# Calls in a test's own body that start a Dask cluster or Chromium.
STARTS = {
    "cluster": re.compile(r"\b(LocalCluster|SpecCluster|start_local_cluster|embedded_cluster|"
                          r"local_cluster)\("),
    "browser": re.compile(r"\b(find_chromium|chromium_page)\("),
}


def ini_options() -> dict:
    return tomllib.loads(PYPROJECT.read_text())["tool"]["pytest"]["ini_options"]


def with_our_config(pytester: pytest.Pytester) -> None:
    """Give the pytester directory this repository's pytest section, as written."""
    text = PYPROJECT.read_text()
    start = text.index("[tool.pytest.ini_options]")
    end = text.find("\n[", start + 1)
    section = text[start:] if end < 0 else text[start:end]
    (pytester.path / "pyproject.toml").write_text(section.replace('testpaths = ["tests"]\n', ""))


def test_the_markers_are_registered_and_strict():
    options = ini_options()
    assert options["strict_markers"] is True  # pytest 9 (it ignores --strict-markers in addopts)
    assert "--strict-markers" in options["addopts"].split()  # pytest 8
    names = {line.split(":")[0].split("(")[0] for line in options["markers"]}
    assert set(KINDS) | {"fast_case"} <= names
    assert options["timeout"] == 300
    assert options["timeout_method"] == "signal"


def test_an_unregistered_marker_is_an_error(pytester: pytest.Pytester):
    with_our_config(pytester)
    pytester.makepyfile(test_typo="""
        import pytest

        @pytest.mark.clustr
        def test_one():
            pass

        @pytest.mark.cluster
        def test_two():
            pass
    """)
    result = pytester.runpytest_subprocess("test_typo.py", timeout=120)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    result.stdout.fnmatch_lines(["*'clustr' not found in `markers` configuration option*"])


@pytest.mark.slow  # two real timeouts, ~6 s; fast: the timeout settings and a pytester run above
def test_a_hanging_test_fails_as_a_timeout_and_the_run_goes_on(pytester: pytest.Pytester,
                                                               tmp_path: Path, request):
    assert request.config.pluginmanager.hasplugin("timeout"), "pytest-timeout is not installed"
    with_our_config(pytester)
    pid_file = tmp_path / "child.pid"
    pytester.makepyfile(test_hangs=f"""
        import subprocess
        import sys
        import threading

        import pytest

        CHILD = ("import os, threading; open({str(pid_file)!r}, 'w').write(str(os.getpid()));"
                 " threading.Event().wait()")

        @pytest.mark.timeout(2)
        def test_waits_for_a_child_that_never_ends():
            subprocess.run([sys.executable, "-c", CHILD])

        def test_waits_forever_under_the_ini_timeout():
            threading.Event().wait()

        def test_after_them():
            pass
    """)
    # The ini's 300 s, lowered from the command line for the second test; the first has its own.
    result = pytester.runpytest_subprocess("test_hangs.py", "-o", "timeout=3", timeout=120)
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["*Failed: Timeout (>2.0s) from pytest-timeout*",
                                 "*Failed: Timeout (>3.0s) from pytest-timeout*"],
                                consecutive=False)
    child = int(pid_file.read_text())
    assert not psutil.pid_exists(child), "the hanging test's subprocess outlived it"


_SUITE: list[pytest.Item] = []  # collected once per session, by the first test asking


class _Collector:
    """A plugin keeping the items a collection ends with."""

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        _SUITE.extend(session.items)


def suite() -> list[pytest.Item]:
    """Every test of the suite as collected with this repository's configuration (none runs).

    A nested ``pytest.main`` rather than pytester: pytester drops the modules first imported
    while it ran, and torch cannot be imported a second time in one process.
    """
    if not _SUITE:
        code = pytest.main([str(ROOT / "tests"), "--collect-only", "-qq", "-p", "no:cacheprovider"],
                           plugins=[_Collector()])
        assert code == pytest.ExitCode.OK
        assert len(_SUITE) > 900
    return _SUITE


def marked(item: pytest.Item, name: str) -> bool:
    return item.get_closest_marker(name) is not None


def test_every_test_carries_the_markers_its_fixtures_and_calls_imply():
    missing = []
    for item in suite():
        needs = {FIXTURE_MARKERS[f] for f in item.fixturenames if f in FIXTURE_MARKERS}
        params = getattr(item, "callspec", None)
        if params and any(isinstance(v, str) and CLUSTER_CLIENT.match(v)
                          for v in params.params.values()):
            needs.add("cluster")
        source = inspect.getsource(item.function)
        needs |= {kind for kind, calls in STARTS.items() if calls.search(source)}
        missing += [f"{item.nodeid}: {kind}" for kind in sorted(needs) if not marked(item, kind)]
    assert not missing, "tests without the markers they need:\n" + "\n".join(missing)


def test_the_fast_set_keeps_a_case_of_every_parametrized_test_and_of_every_kind():
    items = suite()
    families: dict[str, list[pytest.Item]] = defaultdict(list)
    for item in items:
        families[item.nodeid.split("[")[0]].append(item)
    for family, cases in families.items():
        fast = cases[0].get_closest_marker("fast_case")
        if fast is None:
            continue
        ids = {case.callspec.id for case in cases}
        assert set(fast.args) <= ids, f"{family}: fast_case names no such case"
        assert [c for c in cases if not marked(c, "slow")], f"{family}: no case in the fast set"
    for kind in ("cluster", "slurm", "browser"):
        assert [i for i in items if marked(i, kind) and not marked(i, "slow")], kind
    slow = [i for i in items if marked(i, "slow")]
    assert 0 < len(slow) < len(items) // 4
