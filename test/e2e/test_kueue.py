"""Kueue queues TrainJobs run by this controller: the e2e tier of the TrainJob integration of Kueue v0.17.

Kueue runs on both paths (``support.e2e_paths.running_kueue``), with the ``trainer.kubeflow.org/trainjob``
integration:

- kwok: a module fixture starts the ``kueue`` binary built from ``sigs.k8s.io/kueue`` at ``KUEUE_VERSION``
  on the host (URL webhooks on 127.0.0.1) next to the Trainer manager, and stops it after the module; the
  pods are kwok's, their lifecycle played by its stages;
- kind: the Kueue ``hack/e2e-setup-kind.sh`` installed in the cluster from Kueue's own manifests (its image
  built here from the same Go module), beside the Trainer installed by Helm; the pods are real, and a
  TrainJob that must run until the test says so runs ``support.kind_jobs.HOLD_COMMAND`` and is released
  with ``kubectl exec``.

The ClusterQueue and ResourceFlavor the module made are deleted while Kueue still runs, since they carry
its finalizer. One node is labelled and tainted for the module as the flavor's nodes (on kind a worker if
there is one), and restored afterwards.

Covered, as Kueue's own e2e suite does for TrainJobs (kueue ``test/e2e/singlecluster/trainjob_test.go``,
which ``test_kueue_e2e.py`` runs as it is):

- a TrainJob labelled ``kueue.x-k8s.io/queue-name`` is suspended by Kueue's webhook and its Workload waits
  (here: for its LocalQueue to exist); once admitted it runs to Complete and the Workload is Finished;
- with quota for one TrainJob, a second one stays suspended, its Workload pending on quota, while the first
  runs; once the first finishes (kind: released, it Completes; kwok: deleted, since kwok's pods cannot be
  told to end) the second is admitted and runs to Complete;
- (kind) a higher-priority TrainJob preempts a running one: the preempted TrainJob is suspended, its pods
  are deleted, and once the preemptor has Completed it is admitted again, resumes on new pods and Completes;
- what Kueue writes at admission, the runtime patch of manager ``kueue.x-k8s.io/manager`` with the flavor's
  node selector and toleration, reaches the JobSet and the pods, which land on the only node they tolerate;
- Kueue's view equals what the controller creates: one TrainJob per shipped runtime and per MPI variant
  (the trainer ancestor label on the launcher or the node job, ``runLauncherAsNode`` both ways, with and
  without ``spec.trainer.numNodes``), all queued at once under a ClusterQueue with room for all; once each is
  Complete, its Workload's PodSets (count and per-pod requests) and what Kueue charged at admission equal
  the pods its JobSet made, per replicated job. A torchtune runtime's claim gets a PersistentVolume bound
  ahead, since nothing provisions volumes on kwok. On kind the runtimes' images are not in the cluster, so
  every pod of the test's namespace runs ``true`` from the workload image instead
  (``support.kind_jobs.stand_in_containers``, an admission policy: the TrainJobs, runtimes, JobSets and
  Jobs are left as they are, and a pod's resources are not touched), and the workers advertise
  ``nvidia.com/gpu`` (``support.kind_jobs.advertised_extended_resource``) for the torchtune nodes' GPU
  limits;
- a TrainJob with ``spec.managedBy: kueue.x-k8s.io/multikueue`` is left alone by this controller. Kueue
  v0.17 without a MultiKueue AdmissionCheck on the ClusterQueue simply admits it and unsuspends it in
  place; this controller still creates nothing for it and writes no status.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
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
from runtime.resources import Quantity, add_resource_lists, format_resource_list, pod_requests
from support import e2e_paths as paths
from support import install, kind_jobs, kwok
from support.kueue import (
    CLUSTER_QUEUE_GVK,
    KUEUE_API_VERSION,
    KUEUE_GROUP,
    KUEUE_QUEUE_LABEL,
    RESOURCE_FLAVOR_GVK,
    WORKLOAD_GVK,
)

ROOT = Path(__file__).resolve().parents[2]


QUEUE_LABEL = KUEUE_QUEUE_LABEL
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"
"""The label that names a TrainJob's WorkloadPriorityClass."""
KUEUE_PATCH_MANAGER = "kueue.x-k8s.io/manager"
"""The ``spec.runtimePatches[].manager`` Kueue writes its part of a TrainJob under."""
FLAVOR_LABEL = "kueue-e2e.trainer.kubeflow.org/flavor"
FLAVOR = "reserved"
TOLERATION = {"key": FLAVOR_LABEL, "operator": "Equal", "value": FLAVOR, "effect": "NoSchedule"}
RESOURCE_FLAVOR = "kueue-e2e-reserved"
CLUSTER_QUEUE = "kueue-e2e"
LOCAL_QUEUE = "main"
QUOTA = "500m"
"""The ClusterQueue's CPU quota: one TrainJob of :data:`JOB_CPU` at a time. Small, so that it fits beside
the control plane, JobSet, Kueue and two managers on one kind node of a 2-core machine."""
JOB_CPU = "500m"
LOW_PRIORITY, HIGH_PRIORITY = "kueue-e2e-low", "kueue-e2e-high"
JOBSET_NAME_LABEL = kind_jobs.JOBSET_NAME_LABEL
NODE_GVK = GVK("", "v1", "Node")
CONFIG_MAP_GVK = GVK("", "v1", "ConfigMap")
PRIORITY_CLASS_GVK = GVK(KUEUE_GROUP, "v1beta2", "WorkloadPriorityClass")
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
TIMEOUT = kind_jobs.TIMEOUT
"""Seconds a TrainJob gets to be admitted or to finish (real pods on kind start in seconds)."""


