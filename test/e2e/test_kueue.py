"""Kueue queues TrainJobs run by this controller: the e2e tier of the TrainJob integration of Kueue v0.17.

A module fixture starts Kueue (``support.kueue.start_kueue``: the ``kueue`` binary built from
``sigs.k8s.io/kueue`` at ``KUEUE_VERSION``, on the host, with the ``trainer.kubeflow.org/trainjob``
integration and URL webhooks on 127.0.0.1) next to the Trainer manager, and stops it after the module (its
webhook configurations removed); the ClusterQueue and ResourceFlavor the module made are deleted while Kueue
still runs, since they carry its finalizer. One kwok node is labelled and tainted for the module as the
flavor's nodes, and restored afterwards.

Covered, as Kueue's own e2e suite does for TrainJobs (kueue ``test/e2e/singlecluster/trainjob_test.go``):

- a TrainJob labelled ``kueue.x-k8s.io/queue-name`` is suspended by Kueue's webhook and its Workload waits
  (here: for its LocalQueue to exist); once admitted it runs on the kwok nodes to Complete and the Workload
  is Finished;
- with quota for one TrainJob, a second one stays suspended, its Workload pending on quota, while the first
  (running for an hour) holds it; once the first is deleted the second is admitted and runs to Complete;
- what Kueue writes at admission, the runtime patch of manager ``kueue.x-k8s.io/manager`` with the flavor's
  node selector and toleration, reaches the JobSet and the pods, which land on the only node they tolerate;
- a TrainJob with ``spec.managedBy: kueue.x-k8s.io/multikueue`` is left alone by this controller. Kueue
  v0.17 without a MultiKueue AdmissionCheck on the ClusterQueue simply admits it and unsuspends it in
  place; this controller still creates nothing for it and writes no status.

The pods' timed lifecycle comes from kwok stages, and Kueue runs only on the kwok path
(``support.e2e_paths.running_kueue``): on kind the module is skipped with the reason written there.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from controller import envtest
from controller.client.client import Client
from controller.client.errors import NotFound
from controller.client.gvk import GVK
from runtime.api import constants
from runtime.api.views import TrainJobView
from support import e2e_paths as paths
from support import install, kwok
from support.kueue import (
    CLUSTER_QUEUE_GVK,
    KUEUE_API_VERSION,
    KUEUE_QUEUE_LABEL,
    RESOURCE_FLAVOR_GVK,
    WORKLOAD_GVK,
)

ROOT = Path(__file__).resolve().parents[2]


QUEUE_LABEL = KUEUE_QUEUE_LABEL
KUEUE_PATCH_MANAGER = "kueue.x-k8s.io/manager"
"""The ``spec.runtimePatches[].manager`` Kueue writes its part of a TrainJob under."""
FLAVOR_LABEL = "kueue-e2e.trainer.kubeflow.org/flavor"
FLAVOR = "reserved"
TOLERATION = {"key": FLAVOR_LABEL, "operator": "Equal", "value": FLAVOR, "effect": "NoSchedule"}
RESOURCE_FLAVOR = "kueue-e2e-reserved"
CLUSTER_QUEUE = "kueue-e2e"
LOCAL_QUEUE = "main"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
NODE_GVK = GVK("", "v1", "Node")
CONFIG_MAP_GVK = GVK("", "v1", "ConfigMap")


def _cluster_name(e2e_cluster: Any) -> str:
    if e2e_cluster.owned:
        return os.environ.get("E2E_CLUSTER_NAME", "trainer-e2e-pytest")
    return str(kwok.DEFAULT_NAME)


# ------------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def client(e2e_cluster: Any) -> Iterator[Client]:
    c = Client.load(str(e2e_cluster.kubeconfig), user_agent="test_kueue")
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def kueue(e2e_cluster: Any, client: Client, prerequisite: Any) -> Iterator[Any]:
    """Kueue for this cluster's path; skips on kind, and without the kueue binary unless prerequisites are
    required (then fails). The Trainer API first: Kueue's TrainJob integration reads the
    ClusterTrainingRuntimes to size the Workloads."""
    if e2e_cluster.flavour != "kwok":
        pytest.skip(paths.KUEUE_ON_KIND)
    install.install_trainer(client)
    try:
        with paths.running_kueue(e2e_cluster.flavour, cluster_name=_cluster_name(e2e_cluster)) as process:
            yield process
    except paths.KueueMissing as exc:
        prerequisite.missing(str(exc))
    except paths.KueueUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def manager(e2e_cluster: Any, kueue: Any) -> Iterator[Any]:
    """The Trainer manager as this cluster's path runs it (as in ``test_trainjob_e2e.py``)."""
    try:
        with paths.running_manager(
            e2e_cluster.flavour,
            e2e_cluster.kubeconfig,
            owned=e2e_cluster.owned,
            cluster_name=_cluster_name(e2e_cluster),
        ) as running:
            yield running
    except paths.ManagerUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def reserved_node(client: Client, kueue: Any) -> Iterator[str]:
    """One kwok node carries the flavor's label and a matching NoSchedule taint for the module: a pod lands
    there only with both the flavor's node selector and its toleration. Restored afterwards."""
    name = f"{kwok.NODE_NAME_PREFIX}0"
    taints = list(client.get(NODE_GVK, name).get("spec", {}).get("taints") or [])
    client.patch(
        NODE_GVK,
        name,
        {"metadata": {"labels": {FLAVOR_LABEL: FLAVOR}}, "spec": {"taints": [*taints, TOLERATION]}},
    )
    try:
        yield name
    finally:
        client.patch(
            NODE_GVK, name, {"metadata": {"labels": {FLAVOR_LABEL: None}}, "spec": {"taints": taints or None}}
        )


