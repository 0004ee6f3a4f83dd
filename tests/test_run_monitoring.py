"""Watching an export: phases, skips and rates in export.json, on the terminal, on the
dashboard's /guideloom page (real embedded cluster, real HTTP on 127.0.0.1) and in the saved run
report; ``guideloom status`` telling a running finalize from an interrupted job."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import urllib.request
import uuid
from pathlib import Path

import pytest

import guideloom
from guideloom.errors import SkippedDataWarning
from tests import export_helpers as helpers
from tests.child_processes import start_interruptible
from tests.zip_helpers import corrupt_member

ROOT = Path(__file__).resolve().parents[1]
PHASE_KEYS = ("plan_s", "tasks_s", "finalize_s", "checksums_s", "publish_s")
PHASES = ("plan", "read-transform-write", "finalize", "checksums", "publish")
DAMAGED = "0004.h5"  # experiment 4, in concave.zip of the demo data
NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@pytest.fixture
def damaged(demo_copy) -> Path:
    """The 36-experiment demo data with experiment 4's HDF5 member overwritten."""
    corrupt_member(demo_copy / "concave.zip", DAMAGED)
    return demo_copy


def test_export_json_timings_hold_every_phase(damaged, tmp_path):
    with pytest.warns(SkippedDataWarning):
        result = guideloom.export("force-curve", tmp_path / "o", kind="npy", data_dir=damaged,
                                  client="sync", partition_size=6, on_error="skip",
                                  record_transform=helpers.first_rows)
    timings = json.loads((tmp_path / "o" / "export.json").read_text())["timings"]
    assert timings == result.manifest["timings"]
    assert all(timings[k] >= 0 for k in PHASE_KEYS), timings
    assert timings["tasks_s"] > 0
    assert timings["finalize_s"] > 0
    # the phases follow one another inside the run's total
    assert sum(timings[k] for k in PHASE_KEYS) <= timings["total_s"] + 1e-3


def test_in_process_report_has_phases_throughput_and_skips(damaged, tmp_path):
    report = tmp_path / "reports" / "run.html"
    with pytest.warns(SkippedDataWarning):
        guideloom.export_to_numpy("force-curve", tmp_path / "o", data_dir=damaged,
                                  client="sync", partition_size=6, on_error="skip",
                                  record_transform=helpers.first_rows, report=report)
    page = report.read_text()
    assert "36 / 36" in page
    assert "published" in page
    for phase in PHASES:
        assert f"<td>{phase}</td>" in page
    row = re.search(r'<tr class="gl-skip"><td>(\w+)</td><td>([^<]*)</td><td>([^<]*)</td>', page)
    assert row
    assert row.group(1) == "4"
    assert row.group(2).endswith(f"concave.zip::{DAMAGED}")
    assert "damaged" in row.group(3)
    assert "<th>mode</th><td>in-process</td>" in page  # the placement decision
    for plot in ("phase_timeline", "task_stream", "throughput"):
        assert f'"name":"{plot}"' in page.replace(" ", "")
    # one file: Bokeh's JavaScript is inside, nothing is fetched from the network
    assert not re.search(r"<script[^>]+src=", page)
    assert "cdn.bokeh.org" not in page


def test_a_failed_run_still_writes_its_report(damaged, tmp_path):
    report = tmp_path / "failed.html"
    with pytest.raises(guideloom.GuideloomError, match="experiment 4"):
        guideloom.export_to_numpy("force-curve", tmp_path / "o", data_dir=damaged,
                                  client="sync", partition_size=6,
                                  record_transform=helpers.first_rows, report=report)
    page = report.read_text()
    assert "): failed</h3>" in page
    assert DAMAGED in page
    assert not (tmp_path / "o").exists()