def _cluster_name(e2e_cluster: Any) -> str:
    if e2e_cluster.owned:
        return os.environ.get("E2E_CLUSTER_NAME", "trainer-e2e-pytest")
    return str(kwok.DEFAULT_NAME)


def on_kind(e2e_cluster: Any) -> bool:
    return bool(e2e_cluster.flavour == "kind")


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
    """Kueue for this cluster's path (``running_kueue``); without the kueue binary (kwok) or an installed
    Kueue (kind) a missing prerequisite. On kwok the Trainer API first: Kueue's TrainJob integration reads
    the ClusterTrainingRuntimes to size the Workloads (on kind the Helm install has them)."""
    if not on_kind(e2e_cluster):
        install.install_trainer(client)
    try:
        with paths.running_kueue(
            e2e_cluster.flavour, cluster_name=_cluster_name(e2e_cluster), kubeconfig=e2e_cluster.kubeconfig
        ) as process:
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


def _flavor_node(e2e_cluster: Any, client: Client) -> str:
    """kwok: its first fake node. kind: a worker, or the control plane of a one-node cluster."""
    if not on_kind(e2e_cluster):
        return f"{kwok.NODE_NAME_PREFIX}0"
    nodes = sorted(client.list(NODE_GVK).items, key=lambda n: n["metadata"]["name"])
    workers = [n for n in nodes if CONTROL_PLANE_LABEL not in (n["metadata"].get("labels") or {})]
    return str((workers or nodes)[0]["metadata"]["name"])


@pytest.fixture(scope="module")
def reserved_node(e2e_cluster: Any, client: Client, kueue: Any) -> Iterator[str]:
    """One node carries the flavor's label and a matching NoSchedule taint for the module: a pod lands
    there only with both the flavor's node selector and its toleration. Restored afterwards."""
    name = _flavor_node(e2e_cluster, client)
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
    """A ResourceFlavor for the reserved node and a ClusterQueue with :data:`QUOTA` of CPU in it: room for
    one of this module's TrainJobs at a time; within the queue a higher priority preempts a lower one.
    Deleted after the module, while Kueue runs."""
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
            "preemption": {"withinClusterQueue": "LowerPriority"},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": RESOURCE_FLAVOR, "resources": [{"name": "cpu", "nominalQuota": QUOTA}]}
                    ],
                }
            ],
        },
    }
    with queue_for_module(client, flavor, queue):
        yield CLUSTER_QUEUE


@contextlib.contextmanager
def queue_for_module(client: Client, flavor: Mapping[str, Any], queue: Mapping[str, Any]) -> Iterator[None]:
    """The ResourceFlavor and ClusterQueue applied, the queue Active; both deleted afterwards, while Kueue
    still runs (each carries its resource-in-use finalizer, let go once the test namespaces' Workloads are
    gone)."""
    client.apply(flavor, "e2e", force=True)
    client.apply(queue, "e2e", force=True)
    name = queue["metadata"]["name"]

    def active() -> None:
        assert condition(client.get(CLUSTER_QUEUE_GVK, name), "Active")["status"] == "True"

    envtest.eventually(active, timeout=30, interval=0.25)
    try:
        yield
    finally:
        for gvk, obj in ((CLUSTER_QUEUE_GVK, queue), (RESOURCE_FLAVOR_GVK, flavor)):
            with contextlib.suppress(NotFound):
                client.delete(gvk, obj["metadata"]["name"])

            def gone(gvk: GVK = gvk, name: str = obj["metadata"]["name"]) -> None:
                with contextlib.suppress(NotFound):
                    found = client.get(gvk, name)
                    raise AssertionError(f"{gvk.kind} {name} is still there: {found['metadata']}")

            envtest.eventually(gone, timeout=120, interval=0.25)


