"""Another local user attacks the embedded cluster's servers on 127.0.0.1 (issue 22, B19).

The attacker is a separate process that knows every port (any local user can read them from
``/proc/net/tcp``) and tries to run a function that leaves a marker file: through a plain
``distributed.Client`` (``run_on_scheduler`` would run in the exporter's own process, ``submit``
on a worker) and straight at each worker's and nanny's ``run`` handler, once in the clear and
once over TLS with credentials of its own. None of it may run, while the export on the same
cluster works.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import psutil

import guideloom
from guideloom.cluster.embedded import embedded_cluster

ATTACK = textwrap.dedent("""
    import asyncio
    import json
    import sys

    from distributed import Client
    from distributed.core import rpc
    from distributed.protocol.pickle import dumps
    from distributed.security import Security

    marker_dir, scheduler, *servers = sys.argv[1:]
    own = Security.temporary()  # TLS credentials of the attacker's own, not the cluster's


    def plant(where=marker_dir):
        import os
        with open(os.path.join(where, f"ran-in-{os.getpid()}"), "w") as fh:
            fh.write("attacker code ran")
        return "ran"


    def hostport(address):
        return address.split("://")[-1]


    results = {}
    for scheme, security in (("tcp", None), ("tls", own)):
        try:
            client = Client(f"{scheme}://{hostport(scheduler)}", security=security, timeout=3,
                            set_as_default=False)
        except Exception as exc:
            results[f"client-{scheme}"] = f"refused: {type(exc).__name__}"
        else:
            outcome = []
            for attempt in (lambda: client.run_on_scheduler(plant),
                            lambda: client.submit(plant, pure=False).result(timeout=10)):
                try:
                    outcome.append(str(attempt()))
                except Exception as exc:
                    outcome.append(f"refused: {type(exc).__name__}")
            client.close()
            results[f"client-{scheme}"] = ",".join(outcome)


    async def run_on(address, scheme, security):
        args = security.get_connection_args("client") if security else {}
        server = rpc(f"{scheme}://{hostport(address)}", connection_args=args, timeout=3)
        try:
            return str(await asyncio.wait_for(server.run(function=dumps(plant)), 10))
        except Exception as exc:
            return f"refused: {type(exc).__name__}"
        finally:
            await server.close_rpc()


    for address in servers:
        for scheme, security in (("tcp", None), ("tls", own)):
            results[f"{address}-{scheme}"] = asyncio.run(run_on(address, scheme, security))
    print(json.dumps(results))
""")


def force_sum(rec):
    """A small fixed-shape record."""
    return {"total": np.asarray(rec["force_data"], dtype=np.float64).sum(axis=0)}


def _listening_ports(pid: int) -> set[tuple[str, int]]:
    return {
        (conn.laddr.ip, conn.laddr.port) for conn in psutil.net_connections(kind="tcp")
        if conn.pid == pid and conn.status == psutil.CONN_LISTEN
    }


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
        attack = subprocess.run(
            [sys.executable, "-c", ATTACK, str(markers), client.scheduler.address, *servers],
            capture_output=True, text=True, timeout=300, cwd=tmp_path,
        )
        assert attack.returncode == 0, attack.stderr[-3000:]
        results = json.loads(attack.stdout.splitlines()[-1])
        # the export on the same cluster works
        out = guideloom.export_to_numpy("force-curve", tmp_path / "out", data_dir=demo_zip,
                                        record_transform=force_sum, client=client)
        dashboard = client.dashboard_link
        own_ports = _listening_ports(psutil.Process().pid)
    assert sorted(markers.iterdir()) == [], results  # no attacker code ran anywhere
    assert len(results) == 2 + 2 * len(servers)
    attempts = [part for value in results.values() for part in value.split(",")]
    assert all(part.startswith("refused: ") for part in attempts), results
    reference = guideloom.export_to_numpy("force-curve", tmp_path / "ref", data_dir=demo_zip,
                                          record_transform=force_sum, client="sync")
    assert np.array_equal(np.load(Path(out["total"])), np.load(Path(reference["total"])))
    # the dashboard stays plain HTTP on loopback; nothing of ours listens elsewhere
    assert dashboard.startswith("http://127.0.0.1:"), dashboard
    assert own_ports and {ip for ip, _ in own_ports} == {"127.0.0.1"}, own_ports