@pytest.mark.cluster
@pytest.mark.slow
def test_a_dask_scheduler_with_the_preload_serves_the_page(damaged, tmp_path, monkeypatch,
                                                          capsys, caplog):
    from guideloom.cluster.local_procs import start_local_cluster

    caplog.set_level("INFO", logger="guideloom")  # the dashboard lines are log records

    monkeypatch.setenv("DASK_DISTRIBUTED__SCHEDULER__PRELOAD", "guideloom.cluster.dashboard")
    with start_local_cluster(1, pythonpath=[ROOT], state_dir=tmp_path / "cluster") as procs:
        with pytest.warns(SkippedDataWarning):
            guideloom.export_to_numpy("force-curve", tmp_path / "o", data_dir=damaged,
                                      client=procs.address, partition_size=6, on_error="skip",
                                      record_transform=helpers.first_rows)
        with procs.client(timeout=30) as client:
            exports = client.run_on_scheduler(_exports_on_scheduler)
        page = procs.dashboard_url.replace("/status", "/guideloom")
        with NO_PROXY.open(page, timeout=30) as answer:
            assert answer.status == 200
            assert 'href="guideloom"' in answer.read().decode()
    printed = capsys.readouterr().err + caplog.text
    assert f"guideloom page: {page} (experiments" in printed, printed  # asked, and it is there
    (state,) = exports.values()
    # the driver's client closed with the run: its last event still arrived
    assert (state["status"], state["done"], state["total"]) == ("published", 36, 36)
    assert [s["sim_id"] for s in state["skipped"]] == ["4"]
    assert [p["name"] for p in state["phases"]] == list(PHASES)


@pytest.mark.slow  # dask scheduler/worker processes, ~7 s; fast: the page on the embedded cluster
@pytest.mark.cluster
def test_a_dask_scheduler_without_the_preload_gets_no_dead_page_link(damaged, tmp_path,
                                                                     monkeypatch, capsys,
                                                                     caplog):
    """A real ``dask scheduler`` we did not start, without guideloom's preload: the printed
    Dask dashboard URL works, no /guideloom URL is printed (it would be missing there), and
    the output says how to get the page."""
    import urllib.error

    from guideloom.cluster.local_procs import start_local_cluster

    caplog.set_level("INFO", logger="guideloom")  # the dashboard lines are log records
    monkeypatch.delenv("DASK_DISTRIBUTED__SCHEDULER__PRELOAD", raising=False)
    with start_local_cluster(1, pythonpath=[ROOT], state_dir=tmp_path / "cluster") as procs:
        with pytest.warns(SkippedDataWarning):
            guideloom.export_to_numpy("force-curve", tmp_path / "o", data_dir=damaged,
                                      client=procs.address, partition_size=6, on_error="skip",
                                      record_transform=helpers.first_rows)
        printed = capsys.readouterr().err + caplog.text
        (link,) = re.findall(r"Dask dashboard: (\S+)", printed)
        with NO_PROXY.open(link, timeout=30) as answer:
            assert answer.status == 200
        with pytest.raises(urllib.error.HTTPError) as missing:  # the page is not there
            NO_PROXY.open(link.replace("/status", "/guideloom"), timeout=30)
        assert missing.value.code == 404
    assert "/guideloom (experiments" not in printed
    assert ("guideloom page: not served by this scheduler; start the scheduler with "
            "`dask scheduler --preload guideloom.cluster.dashboard`") in printed, printed


def _exports_on_scheduler(dask_scheduler=None) -> dict:
    return dict(dask_scheduler.plugins["guideloom-dashboard"].exports)


CLI_JOB = f"""
python_path = ["{ROOT}"]
[dataset]
data_dir = "data"
[view]
name = "force-curve"
[transforms]
record = "tests.export_helpers:first_rows"
[output]
kind = "npy"
path = "out"
partition_size = 6
[run]
on_error = "skip"
"""


def _cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GUIDELOOM_")}
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


def _project(damaged: Path, tmp_path: Path) -> Path:
    project = tmp_path / "project"
    project.mkdir()
    os.replace(damaged, project / "data")
    (project / "job.toml").write_text(CLI_JOB)
    return project