@pytest.fixture(scope="module")
def priority_classes(client: Client, kueue: Any) -> Iterator[None]:
    """Two WorkloadPriorityClasses, low and high, for the module."""
    for name, value in ((LOW_PRIORITY, 100), (HIGH_PRIORITY, 1000)):
        client.apply(
            {
                "apiVersion": KUEUE_API_VERSION,
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": name},
                "value": value,
            },
            "e2e",
            force=True,
        )
    try:
        yield
    finally:
        for name in (LOW_PRIORITY, HIGH_PRIORITY):
            with contextlib.suppress(NotFound):
                client.delete(PRIORITY_CLASS_GVK, name)


pytestmark = pytest.mark.usefixtures("kueue", "manager")


# ------------------------------------------------------------------------------------------------- helpers


def local_queue(client: Client, namespace: str, cluster_queue: str = CLUSTER_QUEUE) -> None:
    client.create(
        {
            "apiVersion": KUEUE_API_VERSION,
            "kind": "LocalQueue",
            "metadata": {"name": LOCAL_QUEUE, "namespace": namespace},
            "spec": {"clusterQueue": cluster_queue},
        }
    )


def trainjob(
    name: str,
    *,
    queue: str | None = LOCAL_QUEUE,
    num_nodes: int = 1,
    cpu: str | None = JOB_CPU,
    run_time: str | None = None,
    command: tuple[str, ...] | None = None,
    priority: str | None = None,
    managed_by: str | None = None,
    suspend: bool | None = None,
) -> dict[str, Any]:
    """A torch-distributed TrainJob; ``cpu`` per node (so ``num_nodes * cpu`` of the queue's quota). On kind
    its pods run the runtime's image (a stand-in whose default command exits 0) or ``command``; on kwok
    they run for ``run_time`` (kwok's pod-complete stage reads the annotation)."""
    spec: dict[str, Any] = {
        "runtimeRef": {"name": "torch-distributed", "kind": constants.CLUSTER_TRAINING_RUNTIME_KIND},
        "trainer": {"numNodes": num_nodes},
    }
    if cpu is not None:
        spec["trainer"]["resourcesPerNode"] = {"requests": {"cpu": cpu}}
    if command is not None:
        spec["trainer"]["command"] = list(command)
    if run_time is not None:
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
    if priority is not None:
        labels[PRIORITY_LABEL] = priority
    return {
        "apiVersion": constants.API_VERSION,
        "kind": constants.TRAINJOB_KIND,
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
    }


def holding_trainjob(e2e_cluster: Any, name: str, **kwargs: Any) -> dict[str, Any]:
    """A TrainJob whose pods keep running until the test lets them end: on kind they run
    ``kind_jobs.HOLD_COMMAND`` (:func:`finish_holder` releases them), on kwok for an hour."""
    if on_kind(e2e_cluster):
        return trainjob(name, command=kind_jobs.HOLD_COMMAND, **kwargs)
    return trainjob(name, run_time="1h", **kwargs)


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

    result: dict[str, Any] = eventually(done, timeout=TIMEOUT)
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

    result: dict[str, Any] = eventually(done, timeout=TIMEOUT)
    return result


def running(e2e_cluster: Any, namespace: str, name: str, eventually: Callable[..., Any]) -> list[Any]:
    """The TrainJob's pods once all are Running (kind and kwok alike)."""

    def all_running() -> list[Any]:
        return kind_jobs.running_pods(e2e_cluster, namespace, name)

    result: list[Any] = eventually(all_running, timeout=TIMEOUT)
    return result


def kueue_patch(trainjob: Mapping[str, Any]) -> dict[str, Any]:
    found = [p for p in trainjob["spec"].get("runtimePatches") or [] if p["manager"] == KUEUE_PATCH_MANAGER]
    assert len(found) == 1, trainjob["spec"].get("runtimePatches")
    return dict(found[0])