@pytest.fixture(scope="module")
def cluster_queue(client: Client, kueue: Any, reserved_node: str) -> Iterator[str]:
    """A ResourceFlavor for the reserved node and a ClusterQueue with 1 CPU of quota in it: room for one of
    this module's TrainJobs (1 CPU each) at a time. Deleted after the module, while Kueue runs."""
    flavor = {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": RESOURCE_FLAVOR},
        "spec": {"nodeLabels": {FLAVOR_LABEL: FLAVOR}, "tolerations": [TOLERATION]},
    }
    queue = {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": CLUSTER_QUEUE},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": RESOURCE_FLAVOR, "resources": [{"name": "cpu", "nominalQuota": "1"}]}
                    ],
                }
            ],
        },
    }
    client.apply(flavor, "e2e", force=True)
    client.apply(queue, "e2e", force=True)

    def active() -> None:
        assert condition(client.get(CLUSTER_QUEUE_GVK, CLUSTER_QUEUE), "Active")["status"] == "True"

    envtest.eventually(active, timeout=30, interval=0.25)
    try:
        yield CLUSTER_QUEUE
    finally:
        # The test namespaces are being deleted; their Workloads go, Kueue lets go of the queue, then of the
        # flavor (each carries Kueue's resource-in-use finalizer).
        for gvk, name in (
            (CLUSTER_QUEUE_GVK, CLUSTER_QUEUE),
            (RESOURCE_FLAVOR_GVK, RESOURCE_FLAVOR),
        ):
            with contextlib.suppress(NotFound):
                client.delete(gvk, name)

            def gone(gvk: GVK = gvk, name: str = name) -> None:
                with contextlib.suppress(NotFound):
                    found = client.get(gvk, name)
                    raise AssertionError(f"{gvk.kind} {name} is still there: {found['metadata']}")

            envtest.eventually(gone, timeout=60, interval=0.25)


pytestmark = pytest.mark.usefixtures("kueue", "manager")


# ------------------------------------------------------------------------------------------------- helpers


def local_queue(client: Client, namespace: str) -> None:
    client.create(
        {
            "apiVersion": KUEUE_API_VERSION,
            "kind": "LocalQueue",
            "metadata": {"name": LOCAL_QUEUE, "namespace": namespace},
            "spec": {"clusterQueue": CLUSTER_QUEUE},
        }
    )