def test_cli_run_shows_phases_skips_and_rates_and_writes_the_report(damaged, tmp_path):
    project = _project(damaged, tmp_path)
    # every phase shown, however short (by default a phase under 1 s gets no line)
    run = subprocess.run([sys.executable, "-m", "guideloom", "run", "job.toml", "--scheduler",
                          "sync", "--report", "report.html"], cwd=project,
                         env=_cli_env(GUIDELOOM_PHASE_LINE_S="0"),
                         capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    bar = [line for line in re.split(r"[\r\n]", run.stderr) if "read-transform-write" in line]
    assert bar, run.stderr
    assert "36/36" in bar[-1], run.stderr
    assert "skipped 1" in bar[-1], run.stderr
    assert "exp/s" in bar[-1]
    assert "MB/s decoded" in bar[-1]
    assert "MB/s written" in bar[-1]
    assert "MB/s produced" in bar[-1]  # the transform output, named apart (issue 41)
    for phase in ("finalize", "checksums", "publish"):
        assert re.search(rf"force-curve {phase} took \d+\.\d s", run.stderr), run.stderr
    assert "closing the gaps of 1 skipped experiments" in run.stderr
    page = (project / "report.html").read_text()
    assert '<tr class="gl-skip"><td>4</td>' in page


def test_a_sub_second_cli_run_prints_no_line_for_its_short_phases(damaged, tmp_path):
    """By default the phases after the tasks are shown only once they last ``phase_line_s``
    (1 s): a sub-second job prints its tasks bar and summary, not six ``took 0.0 s`` lines
    and two bars of one step each."""
    project = _project(damaged, tmp_path)
    run = subprocess.run([sys.executable, "-m", "guideloom", "run", "job.toml", "--scheduler",
                          "sync", "--report", "report.html"], cwd=project, env=_cli_env(),
                         capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    timings = json.loads((project / "out" / "export.json").read_text())["timings"]
    after = ("finalize", "checksums", "publish")
    short = [p for p in after if timings[f"{p}_s"] < 0.8]  # (margins: timed apart from the
    assert short, timings  # terminal's timer; on a loaded machine a phase may last longer)
    for phase in short:
        assert f"force-curve {phase} " not in run.stderr, run.stderr
    for phase in [p for p in after if timings[f"{p}_s"] > 1.2]:
        assert re.search(rf"force-curve {phase} took \d+\.\d s", run.stderr), run.stderr
    bar = [line for line in re.split(r"[\r\n]", run.stderr) if "read-transform-write" in line]
    assert bar, run.stderr
    assert "36/36" in bar[-1], run.stderr  # the tasks bar stays
    assert not re.search(r"\d+/\d+ \[[^]]*(file|step)/s", run.stderr), run.stderr


def _open_for_writing(fifo: Path, opened: list[int]) -> None:
    opened.append(os.open(fifo, os.O_WRONLY))  # returns once the run holds the pause


def _status(project: Path) -> str:
    done = subprocess.run([sys.executable, "-m", "guideloom", "status", "out"], cwd=project,
                          env=_cli_env(), capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.slow
def test_status_tells_a_running_finalize_from_an_interrupted_one(damaged, tmp_path):
    project = _project(damaged, tmp_path)
    cmd = [sys.executable, "-m", "guideloom", "run", "job.toml", "--scheduler", "sync"]
    # killed as the finalize phase starts: every partition is done, nothing runs
    killed = subprocess.run(cmd, cwd=project, timeout=180, capture_output=True,
                            env=_cli_env(GUIDELOOM_FAULT_POINT="finalize-started"))
    assert killed.returncode == -9
    shown = _status(project)
    assert ("incomplete: 6/6 partitions done (36/36 experiments); interrupted in finalize"
            in shown), shown
    assert "not running (interrupted): rerun `" in shown

    # the rerun resumes into the finalize phase; held there, status says it is running
    fifo = tmp_path / "pause"
    os.mkfifo(fifo)
    env = _cli_env(GUIDELOOM_PAUSE_POINT="finalize-started", GUIDELOOM_PAUSE_FIFO=str(fifo))
    proc = subprocess.Popen(cmd, cwd=project, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    opened: list[int] = []
    opener = threading.Thread(target=_open_for_writing, args=(fifo, opened), daemon=True)
    opener.start()
    try:
        opener.join(120)
        assert opened, "the rerun never reached the finalize phase"
        shown = _status(project)
        assert "running: finalize; 6/6 partitions done (36/36 experiments)" in shown, shown
        assert f"running now (pid {proc.pid} on " in shown
        assert "interrupted" not in shown
    finally:
        if opened:
            os.close(opened[0])  # the paused run goes on
        else:
            proc.kill()
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))  # frees the opener thread
    assert proc.wait(timeout=120) == 0
    assert "complete: 6/6 partitions done (36/36 experiments; 35 written, 1 skipped)" in \
        _status(project)


def test_status_in_the_first_moments_of_a_run_says_it_is_starting(damaged, tmp_path):
    """The run holds the target's lock but has staged nothing yet (held at the point right
    after the lock): ``status`` names it running, with its pid, not "no export"."""
    project = _project(damaged, tmp_path)
    fifo = tmp_path / "pause"
    os.mkfifo(fifo)
    env = _cli_env(GUIDELOOM_PAUSE_POINT="target-locked", GUIDELOOM_PAUSE_FIFO=str(fifo))
    proc = subprocess.Popen([sys.executable, "-m", "guideloom", "run", "job.toml",
                             "--scheduler", "sync"], cwd=project, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    opened: list[int] = []
    opener = threading.Thread(target=_open_for_writing, args=(fifo, opened), daemon=True)
    opener.start()
    try:
        opener.join(120)
        assert opened, "the run never took the target's lock"
        assert not (project / "out").exists()
        shown = _status(project)
        assert f"out: running (starting), pid {proc.pid} on " in shown, shown
        assert "no export" not in shown
        assert "interrupted" not in shown
        inspected = subprocess.run([sys.executable, "-m", "guideloom", "inspect", "out"],
                                   cwd=project, env=_cli_env(), capture_output=True,
                                   text=True, timeout=60)
        assert inspected.stdout.splitlines()[-1] == (
            f"status: running (starting), pid {proc.pid} on "
            + shown.split(f"pid {proc.pid} on ", 1)[1].splitlines()[0]), inspected.stdout
    finally:
        if opened:
            os.close(opened[0])  # the paused run goes on
        else:
            proc.kill()
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))  # frees the opener thread
    assert proc.wait(timeout=120) == 0
    assert "complete: 6/6 partitions done" in _status(project)


def test_a_starting_run_stopped_by_ctrl_c_leaves_no_running_status(damaged, tmp_path):
    """Held right after taking the lock, a real SIGINT ends the run (exit 130, one line); the
    lock goes with it, so ``status`` no longer says running."""
    import signal

    project = _project(damaged, tmp_path)
    fifo = tmp_path / "pause"
    os.mkfifo(fifo)
    env = _cli_env(GUIDELOOM_PAUSE_POINT="target-locked", GUIDELOOM_PAUSE_FIFO=str(fifo))
    proc = start_interruptible([sys.executable, "-m", "guideloom", "run", "job.toml",
                                "--scheduler", "sync"], cwd=project, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    opened: list[int] = []
    opener = threading.Thread(target=_open_for_writing, args=(fifo, opened), daemon=True)
    opener.start()
    try:
        opener.join(120)
        assert opened, "the run never took the target's lock"
        assert "running (starting), pid " in _status(project)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if opened:
            os.close(opened[0])
        else:
            proc.kill()
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
    assert proc.returncode == 130
    assert err.strip().splitlines()[-1] == "guideloom: interrupted"
    after = subprocess.run([sys.executable, "-m", "guideloom", "status", "out"], cwd=project,
                           env=_cli_env(), capture_output=True, text=True, timeout=60)
    assert after.returncode == 2, after
    assert "no export and no staged job" in after.stderr, after


FAILING_JOB = (CLI_JOB.replace("tests.export_helpers:first_rows",
                               "tests.export_helpers:fail_on_multiples_of_7")
               .replace("partition_size = 6", "partition_size = 2")
               .replace('[run]\non_error = "skip"\n', ""))


def test_a_failed_transform_says_failed_and_which_partitions_a_rerun_keeps(demo_copy,
                                                                           tmp_path):
    """A transform raises at experiment 7 (partition 3 of 18): the run and ``status`` say
    "failed", not "interrupted", and name the partitions a rerun of the same job keeps (0-2);
    the unchanged rerun keeps them and fails again; a real SIGKILL of a rerun reads as
    interrupted; a changed job (``on_error = "skip"``) discards them and completes."""
    project = tmp_path / "project"
    project.mkdir()
    os.replace(demo_copy, project / "data")
    (project / "job.toml").write_text(FAILING_JOB)
    cmd = [sys.executable, "-m", "guideloom", "run", "job.toml", "--scheduler", "sync"]
    failed = subprocess.run(cmd, cwd=project, env=_cli_env(), capture_output=True, text=True,
                            timeout=180)
    assert failed.returncode == 1, failed.stderr
    assert "allocated" not in FAILING_JOB  # (the kill point below is the executor's own)
    (line,) = [x for x in failed.stderr.splitlines() if x.startswith("guideloom: error:")]
    assert "job failed: experiment 7 (" in line, line
    assert "rerun to resume" not in line, line
    assert "a rerun of this same job keeps the 3 of 18 partitions (0-2) staged in " in line
    assert "fails again where this run failed unless the cause was outside the job" in line
    assert "a job with a fixed transform, other data or other options is another job" in line
    shown = _status(project)
    assert ("out: failed: 3/18 partitions done (6/36 experiments); in read-transform-write: "
            "TransformError: experiment 7 (") in shown, shown
    assert "not running (failed): a rerun of this same job keeps the 3 of 18 partitions (0-2)" \
        in shown
    assert "interrupted" not in shown
    inspected = subprocess.run([sys.executable, "-m", "guideloom", "inspect", "out"],
                               cwd=project, env=_cli_env(), capture_output=True, text=True,
                               timeout=60)
    assert inspected.returncode == 0, inspected.stderr
    assert "status: failed: 3/18 partitions done" in inspected.stdout
    assert "a rerun of this same job keeps the 3 of 18 partitions (0-2)" in inspected.stdout
    assert "rerun the job to finish it" not in inspected.stdout

    again = subprocess.run(cmd, cwd=project, env=_cli_env(), capture_output=True, text=True,
                           timeout=180)
    assert again.returncode == 1
    assert "job failed: experiment 7 (" in again.stderr
    assert "keeps the 3 of 18 partitions (0-2)" in again.stderr  # kept, not redone
    assert "failed: 3/18 partitions done" in _status(project)

    # a rerun killed (SIGKILL) once it has resumed the job (its rows allocated): interrupted
    killed = subprocess.run(cmd, cwd=project, timeout=180, capture_output=True,
                            env=_cli_env(GUIDELOOM_FAULT_POINT="allocated"))
    assert killed.returncode == -9
    shown = _status(project)
    assert "; interrupted in read-transform-write" in shown, shown
    assert "not running (interrupted)" in shown, shown
    assert ": failed:" not in shown, shown

    fixed = FAILING_JOB + '[run]\non_error = "skip"\n'
    (project / "job.toml").write_text(fixed)
    done = subprocess.run(cmd, cwd=project, env=_cli_env(), capture_output=True, text=True,
                          timeout=180)
    assert done.returncode == 0, done.stderr
    assert "discarded the staged partitions of an earlier run" in done.stderr
    assert "complete: 18/18 partitions done (36/36 experiments; 31 written, 5 skipped)" in \
        _status(project)


class GatedRun:
    """An export of the damaged demo data on the embedded cluster, in a thread, held with a
    ``distributed.Event`` once 16 experiments (partitions 0-3, one skip) are done."""

    HELD_FROM = 16

    def __init__(self, data: Path, out: Path, report: Path | None = None) -> None:
        import warnings

        from distributed import Event

        from guideloom.cluster import embedded
        from guideloom.cluster.progress import PROGRESS_TOPIC

        self.cluster, _ = embedded.embedded_cluster(2)
        self.client = self.cluster.client
        name = f"guideloom-test-gate-{uuid.uuid4().hex}"
        self.gate = Event(name, client=self.client)
        self.held = threading.Event()  # set when the tasks before the gate have reported
        self.done = 0
        self.errors: list[BaseException] = []
        self.results: list[object] = []

        def progress(event) -> None:  # the scheduler forwards the driver's events here
            if event[1].get("action") == "tasks":
                self.done += event[1]["experiments"]
                if self.done >= self.HELD_FROM:
                    self.held.set()

        self.client.subscribe_topic(PROGRESS_TOPIC, progress)

        def export() -> None:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", SkippedDataWarning)
                    self.results.append(guideloom.export(
                        "force-curve", out, kind="npy", data_dir=data, client="local:2",
                        partition_size=4, on_error="skip", report=report,
                        record_transform=helpers.EventGate(self.HELD_FROM, name)))
            except BaseException as exc:
                self.errors.append(exc)

        self.thread = threading.Thread(target=export, name="gated-export")
        self.thread.start()

    @property
    def page(self) -> str:
        from guideloom.cluster.dashboard import page_link

        return page_link(self.cluster.dashboard_link)

    def wait_held(self) -> None:
        assert self.held.wait(120), f"only {self.done} experiments reported"

    def finish(self) -> None:
        from guideloom.cluster.progress import PROGRESS_TOPIC

        self.gate.set()
        self.thread.join(180)
        self.client.unsubscribe_topic(PROGRESS_TOPIC)
        assert not self.thread.is_alive(), "the export did not end after the gate opened"
        if self.errors:
            raise self.errors[0]


def _plugin_state(run: GatedRun) -> dict:
    from guideloom.cluster.dashboard import PLUGIN_NAME

    plugin = run.cluster.cluster.scheduler.plugins[PLUGIN_NAME]
    (state,) = [s for s in plugin.exports.values() if s["status"] == "running"]
    return state


@pytest.mark.cluster
def test_guideloom_page_on_the_embedded_cluster_and_the_event_log(damaged, tmp_path):
    from dask.utils import key_split

    run = GatedRun(damaged, tmp_path / "o")
    try:
        run.wait_held()
        scheduler = run.cluster.cluster.scheduler
        # the page is served by the scheduler's dashboard, and linked from its navigation bar
        with NO_PROXY.open(run.page, timeout=30) as page:
            assert page.status == 200
            body = page.read().decode()
        assert 'href="guideloom"' in body
        assert "bokeh" in body.lower()
        with NO_PROXY.open(run.cluster.dashboard_link, timeout=30) as status:
            assert 'href="guideloom"' in status.read().decode()
        state = _plugin_state(run)  # what the page shows, held by the scheduler plugin
        assert (state["done"], state["total"], state["phase"]) == (16, 36, "read-transform-write")
        # tasks finished, not submitted: 4 of the 9 partitions have reported (the rest wait)
        from guideloom.cluster.progress_html import export_html

        assert "16 / 36 experiments" in export_html(state)
        assert "; 4 of 9 tasks finished" in export_html(state)
        # the same numbers as JSON, over HTTP, for scripts and curl
        with NO_PROXY.open(run.page + "/json", timeout=30) as answer:
            assert answer.status == 200
            assert answer.headers["Content-Type"].startswith("application/json")
            shown = json.loads(answer.read())
        (mine,) = [e for e in shown["exports"] if e["export"] == state["export"]]
        assert mine["status"] == "running"
        assert mine["phase"] == "read-transform-write"
        assert mine["experiments"] == {"done": 16, "total": 36, "written": 15, "skipped": 1}
        assert mine["tasks"] == {"finished": 4, "total": 9}
        assert [p["name"] for p in mine["phases"]] == ["plan", "read-transform-write"]
        assert mine["phases"][-1]["running"]
        assert not mine["phases"][0]["running"]
        assert [s["sim_id"] for s in mine["skipped"]] == ["4"]
        assert mine["placement"]["mode"] == "local-cluster"
        assert mine["rates"]["experiments_per_s"] > 0
        assert [s["sim_id"] for s in state["skipped"]] == ["4"]
        assert DAMAGED in state["skipped"][0]["error"]
        assert state["bytes_decoded"] > 0
        # per-worker counts (which of the two workers ran the first tasks is Dask's choice)
        workers = state["workers"]
        assert 1 <= len(workers) <= 2
        assert all(w.startswith("tls://127.0.0.1:") for w in workers)
        assert sum(w["experiments"] for w in workers.values()) == 16
        assert all(w["busy_s"] > 0 and w["bytes_decoded"] > 0 for w in workers.values())
        # no stray groups: the export's tasks, named so the progress panel shows them whole
        # (the payload was once an unexplained "bytes" group; a job this small travels inside
        # each task, a large one as an "export-job" task: tests/test_worker_loss.py)
        groups = {key_split(name) for name in scheduler.task_groups}
        assert groups == {"export-part"}, groups
        assert all(len(g) <= 15 for g in groups)
        actions = [m["action"] for _, m in run.client.get_events("all")
                   if m.get("export") == state["export"]]
        assert "guideloom-skip" in actions
        assert actions.count("guideloom-phase") == 2
    finally:
        run.finish()
    finished = next(s for s in run.cluster.cluster.scheduler.plugins["guideloom-dashboard"]
                .exports.values() if s["export"] == state["export"])
    assert finished["status"] == "published"
    assert finished["done"] == 36
    assert [p["name"] for p in finished["phases"]] == list(PHASES)
    skips = [m for _, m in run.client.get_events("guideloom") if m["action"] == "skip"
             and m["export"] == state["export"]]
    assert [m["sim_id"] for m in skips] == ["4"]


def _browser():
    """The screenshot script's headless Chromium helpers (skips without Chromium)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("dashboard_screenshot",
                                                  ROOT / "cluster" / "dashboard_screenshot.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    if module.find_chromium() is None:
        pytest.skip("no chromium binary (apt-get install chromium, as .ci/run does as root, or "
                    "set GUIDELOOM_CHROMIUM)")
    return module


@pytest.mark.browser
@pytest.mark.cluster
@pytest.mark.slow
def test_guideloom_page_and_run_report_read_in_chromium(damaged, tmp_path):
    browser = _browser()
    report = tmp_path / "report.html"
    run = GatedRun(damaged, tmp_path / "o", report=report)
    try:
        run.wait_held()
        with browser.chromium_page(1300, 900) as page:
            text = browser.open_and_read(page, run.page, lambda t: "16 / 36" in t)
            browser.screenshot(page, tmp_path / "page.png")
    finally:
        run.finish()
    assert re.search(r"export of view force-curve to \S+ \(npy\): read-transform-write", text)
    assert re.search(r"skipped\s+1\b", text)
    assert re.search(rf"\b4\s+\S+concave\.zip::{DAMAGED}\s+experiment 4: .*damaged", text)
    for phase in PHASES:
        assert phase in text
    assert "experiments/s" in text
    assert "MB/s decoded" in text
    assert "ETA (with finalize)" in text
    # the per-worker table: a row per worker that ran tasks, with its rates
    assert re.search(r"worker\s+tasks\s+experiments\s+experiments/s\s+MB/s decoded", text)
    assert re.search(r"tls://127\.0\.0\.1:\d+\s+\d+\s+\d+\s+\d+\.\d", text)
    assert (tmp_path / "page.png").stat().st_size > 10_000

    with browser.chromium_page(1300, 900) as page:
        text = browser.open_and_read(
            page, report.as_uri(),
            lambda t: "36 / 36" in t and page.evaluate(_PLOTS_DRAWN_JS) is True)
        browser.screenshot(page, tmp_path / "report.png", full_page=True)
    assert "export of view force-curve" in text
    assert "published" in text
    assert re.search(rf"\b4\s+\S+concave\.zip::{DAMAGED}", text)
    for phase in PHASES:
        assert phase in text
    assert "local-cluster" in text  # the placement decision


# the report's three Bokeh plots are on the page with their canvases drawn
_PLOTS_DRAWN_JS = r"""
(() => {
  if (!window.Bokeh || !Bokeh.documents.length) return false;
  const names = ["phase_timeline", "task_stream", "throughput"];
  return names.every((n) => {
    const model = Bokeh.documents[0].get_model_by_name(n);
    if (!model) return false;
    const view = Bokeh.index.find_one(model);
    return !!(view && view.has_finished());
  });
})()
"""


@pytest.mark.cluster
def test_the_page_shows_finalize_with_its_chunks_done_and_an_eta(damaged, tmp_path,
                                                                 monkeypatch):
    """A zarr export on the embedded cluster held after the first chunk moved at finalize:
    the scheduler's state and the page's HTML show the finalize phase with chunks done /
    total and an ETA from that progress."""
    import time
    import warnings

    from guideloom.cluster import embedded
    from guideloom.cluster.dashboard import PLUGIN_NAME
    from guideloom.cluster.progress import rates
    from guideloom.cluster.progress_html import exports_html

    fifo = tmp_path / "pause"
    os.mkfifo(fifo)
    monkeypatch.setenv("GUIDELOOM_PAUSE_POINT", "compacted-chunk")  # in this, the driver
    monkeypatch.setenv("GUIDELOOM_PAUSE_FIFO", str(fifo))
    running, _ = embedded.embedded_cluster(2)
    errors: list[BaseException] = []

    def export() -> None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SkippedDataWarning)
                guideloom.export_to_zarr(  # one chunk per row: finalize moves 30 chunks
                    "force-curve", tmp_path / "o.zarr", data_dir=damaged, client="local:2",
                    partition_size=4, on_error="skip",
                    record_transform=helpers.big_rows_failing_on_multiples_of_7)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=export, name="paused-zarr-export")
    thread.start()
    opened: list[int] = []
    opener = threading.Thread(target=_open_for_writing, args=(fifo, opened), daemon=True)
    opener.start()
    try:
        opener.join(180)
        assert opened, f"the export never reached the finalize phase {errors}"
        plugin = running.cluster.scheduler.plugins[PLUGIN_NAME]
        (state,) = [s for s in plugin.exports.values() if s["status"] == "running"]
        phase = state["phases"][-1]
        assert state["phase"] == phase["name"] == "finalize"
        assert (phase["done"], phase["total"], phase["unit"]) == (1, 30, "chunks")
        eta = rates(state, time.time())["eta_s"]
        assert eta is not None
        assert eta > 0
        text = exports_html({state["export"]: state})
        assert re.search(r'gl-running">finalize</span></td><td>1 / 30 chunks', text), text
        assert re.search(r"ETA \(with finalize\)</th><td>\d+\.\d (s|min)<", text)
    finally:
        monkeypatch.delenv("GUIDELOOM_PAUSE_POINT")  # the next chunks go on unheld
        if opened:
            os.close(opened[0])
        else:
            os.close(os.open(fifo, os.O_RDONLY | os.O_NONBLOCK))
        thread.join(180)
    assert not thread.is_alive(), errors
    assert not errors, errors
    finished = next(s for s in plugin.exports.values() if s["export"] == state["export"])
    final = {p["name"]: p for p in finished["phases"]}
    assert (final["finalize"]["done"], final["finalize"]["total"]) == (30, 30)
    assert (final["publish"]["done"], final["publish"]["total"]) == (3, 3)
    assert finished["status"] == "published"


def test_cli_zarr_run_draws_the_finalize_bar_in_chunks(damaged, tmp_path):
    project = _project(damaged, tmp_path)
    job = (CLI_JOB.replace('kind = "npy"', 'kind = "zarr"')
           .replace('path = "out"', 'path = "out.zarr"')
           .replace("tests.export_helpers:first_rows",
                    "tests.export_helpers:big_rows_failing_on_multiples_of_7"))
    (project / "job.toml").write_text(job)
    # the bar of a finalize however short (by default one under 1 s is not drawn)
    run = subprocess.run([sys.executable, "-m", "guideloom", "run", "job.toml", "--scheduler",
                          "sync"], cwd=project, env=_cli_env(GUIDELOOM_PHASE_LINE_S="0"),
                         capture_output=True, text=True, timeout=180)
    assert run.returncode == 0, run.stderr
    lines = re.split(r"[\r\n]", run.stderr)
    bar = [line for line in lines if line.startswith("force-curve finalize")]
    assert bar, run.stderr
    assert "30/30" in bar[-1], run.stderr
    assert "chunk" in bar[-1], run.stderr
    assert re.search(r"force-curve finalize took \d+\.\d s", run.stderr)