def suspended_by_kueue(stored: Mapping[str, Any], kueue: Any) -> None:
    """Kueue's webhook suspended the TrainJob at creation (the manifest does not set it)."""
    assert stored["spec"].get("suspend") is True, (
        f"Kueue did not suspend TrainJob {stored['metadata']['name']} at creation (spec: {stored['spec']}); "
        f"Kueue runs {kueue!r}: is its {KUEUE_PATCH_MANAGER} TrainJob integration "
        "(trainer.kubeflow.org/trainjob) on?"
    )


# -------------------------------------------------------------------------------------------------- tests


@pytest.mark.usefixtures("cluster_queue")
def test_a_queued_trainjob_is_suspended_by_kueue_until_admitted_then_runs_to_complete(
    client: Client, kueue: Any, namespace: str, eventually: Callable[..., Any]
) -> None:
    # Created before its LocalQueue exists, so that its Workload has to wait.
    created = install.create_trainjob(client, trainjob("first"), namespace)
    suspended_by_kueue(created, kueue)
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
    e2e_cluster: Any, client: Client, kueue: Any, namespace: str, eventually: Callable[..., Any]
) -> None:
    local_queue(client, namespace)
    # The first runs until the test lets it end: it holds the quota however slow the machine.
    first = install.create_trainjob(client, holding_trainjob(e2e_cluster, "first"), namespace)
    suspended_by_kueue(first, kueue)
    admitted(client, first, eventually)
    holders = running(e2e_cluster, namespace, "first", eventually)
    second = install.create_trainjob(client, trainjob("second"), namespace)

    def still_waiting() -> None:
        workload = workload_of(client, second)
        reserved = condition(workload, "QuotaReserved")
        assert (reserved["status"], reserved["reason"]) == ("False", "Pending"), reserved
        assert "insufficient unused quota for cpu" in reserved["message"]
        assert not is_true(workload, "Admitted"), workload["status"]
        stored = get_trainjob(client, namespace, "second")
        assert stored["spec"]["suspend"] is True
        assert condition(stored, constants.CONDITION_SUSPENDED)["status"] == "True"
        assert not pods_of(client, namespace, "second")
        holder = workload_of(client, first)
        assert is_true(holder, "Admitted") and not is_true(holder, "Finished"), holder["status"]

    eventually(still_waiting)
    # The first's pods still run, so the check above saw the second wait on a quota that was truly held.
    kind_jobs.running_pods(e2e_cluster, namespace, "first")

    if on_kind(e2e_cluster):
        # The first ends by itself: Complete, its Workload Finished; the quota goes to the second.
        kind_jobs.release(e2e_cluster, namespace, holders)
        completed(client, first, eventually)
        freed_at = condition(workload_of(client, first), "Finished")["lastTransitionTime"]
    else:
        # kwok's pods cannot be told to end: free the quota by deleting the first TrainJob instead.
        freed_at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")  # RFC 3339, to the second, rounded down
        client.delete(install.TRAINJOB_GVK, "first", namespace)
    admitted(client, second, eventually)
    completed(client, second, eventually)
    second_admitted = condition(workload_of(client, second), "Admitted")["lastTransitionTime"]
    assert second_admitted >= freed_at  # RFC 3339 in UTC: string order is time order


