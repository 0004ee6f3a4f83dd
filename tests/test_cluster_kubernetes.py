"""cluster/kubernetes/daskcluster.yaml carries what the dask-kubernetes operator reads.

Facts checked, from the operator's CRD definitions and controller (dask/dask-kubernetes):
``DaskCluster.spec`` requires ``scheduler`` and ``worker``; the scheduler requires a pod
``spec`` and a ``service`` (a ServiceSpec); the worker requires a pod ``spec`` and has an
integer ``replicas`` (the scale subresource of the default worker group
``<cluster>-default`` points at ``.spec.worker.replicas``). The controller names the scheduler
pod and service ``<cluster>-scheduler``, labels the pod ``dask.org/cluster-name`` and
``dask.org/component: scheduler``, adds ``DASK_WORKER_NAME`` and ``DASK_SCHEDULER_ADDRESS``
(``tcp://<cluster>-scheduler.<namespace>.svc.cluster.local:8786``) to every worker container,
and reaches the dashboard through the service port named ``http-dashboard``.

No Kubernetes cluster runs here: the manifest is parsed, and the ``dask worker`` /
``dask scheduler`` arguments are parsed by distributed's own command line parsers.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

MANIFEST = Path(__file__).resolve().parent.parent / "cluster" / "kubernetes" / "daskcluster.yaml"
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
QUANTITY = re.compile(r"^(\d+(\.\d+)?)(m|Ki|Mi|Gi|Ti|k|M|G|T)?$")
UNITS = {None: 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12,
         "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def _quantity(value: object) -> float:
    """A Kubernetes resource quantity ("500m", "4Gi", 1) as a number."""
    match = QUANTITY.match(str(value))
    assert match, f"not a Kubernetes quantity: {value!r}"
    return float(match.group(1)) * UNITS[match.group(3)]


@pytest.fixture(scope="module")
def cluster() -> dict:
    docs = [d for d in yaml.safe_load_all(MANIFEST.read_text()) if d]
    (found,) = [d for d in docs if d.get("kind") == "DaskCluster"]
    return found


def _containers(pod_spec: dict) -> list[dict]:
    containers = pod_spec["containers"]
    assert isinstance(containers, list)
    assert containers
    for c in containers:
        assert isinstance(c["name"], str)
        assert DNS_LABEL.match(c["name"])
        assert isinstance(c["image"], str)
        assert c["image"].strip()
        for key in ("command", "args"):
            if key in c:
                assert isinstance(c[key], list)
                assert all(isinstance(a, str) for a in c[key])
    return containers


def _check_resources(container: dict) -> None:
    resources = container["resources"]
    requests = resources["requests"]
    assert {"cpu", "memory"} <= set(requests)
    for kind, value in requests.items():
        limit = resources.get("limits", {}).get(kind)
        if limit is not None:
            assert _quantity(value) <= _quantity(limit), (container["name"], kind)


def test_daskcluster_has_the_fields_the_operator_requires(cluster):
    assert cluster["apiVersion"] == "kubernetes.dask.org/v1"
    name = cluster["metadata"]["name"]
    assert DNS_LABEL.match(name)
    assert len(f"{name}-default-worker-0123456789") <= 63
    spec = cluster["spec"]
    assert {"scheduler", "worker"} <= set(spec)
    assert {"spec", "service"} <= set(spec["scheduler"])
    assert "spec" in spec["worker"]
    replicas = spec["worker"]["replicas"]
    assert isinstance(replicas, int)
    assert not isinstance(replicas, bool)
    assert replicas >= 1
    if "idleTimeout" in spec:
        assert isinstance(spec["idleTimeout"], int)


def test_worker_container_runs_one_single_threaded_dask_worker(cluster):
    from distributed.cli.dask_worker import main as dask_worker

    (worker,) = _containers(cluster["spec"]["worker"]["spec"])
    assert "command" not in worker or worker["command"][:2] == ["dask", "worker"]
    args = worker["args"]
    assert args[:2] == ["dask", "worker"]
    params = dask_worker.make_context("dask worker", args[2:]).params  # distributed's parser
    assert params["nthreads"] == 1
    assert str(params["n_workers"]) == "1"
    assert params["name"] == "$(DASK_WORKER_NAME)"  # set by the operator per pod
    # the scheduler address comes from DASK_SCHEDULER_ADDRESS, which the operator adds
    assert params["scheduler"] in (None, "$(DASK_SCHEDULER_ADDRESS)")
    own_env = {e["name"] for e in worker.get("env", [])}
    assert not own_env & {"DASK_WORKER_NAME", "DASK_SCHEDULER_ADDRESS"}
    _check_resources(worker)
    limit = worker["resources"]["limits"]["memory"]
    from dask.utils import parse_bytes

    assert parse_bytes(params["memory_limit"]) <= _quantity(limit)  # Dask stops it first
    ports = {p["name"]: p["containerPort"] for p in worker.get("ports", [])}
    if params["dashboard"] and "http-dashboard" in ports:
        assert str(ports["http-dashboard"]) == str(params["dashboard_address"]).split(":")[-1]


def test_scheduler_pod_and_service_match_what_the_operator_expects(cluster):
    from distributed.cli.dask_scheduler import main as dask_scheduler

    name = cluster["metadata"]["name"]
    scheduler = cluster["spec"]["scheduler"]
    (container,) = _containers(scheduler["spec"])
    args = container["args"]
    assert args[:2] == ["dask", "scheduler"]
    params = dask_scheduler.make_context("dask scheduler", args[2:]).params
    assert params["port"] in (None, 8786)  # workers dial <cluster>-scheduler...:8786
    dashboard_port = int(str(params["dashboard_address"]).rsplit(":", 1)[-1])
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"tcp-comm": 8786, "http-dashboard": dashboard_port}
    for probe in ("readinessProbe", "livenessProbe"):
        if probe in container:
            assert container[probe]["httpGet"]["port"] in ports
    _check_resources(container)

    service = scheduler["service"]
    assert service.get("type", "ClusterIP") == "ClusterIP"  # reached by port-forward only
    assert service["selector"] == {
        "dask.org/cluster-name": name, "dask.org/component": "scheduler"
    }
    by_name = {p["name"]: p for p in service["ports"]}
    assert by_name["tcp-comm"]["port"] == 8786
    assert by_name["http-dashboard"]["port"] == 8787
    for port in by_name.values():
        assert port["targetPort"] in ports


def test_readme_commands_name_the_objects_the_operator_creates(cluster):
    name = cluster["metadata"]["name"]
    readme = (MANIFEST.parent.parent / "README.md").read_text()
    assert f"kubectl port-forward svc/{name}-scheduler 8786:8786 8787:8787" in readme
    assert f"kubectl scale daskworkergroup {name}-default --replicas" in readme
    assert f"kubectl delete daskcluster {name}" in readme
