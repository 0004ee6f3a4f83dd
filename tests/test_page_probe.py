"""Asking a scheduler whether it serves the /guideloom page costs an export nothing: nothing is
imported on the scheduler to answer, and the export does not wait for the answer (issue 29,
item 4). Real ``distributed.LocalCluster`` schedulers in a fresh Python process, with and
without guideloom's preload; the answer still decides the printed line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# A user's script: its own LocalCluster (scheduler in this process, as LocalCluster does), an
# export with that client, then the same with a scheduler that runs guideloom's preload.
SCRIPT = r"""
import json, logging, sys
from distributed import Client, LocalCluster
import guideloom

lines = []
class Keep(logging.Handler):
    def emit(self, record):
        lines.append(record.getMessage())
logging.getLogger("guideloom").addHandler(Keep())
logging.getLogger("guideloom").setLevel(logging.INFO)

data, out = sys.argv[1], sys.argv[2]
found = {}
for name, kwargs in (("plain", {}),
                     ("preloaded", {"preload": ["guideloom.cluster.dashboard"]})):
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp://",
                      host="127.0.0.1",
                      dashboard_address="127.0.0.1:0", silence_logs=40,
                      scheduler_kwargs=kwargs) as cluster, Client(cluster) as client:
        guideloom.export_to_numpy("pointcloud-op10", f"{out}/{name}", data_dir=data, client=client,
                                  sim_ids=[0, 1, 2, 3])
        found[name] = {
            "dashboard_imported": client.run_on_scheduler(
                lambda: "guideloom.cluster.dashboard" in sys.modules),
            "link": client.dashboard_link,
            "lines": [line for line in lines if line.startswith("guideloom page:")],
        }
        lines.clear()
print("RESULT " + json.dumps(found))
"""


@pytest.mark.slow  # a fresh Python, two LocalClusters and exports, ~6 s; fast: the one below
@pytest.mark.cluster
def test_the_page_question_imports_nothing_on_the_scheduler_and_still_decides_the_line(
        demo_zip, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    env.pop("DASK_DISTRIBUTED__SCHEDULER__PRELOAD", None)  # the first scheduler has none
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(demo_zip), str(tmp_path)],
                          capture_output=True, text=True, env=env, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    (result,) = [json.loads(line[len("RESULT "):]) for line in done.stdout.splitlines()
                 if line.startswith("RESULT ")]
    plain, preloaded = result["plain"], result["preloaded"]
    # a scheduler without the preload: asked, nothing imported there (nor here: the same
    # process), and the export says how to get the page
    assert plain["dashboard_imported"] is False
    assert plain["lines"] == [
        "guideloom page: not served by this scheduler; start the scheduler with `dask scheduler "
        "--preload guideloom.cluster.dashboard` (guideloom installed there) to get /guideloom; "
        "the Dask dashboard shows the tasks"]
    # with the preload the page is found and its URL printed beside the dashboard's
    page = preloaded["link"].replace("/status", "/guideloom")
    assert preloaded["dashboard_imported"] is True
    assert preloaded["lines"] == [
        f"guideloom page: {page} (experiments, phases, skips, rates)"]


@pytest.mark.cluster
def test_the_page_question_is_answered_from_the_plugin_registry_by_name():
    """The question sent (a function pickled by value) reads the scheduler's plugins and
    dashboard pages by name; a new client of a scheduler that gained the plugin asks again."""
    import dask
    from distributed import Client, LocalCluster

    from guideloom.cluster import page
    from guideloom.cluster.dashboard import GuideloomDashboard, page_registered

    assert page_registered()  # importing the dashboard module adds the route in this process
    with dask.config.set({"distributed.scheduler.preload": []}), LocalCluster(
            n_workers=0, processes=False, protocol="tcp://", host="127.0.0.1",
            dashboard_address="127.0.0.1:0", silence_logs=40) as cluster:
        with Client(cluster, set_as_default=False) as before:
            assert page.serves_page(before) is False  # the route, but not the plugin
            assert page.ask_page(before).done()  # answered once per client: no second question
        cluster.scheduler.add_plugin(GuideloomDashboard())
        with Client(cluster, set_as_default=False) as after:
            assert page.serves_page(after) is True


def test_run_events_reach_the_scheduler_in_order_without_a_wait_per_event(dask_client):
    """The run's events are queued and sent from the client's loop one after the other: after
    the one flush a run does at its end, the scheduler has every event, in order."""
    import uuid

    from guideloom.cluster.events import EventSender

    topic = f"guideloom-test-{uuid.uuid4().hex[:8]}"
    sender = EventSender(dask_client)
    for k in range(200):
        sender.send(topic, {"k": k})
    assert sender.flush(timeout=60) is True
    events = dask_client.get_events(topic)
    assert [msg["k"] for _, msg in events] == list(range(200))
    # a client closed after Ctrl-C: sending fails quietly, the sender stops trying
    from distributed import Client

    closed = Client(dask_client.scheduler.address, set_as_default=False)
    closed.close()
    dead = EventSender(closed)
    dead.send(topic, {"k": 200})
    assert dead.flush(timeout=60) is False
    assert dead.failed
    assert len(dask_client.get_events(topic)) == 200