@pytest.mark.usefixtures("cluster_queue", "priority_classes")
def test_a_higher_priority_trainjob_preempts_a_running_one_which_resumes_and_completes_later(
    e2e_cluster: Any, client: Client, kueue: Any, namespace: str, eventually: Callable[..., Any]
) -> None:
    kind_jobs.skip_unless_kind(e2e_cluster, "the preempted TrainJob must run again on new pods and end")
    local_queue(client, namespace)
    low = install.create_trainjob(
        client, holding_trainjob(e2e_cluster, "low", priority=LOW_PRIORITY), namespace
    )
    suspended_by_kueue(low, kueue)
    admitted(client, low, eventually)
    before = {p.metadata.uid for p in running(e2e_cluster, namespace, "low", eventually)}

    high = install.create_trainjob(client, trainjob("high", priority=HIGH_PRIORITY), namespace)

    def preempted() -> None:
        workload = workload_of(client, low)
        evicted = condition(workload, "Evicted")
        assert (evicted["status"], evicted["reason"]) == ("True", "Preempted"), evicted
        stored = get_trainjob(client, namespace, "low")
        assert stored["spec"]["suspend"] is True, stored["spec"]
        suspended = condition(stored, constants.CONDITION_SUSPENDED)
        assert (suspended["status"], suspended["reason"]) == ("True", constants.REASON_SUSPENDED), suspended
        assert client.get(install.JOBSET_GVK, "low", namespace)["spec"]["suspend"] is True
        # The preempted TrainJob's pods are deleted, not left running beside the preemptor's.
        left = pods_of(client, namespace, "low")
        assert not left, f"pods of the preempted TrainJob: {[p['metadata']['name'] for p in left]}"

    eventually(preempted, timeout=TIMEOUT)
    admitted(client, high, eventually)
    completed(client, high, eventually)
    high_finished = condition(workload_of(client, high), "Finished")["lastTransitionTime"]

    # The quota is free again: the preempted TrainJob is admitted anew, resumes on new pods, and Completes.
    workload = admitted(client, low, eventually)
    assert condition(workload, "Admitted")["lastTransitionTime"] >= high_finished
    after = running(e2e_cluster, namespace, "low", eventually)
    assert not before & {p.metadata.uid for p in after}, "the resumed TrainJob runs on the preempted pods"
    kind_jobs.release(e2e_cluster, namespace, after)
    stored = completed(client, low, eventually)
    resumed = condition(stored, constants.CONDITION_SUSPENDED)
    assert (resumed["status"], resumed["reason"]) == ("False", constants.REASON_RESUMED)


@pytest.mark.usefixtures("cluster_queue")
def test_the_flavors_node_selector_and_toleration_reach_the_pods_through_kueues_runtime_patch(
    client: Client, namespace: str, reserved_node: str, eventually: Callable[..., Any]
) -> None:
    local_queue(client, namespace)
    created = install.create_trainjob(client, trainjob("placed", num_nodes=2, cpu="250m"), namespace)
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


# ------------------------------------------------------------------- Kueue's PodSets equal the created pods

PODSETS_FLAVOR = "kueue-e2e-podsets"
PODSETS_QUEUE = "kueue-e2e-podsets"
GPU = "nvidia.com/gpu"
PODSETS_QUOTA = {"cpu": "1000", "memory": "10Ti", GPU: "1000"}
"""Every resource the cases' pods request, with room for all of them at once."""
PODSETS_TIMEOUT = 240.0
"""Seconds every case gets to Complete: on kind some 60 real pods, a few at a time on the workers."""
GPUS_PER_WORKER = "8"
"""What each kind worker advertises: a torchtune runtime's node asks for 2, as kwok's nodes have 8."""
PV_GVK = GVK("", "v1", "PersistentVolume")
PVC_GVK = GVK("", "v1", "PersistentVolumeClaim")
EVENT_GVK = GVK("", "v1", "Event")
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
SMALL = {"requests": {"cpu": "100m", "memory": "32Mi"}}
PER_NODE = {"requests": {"cpu": "200m", "memory": "64Mi"}}
"""``spec.trainer.resourcesPerNode`` of the cases that set one. It names every resource the runtime's own
requests name: Kueue v0.17.0 is built against Trainer v2.2.0, which replaces the runtime's resources with
``resourcesPerNode`` where v2.3.0 (and this port) merges them (docs/compatibility.md, "Kueue")."""