def trainjob(
    name: str,
    *,
    queue: str | None = LOCAL_QUEUE,
    num_nodes: int = 1,
    cpu: str | None = "1",
    run_time: str | None = None,
    managed_by: str | None = None,
    suspend: bool | None = None,
) -> dict[str, Any]:
    """A torch-distributed TrainJob; ``cpu`` per node (so ``num_nodes * cpu`` of the queue's quota)."""
    spec: dict[str, Any] = {
        "runtimeRef": {"name": "torch-distributed", "kind": constants.CLUSTER_TRAINING_RUNTIME_KIND},
        "trainer": {"numNodes": num_nodes},
    }
    if cpu is not None:
        spec["trainer"]["resourcesPerNode"] = {"requests": {"cpu": cpu}}
    if run_time is not None:  # kwok's pod-complete stage reads this annotation
        pod_metadata = {"annotations": {kwok.RUN_TIME_ANNOTATION: run_time}}
        replicated = [{"name": "node", "template": {"spec": {"template": {"metadata": pod_metadata}}}}]
        spec["runtimePatches"] = [
            {
                "manager": "e2e.example.com/run-time",
                "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": replicated}}},
            }
        ]
    if managed_by is not None:
        spec["managedBy"] = managed_by
    if suspend is not None:
        spec["suspend"] = suspend
    labels = {QUEUE_LABEL: queue} if queue else {}
    return {
        "apiVersion": constants.API_VERSION,
        "kind": constants.TRAINJOB_KIND,
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }


def condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """The condition of type ``kind`` (AssertionError if there is none)."""
    found = [c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind]
    assert found, f"no {kind} condition in {obj.get('status')}"
    return dict(found[0])


def is_true(obj: Mapping[str, Any], kind: str) -> bool:
    return any(
        c["type"] == kind and c["status"] == "True" for c in (obj.get("status") or {}).get("conditions") or []
    )


def workload_of(client: Client, trainjob: Mapping[str, Any]) -> dict[str, Any]:
    """The Workload Kueue made for the TrainJob (AssertionError until there is exactly one)."""
    namespace, uid = trainjob["metadata"]["namespace"], trainjob["metadata"]["uid"]
    owned = [
        w
        for w in client.list(WORKLOAD_GVK, namespace).items
        if any(ref["uid"] == uid for ref in w["metadata"].get("ownerReferences") or ())
    ]
    assert len(owned) == 1, f"Workloads of TrainJob {trainjob['metadata']['name']}: {owned}"
    return dict(owned[0])


def get_trainjob(client: Client, namespace: str, name: str) -> dict[str, Any]:
    return dict(client.get(install.TRAINJOB_GVK, name, namespace))


def pods_of(client: Client, namespace: str, name: str) -> list[dict[str, Any]]:
    return list(client.list(install.POD_GVK, namespace, label_selector=f"{JOBSET_NAME_LABEL}={name}").items)


def admitted(client: Client, trainjob: Mapping[str, Any], eventually: Callable[..., Any]) -> dict[str, Any]:
    """The Workload once Kueue has admitted it and unsuspended the TrainJob."""

    def done() -> dict[str, Any]:
        workload = workload_of(client, trainjob)
        assert is_true(workload, "Admitted"), workload.get("status")
        current = get_trainjob(client, trainjob["metadata"]["namespace"], trainjob["metadata"]["name"])
        assert current["spec"].get("suspend") is False, current["spec"]
        return workload

    result: dict[str, Any] = eventually(done, timeout=60)
    return result


def completed(client: Client, trainjob: Mapping[str, Any], eventually: Callable[..., Any]) -> dict[str, Any]:
    """The TrainJob once Complete, with its Workload Finished (Kueue reads the TrainJob's conditions)."""
    namespace, name = trainjob["metadata"]["namespace"], trainjob["metadata"]["name"]

    def done() -> dict[str, Any]:
        stored = get_trainjob(client, namespace, name)
        assert TrainJobView(stored).is_complete, stored.get("status")
        workload = workload_of(client, stored)
        assert condition(workload, "Finished")["reason"] == "Succeeded", workload.get("status")
        return stored

    result: dict[str, Any] = eventually(done, timeout=120)
    return result


