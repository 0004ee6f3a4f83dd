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
from tests.second_user import second_user, shared_folder

pytestmark = pytest.mark.cluster  # every test here runs on a real Dask cluster


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
        assert not started
        assert running.client is client
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
    assert own_ports, own_ports
    assert {ip for ip, _ in own_ports} == {"127.0.0.1"}, own_ports


# --- the real `dask scheduler` / `dask worker` processes of start_local_cluster ------------
@pytest.mark.slow  # the embedded cluster's refusal above stays in the fast set
def test_a_local_process_cluster_refuses_clients_without_its_credentials(demo_zip, tmp_path,
                                                                         monkeypatch):
    from distributed import Client

    from guideloom.cluster.local_procs import start_local_cluster

    markers = tmp_path / "markers"
    markers.mkdir()
    with start_local_cluster(2, state_dir=tmp_path / "state", dashboard_port=None) as procs:
        assert procs.address.startswith("tls://127.0.0.1:"), procs.address
        with procs.client(timeout=30) as client:
            client.wait_for_workers(2, timeout=60)
            info = client.scheduler_info(n_workers=-1)
            servers = [*info["workers"], *(w["nanny"] for w in info["workers"].values())]
            assert len(servers) == 4
            assert all(s.startswith("tls://") for s in servers)
            results = attack(markers, procs.address, servers, tmp_path)
            # with the credentials: an export end to end, by Client and by address
            by_client = guideloom.export_to_numpy("force-curve", tmp_path / "by-client",
                                                  data_dir=demo_zip, client=client,
                                                  record_transform=force_sum)
        monkeypatch.chdir(tmp_path)  # find_security does not depend on the working directory
        by_address = guideloom.export_to_numpy("force-curve", tmp_path / "by-address",
                                               data_dir=demo_zip, client=procs.address,
                                               record_transform=force_sum)
        pids = procs.pids
        ports = {port for pid in pids for _, port in _listening_ports(pid)}
    assert sorted(markers.iterdir()) == [], results  # no attacker code ran anywhere
    assert len(results) == 2 + 2 * len(servers)
    assert all_refused(results), results
    reference = guideloom.export_to_numpy("force-curve", tmp_path / "ref", data_dir=demo_zip,
                                          record_transform=force_sum, client="sync")
    want = np.load(Path(reference["total"]))
    assert np.array_equal(np.load(Path(by_client["total"])), want)
    assert np.array_equal(np.load(Path(by_address["total"])), want)
    assert ports  # the processes listened; with TLS they did, and a plain client was refused:
    with pytest.raises(OSError):
        Client(procs.address.replace("tls://", "tcp://"), timeout=3)


def test_another_user_cannot_read_the_keys(tmp_path):
    """A second local user, in a folder both can reach: no listing and no key file, even with
    the folders opened up (the files themselves are 0o600)."""
    from guideloom.cluster.local_procs import start_local_cluster

    with second_user() as mallory, shared_folder() as shared:
        state = shared / "state"
        with start_local_cluster(1, state_dir=state, dashboard_port=None) as procs:
            tls = state / "tls"
            files = sorted(tls.iterdir())
            modes = {p.name: p.stat().st_mode & 0o777 for p in files}
            dir_modes = (state.stat().st_mode & 0o777, tls.stat().st_mode & 0o777)
            closed = _tries(mallory, [state, tls, *files])
            state.chmod(0o755)  # opened up by hand: the files still refuse her
            tls.chmod(0o755)
            opened = _tries(mallory, files)
            with procs.client(timeout=30) as client:  # our own client is unaffected
                assert client.submit(sum, [1, 2]).result(timeout=30) == 3
    assert {p.name for p in files} == {"ca.pem", "cert.pem", "key.pem"}
    assert modes == {"ca.pem": 0o600, "cert.pem": 0o600, "key.pem": 0o600}
    assert dir_modes == (0o700, 0o700)
    assert closed == {str(p): "denied" for p in [state, tls, *files]}
    assert opened == {str(p): "denied" for p in files}


def _tries(user, paths: list[Path]) -> dict[str, str]:
    """``ls`` each folder and ``cat`` each file as ``user``: ``read`` or ``denied``."""
    script = ('for p; do case "$p" in *.pem) cmd=cat;; *) cmd=ls;; esac; '
              'if $cmd "$p" >/dev/null 2>&1; then echo "$p read"; else echo "$p denied"; fi; '
              'done')
    done = user.run("sh", "-c", script, "sh", *map(str, paths))
    return dict(line.rsplit(" ", 1) for line in done.stdout.splitlines())


def test_a_state_folder_planted_by_another_user_is_refused(tmp_path):
    from guideloom.cluster.local_procs import start_local_cluster
    from guideloom.errors import UnsafeFileError

    with second_user() as mallory, shared_folder() as shared:
        planted = shared / "state"
        mallory.run("mkdir", "-m", "0755", str(planted))
        with pytest.raises(UnsafeFileError, match=f"belongs to user id {mallory.uid}"):
            start_local_cluster(1, state_dir=planted, dashboard_port=None, timeout=30).stop()
        assert sorted(p.name for p in planted.iterdir()) == []  # nothing of ours written there