def _mpi_variant(ancestor: str, run_launcher_as_node: bool) -> dict[str, Any]:
    """A TrainingRuntime of the MPI shape with ``mlPolicy.numNodes`` 3 and the trainer ancestor label on the
    ``ancestor`` job: the shipped deepspeed/mlx runtimes put it on the launcher, upstream's e2e runtimes on
    the node job; each has its own pod count rule upstream (``trainingruntime.go`` and ``mpi.go``)."""

    def job(name: str, **extra: Any) -> dict[str, Any]:
        container = {"name": "node", "image": "example.com/mpi:1", "resources": SMALL}
        template: dict[str, Any] = {"spec": {"template": {"spec": {"containers": [container]}}}}
        if name == ancestor:
            template["metadata"] = {"labels": {constants.LABEL_TRAINJOB_ANCESTOR: constants.ANCESTOR_TRAINER}}
        return {"name": name, "template": template, **extra}

    return {
        "apiVersion": constants.API_VERSION,
        "kind": constants.TRAINING_RUNTIME_KIND,
        "metadata": {"name": f"mpi-{ancestor}-{'as-node' if run_launcher_as_node else 'apart'}"},
        "spec": {
            "mlPolicy": {
                "numNodes": 3,
                "mpi": {
                    "numProcPerNode": 1,
                    "mpiImplementation": "OpenMPI",
                    "sshAuthMountPath": "/home/mpiuser/.ssh",
                    "runLauncherAsNode": run_launcher_as_node,
                },
            },
            "template": {
                "spec": {
                    "replicatedJobs": [
                        job(constants.NODE),
                        job(constants.LAUNCHER, dependsOn=[{"name": constants.NODE, "status": "Ready"}]),
                    ]
                }
            },
        },
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class PodSetCase:
    name: str
    runtime: str
    kind: str = constants.CLUSTER_TRAINING_RUNTIME_KIND
    trainer: Mapping[str, Any] | None = None
    pods: Mapping[str, int] | None = None
    """Pods per replicated job by upstream v2.3.0's rules, where the case is about them."""


_SHIPPED_RUNTIMES = sorted(
    d["metadata"]["name"]
    for d in install.read_manifests(install.TRAINER_RUNTIMES_DIR, [constants.CLUSTER_TRAINING_RUNTIME_KIND])
)
_MPI_SHAPES = [(a, n) for a in (constants.LAUNCHER, constants.NODE) for n in (True, False)]
MPI_VARIANTS = [_mpi_variant(ancestor, as_node) for ancestor, as_node in _MPI_SHAPES]


def _shipped_case(runtime: str) -> PodSetCase:
    """Two nodes with resources of the TrainJob's (three for MPI: the launcher is one of them); torchtune
    as its runtime stands (one node, its GPU limit)."""
    name = runtime.replace(".", "-")  # a TrainJob's name is a DNS label
    if runtime.startswith("torchtune-"):
        return PodSetCase(name=name, runtime=runtime)
    if runtime in ("deepspeed-distributed", "mlx-distributed"):  # their launcher is labelled trainer
        return PodSetCase(
            name=name,
            runtime=runtime,
            trainer={"numNodes": 3, "resourcesPerNode": PER_NODE},
            pods={constants.LAUNCHER: 1, constants.NODE: 2},
        )
    return PodSetCase(name=name, runtime=runtime, trainer={"numNodes": 2, "resourcesPerNode": PER_NODE})


def _mpi_case(ancestor: str, as_node: bool, num_nodes: int | None) -> PodSetCase:
    """Upstream: a job labelled ancestor trainer starts at mlPolicy.numNodes (3) pods, any other at its
    parallelism (1); only spec.trainer.numNodes moves a count, and only node's (less the launcher when it
    is a node)."""
    runtime = _mpi_variant(ancestor, as_node)["metadata"]["name"]
    if num_nodes is None:
        node = 3 if ancestor == constants.NODE else 1
    else:
        node = num_nodes - 1 if as_node else num_nodes
    return PodSetCase(
        name=f"{runtime}-{num_nodes or 'default'}",
        runtime=runtime,
        kind=constants.TRAINING_RUNTIME_KIND,
        trainer={"numNodes": num_nodes, "resourcesPerNode": PER_NODE} if num_nodes else None,
        pods={constants.LAUNCHER: 3 if ancestor == constants.LAUNCHER else 1, constants.NODE: node},
    )


PODSET_CASES = [
    *(_shipped_case(r) for r in _SHIPPED_RUNTIMES),
    *(_mpi_case(a, n, num_nodes) for a, n in _MPI_SHAPES for num_nodes in (None, 4)),
]


@pytest.fixture(scope="module")
def podsets_queue(client: Client, kueue: Any) -> Iterator[str]:
    """A flavor without node labels and a ClusterQueue with ample quota of every resource the cases request,
    so that every case is admitted at once. Deleted after the module, while Kueue runs."""
    flavor = {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": PODSETS_FLAVOR},
    }
    queue = {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": PODSETS_QUEUE},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": list(PODSETS_QUOTA),
                    "flavors": [
                        {
                            "name": PODSETS_FLAVOR,
                            "resources": [{"name": r, "nominalQuota": q} for r, q in PODSETS_QUOTA.items()],
                        }
                    ],
                }
            ],
        },
    }
    with queue_for_module(client, flavor, queue):
        yield PODSETS_QUEUE