def kueue_patch(trainjob: Mapping[str, Any]) -> dict[str, Any]:
    found = [p for p in trainjob["spec"].get("runtimePatches") or [] if p["manager"] == KUEUE_PATCH_MANAGER]
    assert len(found) == 1, trainjob["spec"].get("runtimePatches")
    return dict(found[0])


# -------------------------------------------------------------------------------------------------- tests


@pytest.mark.usefixtures("cluster_queue")
def test_a_queued_trainjob_is_suspended_by_kueue_until_admitted_then_runs_to_complete(
    client: Client, namespace: str, eventually: Callable[..., Any]
) -> None:
    # Created before its LocalQueue exists, so that its Workload has to wait.
    created = install.create_trainjob(client, trainjob("first"), namespace)
    assert created["spec"]["suspend"] is True  # Kueue's webhook; the manifest does not set it
    patch = kueue_patch(created)
    assert patch["trainingRuntimeSpec"]["template"]["metadata"]["labels"] == {QUEUE_LABEL: LOCAL_QUEUE}

    def waiting() -> dict[str, Any]:
        workload = workload_of(client, created)
        reserved = condition(workload, "QuotaReserved")
        assert (reserved["status"], reserved["reason"]) == ("False", "Inadmissible"), reserved
        assert f"LocalQueue {LOCAL_QUEUE} doesn't exist" in reserved["message"]
        stored = get_trainjob(client, namespace, "first")
        assert condition(stored, constants.CONDITION_SUSPENDED)["status"] == "True"  # written by our manager
        return workload

    workload = eventually(waiting)
    assert not is_true(workload, "Admitted")
    jobset = client.get(install.JOBSET_GVK, "first", namespace)
    assert jobset["spec"]["suspend"] is True
    assert not pods_of(client, namespace, "first")

    local_queue(client, namespace)
    workload = admitted(client, created, eventually)
    assert workload["status"]["admission"]["clusterQueue"] == CLUSTER_QUEUE
    stored = completed(client, created, eventually)
    assert condition(stored, constants.CONDITION_COMPLETE)["reason"] == "AllJobsCompleted"
    resumed = condition(stored, constants.CONDITION_SUSPENDED)
    assert (resumed["status"], resumed["reason"]) == ("False", constants.REASON_RESUMED)
    pods = pods_of(client, namespace, "first")
    assert pods and {p["status"]["phase"] for p in pods} == {"Succeeded"}


@pytest.mark.usefixtures("cluster_queue")
def test_a_second_trainjob_waits_while_the_first_holds_the_quota(
    client: Client, namespace: str, eventually: Callable[..., Any]
) -> None:
    local_queue(client, namespace)
    # The first runs for an hour: it holds the quota until the test frees it, however slow the machine.
    first = install.create_trainjob(client, trainjob("first", run_time="1h"), namespace)
    admitted(client, first, eventually)
    second = install.create_trainjob(client, trainjob("second"), namespace)

    def pending() -> dict[str, Any]:
        workload = workload_of(client, second)
        reserved = condition(workload, "QuotaReserved")
        assert (reserved["status"], reserved["reason"]) == ("False", "Pending"), reserved
        return workload

    def still_waiting() -> None:
        workload = pending()
        assert "insufficient unused quota for cpu" in condition(workload, "QuotaReserved")["message"]
        assert not is_true(workload, "Admitted"), workload["status"]
        assert get_trainjob(client, namespace, "second")["spec"]["suspend"] is True
        assert not pods_of(client, namespace, "second")
        holder = workload_of(client, first)
        assert is_true(holder, "Admitted") and not is_true(holder, "Finished"), holder["status"]

    eventually(still_waiting)
    # It stays pending while the first holds the quota: checked again a few seconds later.
    time.sleep(3)
    still_waiting()

    # Free the quota: delete the first TrainJob; Kueue finalizes its Workload and admits the second.
    freed_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # RFC 3339, to the second, rounded down
    client.delete(install.TRAINJOB_GVK, "first", namespace)
    admitted(client, second, eventually)
    completed(client, second, eventually)
    second_admitted = condition(workload_of(client, second), "Admitted")["lastTransitionTime"]
    assert second_admitted >= freed_at  # RFC 3339 in UTC: string order is time order


