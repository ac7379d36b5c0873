"""What the kind tier's gang-scheduling tests read and make: the free CPU of the nodes a gang can land on,
Pods that hold it, and what a scheduler reported about a Pod.

Free CPU is counted as kube-scheduler's NodeResourcesFit filter counts it: a node's allocatable CPU minus the
CPU requests of the non-terminal Pods bound to it. A node counts when it is Ready, not cordoned, and has no
NoSchedule or NoExecute taint (the gangs' Pods tolerate none), so the figures hold on one node or on many,
whatever the Pods of other components already request.

The ``e2e_cluster`` argument is the session fixture of ``test/e2e/conftest.py``; ``eventually`` its fixture of
the same name.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import kubernetes

from runtime.resources import Quantity, pod_requests

POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
HOSTNAME_LABEL = "kubernetes.io/hostname"
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
BLOCKER_LABEL = "trainer-e2e/blocker"


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeRoom:
    """A node a gang's Pod can be bound to, and the CPU its bound Pods leave free."""

    node: str
    free_cpu_millis: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    """One scheduling event about a Pod (events.k8s.io): what a scheduler decided, and when it first did."""

    reason: str
    note: str
    reporting_controller: str
    time: datetime.datetime
    count: int
    """Occurrences: 1, or the event series' count (client-go sends the second at once, later ones batched)."""


def _millis(quantity: Quantity) -> int:
    return int(quantity.value * 1000)


def cpu_millis(text: str) -> int:
    """A CPU quantity (``"250m"``, ``"1"``) in millicores."""
    return _millis(Quantity.parse(text))


def _schedulable(node: Any) -> bool:
    if node.spec.unschedulable:
        return False
    if any(t.effect in {"NoSchedule", "NoExecute"} for t in node.spec.taints or []):
        return False
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


def free_cpu(e2e_cluster: Any) -> list[NodeRoom]:
    """The schedulable nodes, by name, with their free CPU in millicores."""
    core = e2e_cluster.core
    rooms = []
    pods = core.list_pod_for_all_namespaces().items
    for node in sorted(core.list_node().items, key=lambda n: n.metadata.name):
        if not _schedulable(node):
            continue
        used = 0
        for pod in pods:
            if pod.spec.node_name != node.metadata.name or pod.status.phase in TERMINAL_PHASES:
                continue
            cpu = pod_requests(e2e_cluster.api.sanitize_for_serialization(pod.spec)).get("cpu")
            used += 0 if cpu is None else _millis(cpu)
        allocatable = cpu_millis(node.status.allocatable["cpu"])
        rooms.append(NodeRoom(node=node.metadata.name, free_cpu_millis=allocatable - used))
    return rooms


def wait_settled(e2e_cluster: Any, eventually: Callable[..., Any], *, timeout: float = 180.0) -> None:
    """Return once no namespace and no Pod is being deleted: what earlier tests leave frees its CPU before the
    caller counts it, never in the middle of a test that depends on the count."""

    def settled() -> None:
        core = e2e_cluster.core
        going = [n.metadata.name for n in core.list_namespace().items if n.status.phase == "Terminating"]
        going += [
            f"pod {p.metadata.namespace}/{p.metadata.name}"
            for p in core.list_pod_for_all_namespaces().items
            if p.metadata.deletion_timestamp is not None
        ]
        assert not going, f"still being deleted: {going}"

    eventually(settled, timeout=timeout, interval=1.0)


def blocker_pod(name: str, node: str, cpu_millis: int, image: str) -> dict[str, Any]:
    """A Pod of ``image`` that only sleeps, requesting ``cpu_millis`` on ``node`` (the default scheduler binds
    it there by its hostname label): it holds that CPU until deleted."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {BLOCKER_LABEL: "true"}},
        "spec": {
            "nodeSelector": {HOSTNAME_LABEL: node},
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "hold",
                    "image": image,
                    "command": ["sleep", "infinity"],
                    "resources": {"requests": {"cpu": f"{cpu_millis}m", "memory": "16Mi"}},
                }
            ],
        },
    }


def passing_pod(name: str, image: str) -> dict[str, Any]:
    """A Pod of ``image`` that exits at once, requesting 1m CPU: the creation of a Pod of some other workload,
    which is what makes the Coscheduling plugin retry the gangs it rejected (see ``test_kind_gang.py``)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "pass",
                    "image": image,
                    "command": ["true"],
                    "resources": {"requests": {"cpu": "1m", "memory": "8Mi"}},
                }
            ],
        },
    }


def bound(pod: Any) -> bool:
    """The Pod has a node: a scheduler bound it (a bound Pod never becomes unbound)."""
    return bool(pod.spec.node_name)


def unschedulable(pod: Any, reasons: frozenset[str] = frozenset({"Unschedulable"})) -> bool:
    """The scheduler tried the Pod and did not bind it (PodScheduled False, for one of ``reasons``:
    kube-scheduler says Unschedulable; Volcano says Schedulable of a Pod that found a node while its gang
    did not)."""
    return any(
        c.type == "PodScheduled" and c.status == "False" and c.reason in reasons
        for c in pod.status.conditions or []
    )


SCHEDULING_REASONS = frozenset({"FailedScheduling", "Scheduled"})


def reports(
    e2e_cluster: Any,
    namespace: str,
    name: str,
    *,
    kind: str = "Pod",
    reasons: frozenset[str] = SCHEDULING_REASONS,
) -> list[Report]:
    """The events about the object ``kind``/``name`` for ``reasons`` (by default a Pod's scheduling events,
    FailedScheduling and Scheduled), oldest first.

    Read as JSON: the client's model of an events.k8s.io Event refuses one without ``eventTime``, which
    events recorded through the core API (the kubelet's, Volcano's) lack."""
    events = kubernetes.client.EventsV1Api(e2e_cluster.api)
    raw: Any = events.list_namespaced_event(namespace, _preload_content=False)
    found = []
    for event in json.loads(raw.data)["items"]:
        regarding = event.get("regarding") or {}
        if regarding.get("kind") != kind or regarding.get("name") != name:
            continue
        if event.get("reason") not in reasons:
            continue
        when = (
            event.get("eventTime")
            or event.get("deprecatedFirstTimestamp")
            or event["metadata"]["creationTimestamp"]
        )
        found.append(
            Report(
                reason=event["reason"],
                note=event.get("note") or "",
                reporting_controller=event.get("reportingController") or "",
                time=datetime.datetime.fromisoformat(when.replace("Z", "+00:00")),
                count=(event.get("series") or {}).get("count", 1),
            )
        )
    return sorted(found, key=lambda r: r.time)