def initializer_volume(name: str, namespace: str, trainjob_name: str) -> dict[str, Any]:
    """A hostPath PersistentVolume bound ahead to the claim JobSet makes from a torchtune runtime's
    ``volumeClaimPolicies`` (``initializer-<jobset>``): nothing provisions volumes on kwok, and without it
    the initializers never start, so the ``node`` job, which waits for them, is never created. The kind
    cluster's default StorageClass could provision one, but the claim binds to this one there too; its
    directory is made on the node that mounts it."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "20Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "hostPath": {"path": f"/tmp/{name}", "type": "DirectoryOrCreate"},
            "claimRef": {"namespace": namespace, "name": f"initializer-{trainjob_name}"},
        },
    }


def progress(client: Client, namespace: str, names: Sequence[str]) -> str:
    """Where these TrainJobs stand: their conditions and Warning events, their Workloads' conditions, their
    pods' phases and their claims' (a torchtune runtime's initializers wait for theirs)."""

    def conditions(obj: Mapping[str, Any]) -> list[tuple[str, str, str]]:
        return [
            (c["type"], c["status"], c.get("reason", ""))
            for c in (obj.get("status") or {}).get("conditions") or ()
        ]

    out = []
    for name in names:
        stored = get_trainjob(client, namespace, name)
        uid = stored["metadata"]["uid"]
        workloads = [
            conditions(w)
            for w in client.list(WORKLOAD_GVK, namespace).items
            if any(r["uid"] == uid for r in w["metadata"].get("ownerReferences") or ())
        ]
        warnings = [
            f"{e.get('reason')}: {e.get('message')}"
            for e in client.list(EVENT_GVK, namespace, field_selector=f"involvedObject.uid={uid}").items
            if e.get("type") == "Warning"
        ]
        pods = Counter(
            (p["metadata"]["labels"].get(REPLICATED_JOB_LABEL), p["status"].get("phase"))
            for p in pods_of(client, namespace, name)
        )
        claims = [
            (c["metadata"]["name"], (c.get("status") or {}).get("phase"))
            for c in client.list(PVC_GVK, namespace, label_selector=f"{JOBSET_NAME_LABEL}={name}").items
        ]
        out.append(
            f"{name}: conditions {conditions(stored)}, warnings {warnings}, Workloads {workloads}, "
            f"pods {dict(pods)}, claims {claims}"
        )
    return "; ".join(out)


def pod_set_requests(pod_spec: Mapping[str, Any]) -> dict[str, Quantity]:
    """What one pod of this spec requests, a container's limits standing in for the requests it does not
    name (the API server's defaulting of a pod, which Kueue applies to the PodSets it counts)."""
    defaulted = dict(pod_spec)
    for field in ("containers", "initContainers"):
        containers = []
        for container in pod_spec.get(field) or ():
            resources = container.get("resources") or {}
            requests = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
            containers.append({**container, "resources": {**resources, "requests": requests}})
        defaulted[field] = containers
    return pod_requests(defaulted)


def disagreements(
    case: PodSetCase, workload: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]
) -> list[str]:
    """Where Kueue's Workload and the pods differ: the pods per PodSet (and upstream's count, where the
    case names it), each pod's requests against its PodSet's, and what Kueue charged to the quota at
    admission against the sum of the pods' requests."""
    by_job: dict[str, list[Mapping[str, Any]]] = {}
    for pod in pods:
        by_job.setdefault(pod["metadata"]["labels"][REPLICATED_JOB_LABEL], []).append(pod)
    created = {job: len(job_pods) for job, job_pods in sorted(by_job.items())}
    counted = {p["name"]: p["count"] for p in sorted(workload["spec"]["podSets"], key=lambda p: p["name"])}
    problems = []
    if counted != created:
        problems.append(f"{case.name}: Kueue counts {counted}, the JobSet made {created}")
    if case.pods is not None and created != dict(sorted(case.pods.items())):
        problems.append(f"{case.name}: pods {created}, upstream's rule gives {dict(case.pods)}")
    for pod_set in workload["spec"]["podSets"]:
        sized = pod_set_requests(pod_set["template"]["spec"])
        for pod in by_job.get(pod_set["name"], ()):
            requested = pod_requests(pod["spec"])
            if requested != sized:
                problems.append(
                    f"{case.name}: pod {pod['metadata']['name']} requests {format_resource_list(requested)}, "
                    f"its PodSet {format_resource_list(sized)}"
                )
    for assignment in workload["status"]["admission"]["podSetAssignments"]:
        charged = {
            r: Quantity.parse(q)
            for r, q in (assignment.get("resourceUsage") or {}).items()
            if r in PODSETS_QUOTA
        }
        used: dict[str, Quantity] = {}
        for pod in by_job.get(assignment["name"], ()):
            add_resource_lists(
                used, {r: q for r, q in pod_requests(pod["spec"]).items() if r in PODSETS_QUOTA}
            )
        if _nonzero(charged) != _nonzero(used):
            problems.append(
                f"{case.name}: Kueue charged {assignment['name']} {format_resource_list(charged)}, "
                f"its pods request {format_resource_list(used)}"
            )
    return problems