@pytest.mark.usefixtures("cluster_queue")
def test_the_flavors_node_selector_and_toleration_reach_the_pods_through_kueues_runtime_patch(
    client: Client, namespace: str, reserved_node: str, eventually: Callable[..., Any]
) -> None:
    local_queue(client, namespace)
    created = install.create_trainjob(client, trainjob("placed", num_nodes=2, cpu="500m"), namespace)
    stored = completed(client, created, eventually)

    # What Kueue wrote at admission, under its own manager name.
    (replicated,) = kueue_patch(stored)["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert replicated["name"] == "node"
    pod_patch = replicated["template"]["spec"]["template"]["spec"]
    assert pod_patch["nodeSelector"] == {FLAVOR_LABEL: FLAVOR}
    assert pod_patch["tolerations"] == [TOLERATION]

    # Rendered by our manager into the JobSet, and from there onto every pod.
    jobset = client.get(install.JOBSET_GVK, "placed", namespace)
    (node_job,) = [j for j in jobset["spec"]["replicatedJobs"] if j["name"] == "node"]
    pod_spec = node_job["template"]["spec"]["template"]["spec"]
    assert pod_spec["nodeSelector"] == {FLAVOR_LABEL: FLAVOR}
    assert TOLERATION in pod_spec["tolerations"]
    pods = pods_of(client, namespace, "placed")
    assert len(pods) == 2
    for pod in pods:
        assert pod["spec"]["nodeSelector"] == {FLAVOR_LABEL: FLAVOR}
        assert TOLERATION in pod["spec"]["tolerations"]
        assert pod["spec"]["nodeName"] == reserved_node  # the only node both select and tolerate
        assert pod["status"]["phase"] == "Succeeded"


@pytest.mark.usefixtures("cluster_queue")
def test_a_trainjob_managed_by_multikueue_is_left_alone_by_the_trainer_controller(
    client: Client, namespace: str, eventually: Callable[..., Any]
) -> None:
    local_queue(client, namespace)
    # No resource requests: it takes none of the queue's quota, whatever happens to it.
    created = install.create_trainjob(
        client, trainjob("remote", cpu=None, managed_by=constants.MANAGED_BY_MULTIKUEUE), namespace
    )
    assert created["spec"]["managedBy"] == constants.MANAGED_BY_MULTIKUEUE
    # Kueue v0.17 without a MultiKueue AdmissionCheck on the ClusterQueue admits it like any other job and
    # unsuspends it in place (on a MultiKueue manager cluster it would be dispatched to a worker instead).
    admitted(client, created, eventually)

    # A TrainJob of our own after it, as a sign that the manager is running and has had the events.
    control = install.create_trainjob(client, trainjob("control", queue=None, suspend=True), namespace)
    eventually(lambda: client.get(install.JOBSET_GVK, "control", namespace), retry_on=(NotFound,))
    assert control["spec"].get("managedBy") in (None, constants.MANAGED_BY_TRAINJOB_CONTROLLER)

    # Nothing for the MultiKueue one: no JobSet, no runtime snapshot, no status, no field of ours.
    with pytest.raises(NotFound):
        client.get(install.JOBSET_GVK, "remote", namespace)
    with pytest.raises(NotFound):
        client.get(CONFIG_MAP_GVK, "remote-runtime-snapshot", namespace)
    stored = get_trainjob(client, namespace, "remote")
    assert stored["spec"]["suspend"] is False and not stored.get("status")
    assert not [m for m in stored["metadata"].get("managedFields") or () if m.get("subresource") == "status"]
    assert not pods_of(client, namespace, "remote")
