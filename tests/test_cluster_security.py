"""Another local user attacks the embedded cluster's servers on 127.0.0.1 (issue 22, B19).

The attacker (tests/attack_helpers.py) is a separate process that knows every port (any local
user can read them from ``/proc/net/tcp``) and tries to run a function that leaves a marker
file: through a plain ``distributed.Client`` (``run_on_scheduler`` would run in the exporter's
own process, ``submit`` on a worker) and straight at each worker's and nanny's ``run``
handler, once in the clear and once over TLS with credentials of its own. None of it may run,
while the export on the same cluster works.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import psutil
import pytest

import guideloom
from guideloom.cluster.embedded import embedded_cluster
from tests.attack_helpers import all_refused, attack

pytestmark = pytest.mark.cluster  # every test here runs on a real Dask cluster


def force_sum(rec):
    """A small fixed-shape record."""
    return {"total": np.asarray(rec["force_data"], dtype=np.float64).sum(axis=0)}


def _listening_ports(pid: int) -> set[tuple[str, int]]:
    return {
        (conn.laddr.ip, conn.laddr.port) for conn in psutil.net_connections(kind="tcp")
        if conn.pid == pid and conn.status == psutil.CONN_LISTEN
    }


@pytest.mark.slow
def test_another_process_without_the_credentials_cannot_run_code(demo_zip, tmp_path):
    markers = tmp_path / "markers"
    markers.mkdir()
    with guideloom.local_cluster(2) as client:
        running, started = embedded_cluster(2)
        assert not started and running.client is client
        client.wait_for_workers(2, timeout=60)
        info = client.scheduler_info(n_workers=-1)
        servers = [*info["workers"], *(w["nanny"] for w in info["workers"].values())]
        assert len(servers) == 4
        results = attack(markers, client.scheduler.address, servers, tmp_path)
        # the export on the same cluster works
        out = guideloom.export_to_numpy("force-curve", tmp_path / "out", data_dir=demo_zip,
                                        record_transform=force_sum, client=client)
        dashboard = client.dashboard_link
        own_ports = _listening_ports(psutil.Process().pid)
    assert sorted(markers.iterdir()) == [], results  # no attacker code ran anywhere
    assert len(results) == 2 + 2 * len(servers)
    assert all_refused(results), results
    reference = guideloom.export_to_numpy("force-curve", tmp_path / "ref", data_dir=demo_zip,
                                          record_transform=force_sum, client="sync")
    assert np.array_equal(np.load(Path(out["total"])), np.load(Path(reference["total"])))
    # the dashboard stays plain HTTP on loopback; nothing of ours listens elsewhere
    assert dashboard.startswith("http://127.0.0.1:"), dashboard
    assert own_ports and {ip for ip, _ in own_ports} == {"127.0.0.1"}, own_ports