def _nonzero(resources: Mapping[str, Quantity]) -> dict[str, Quantity]:
    return {r: q for r, q in resources.items() if not q.is_zero()}


def test_kueues_podsets_count_and_size_the_pods_the_jobset_creates(
    client: Client, e2e_cluster: Any, namespace: str, podsets_queue: str, eventually: Callable[..., Any]
) -> None:
    # Kueue sizes a TrainJob's Workload by running upstream's Go runtime framework on it (its trainjob
    # integration); the quota it charges is only right if our controller's JobSet makes exactly those pods.
    # The counts are Kueue's, the JobSet controller's and ours, the same builds on both paths. On kwok the
    # pods are played by its stages; on kind they are real and end at once (``true``), on nodes that
    # advertise the GPUs the torchtune runtimes' nodes ask for.
    with contextlib.ExitStack() as stack:
        if on_kind(e2e_cluster):
            stack.enter_context(
                kind_jobs.stand_in_containers(e2e_cluster, namespace, kind_jobs.workload_image(), eventually)
            )
            stack.enter_context(kind_jobs.advertised_extended_resource(e2e_cluster, GPU, GPUS_PER_WORKER))
        _podsets_equal_the_created_pods(client, namespace, podsets_queue, eventually)


def _podsets_equal_the_created_pods(
    client: Client, namespace: str, podsets_queue: str, eventually: Callable[..., Any]
) -> None:
    local_queue(client, namespace, podsets_queue)
    for variant in MPI_VARIANTS:
        client.create({**variant, "metadata": {**variant["metadata"], "namespace": namespace}})
    volumes = []
    try:
        for case in PODSET_CASES:
            if case.runtime.startswith("torchtune-"):
                volumes.append(f"{namespace}-{case.name}")
                client.create(initializer_volume(volumes[-1], namespace, case.name))
            spec: dict[str, Any] = {"runtimeRef": {"name": case.runtime, "kind": case.kind}}
            if case.trainer is not None:
                spec["trainer"] = dict(case.trainer)
            manifest = {
                "apiVersion": constants.API_VERSION,
                "kind": constants.TRAINJOB_KIND,
                "metadata": {"name": case.name, "labels": {QUEUE_LABEL: LOCAL_QUEUE}},
                "spec": spec,
            }
            install.create_trainjob(client, manifest, namespace)

        # Once Complete, every pod its JobSet will ever make exists: the pods of a finished Job stay, and a
        # JobSet deletes only the Jobs still active when it completes, which none is here. Every pod ends by
        # itself, an MPI node pod before its launcher: on kind each runs ``true`` (a node job that Succeeded
        # counts as Ready for the launcher's dependsOn), on kwok each runs the same run time and the
        # launcher is made only once the node pods are Ready. A pod that Failed may have been replaced by
        # its Job, so its TrainJob's pods would not be the JobSet's plan: no case may have one.
        def all_complete() -> list[dict[str, Any]]:
            stored = [get_trainjob(client, namespace, c.name) for c in PODSET_CASES]
            pending = [t["metadata"]["name"] for t in stored if not TrainJobView(t).is_complete]
            assert not pending, (
                f"TrainJobs not Complete yet: {pending}; {progress(client, namespace, pending)}"
            )
            return stored

        stored = eventually(all_complete, timeout=PODSETS_TIMEOUT)
        pods = {case.name: pods_of(client, namespace, case.name) for case in PODSET_CASES}
        failed = [
            p["metadata"]["name"]
            for found in pods.values()
            for p in found
            if p["status"].get("phase") == "Failed"
        ]
        assert not failed, f"pods that Failed, which their Jobs may have replaced: {failed}"
        problems = [
            problem
            for case, trainjob_obj in zip(PODSET_CASES, stored, strict=True)
            for problem in disagreements(case, workload_of(client, trainjob_obj), pods[case.name])
        ]
        assert not problems, "\n".join(problems)
    finally:
        for volume in volumes:
            with contextlib.suppress(NotFound):
                client.delete(PV_GVK, volume)
