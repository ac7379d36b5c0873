"""Gang scheduling on real Pods: scheduler-plugins' Coscheduling plugin acting on the PodGroups that the
CoScheduling runtime plugin writes, and Volcano's scheduler acting on those the Volcano runtime plugin writes.
kind only (``hack/e2e-setup-kind.sh``; Volcano only with ``VOLCANO=1``, else its tests skip).

``hack/e2e-setup-kind.sh`` installs scheduler-plugins as a second scheduler, from its Go module's Helm chart
with the images built here; the ``coscheduling`` fixture reads the scheduler's name and checks that its
profile enables Coscheduling from the chart's ConfigMap. As upstream's Trainer (and this port) set no
``schedulerName`` on a TrainJob's Pods, a runtime that gang-schedules with a second scheduler names it in its
Pod template, as upstream's proposal for the Trainer (kubeflow/trainer, proposal 2170) tells users to. The
runtime here is the all-reduce one of ``test_kind.py`` (``support.allreduce_runtime``: two ranks that must
meet through the JobSet's headless Service) with ``podGroupPolicy.coscheduling`` and that ``schedulerName``.

- **Held whole.** The CPU that the schedulable nodes leave free is counted (``support.kind_gang``) and held by
  blocker Pods so that exactly one Pod of the gang fits: the gang's minResources exceed the free CPU, but
  each Pod alone fits. The scheduler reports on every Pod (PodScheduled False, Unschedulable, from that
  scheduler) and the PodGroup controller sees the whole gang (phase Scheduling), and no Pod of it is bound:
  the default scheduler would have bound the one that fits.
- **Released together.** The blockers are deleted: both Pods are bound within a second of each other, the
  ranks meet and the TrainJob Completes; the PodGroup ends Finished.

Both run for each gang scheduler (the ``gang`` fixture's parameters). Volcano (installed from its Go
module's Helm chart, ``VOLCANO=1``) is named in the Pod template as ``volcano`` (its scheduler's default
``--scheduler-name``) with ``podGroupPolicy.volcano``. Where it differs: it reports a Pod that found a node
while its gang did not as ``Schedulable``, not ``Unschedulable`` (``JobInfo.TaskSchedulingReason``); a gang it
holds has its PodGroup Pending or Inqueue with the condition Unschedulable (the gang plugin's
``OnSessionClose``), not the phase Scheduling; and its PodGroup ends Completed. It retries a held gang every
scheduling period (1 s), so the release needs no new Pod; the test makes one for both.

The third test differs by scheduler:
- **scheduleTimeoutSeconds** (Coscheduling). As the PodGroup API documents it (``ScheduleTimeoutSeconds
  defines the maximal time of members/tasks to wait before run the pod group``) and the Coscheduling plugin
  implements it (``Permit`` waits that long, from the PodGroup, for the rest of the gang; a member that times
  out is rejected and ``Unreserve`` rejects every other waiting member, which go back to the scheduling queue,
  unbound): a gang with a member that this scheduler never attempts (it names a scheduler that does not run)
  has its two other members wait ``scheduleTimeoutSeconds`` (5, not the chart's ``permitWaitingTimeSeconds``
  of 10), then both are rejected, none bound; the PodGroup stays Scheduling. (The chart leaves
  ``podGroupBackoffSeconds`` at 0, so no group back-off follows the rejection.)
- **The queue** (Volcano). Volcano's PodGroup has no schedule timeout, and upstream's Volcano plugin (v2.3.0)
  writes none: it writes ``minMember``, ``minResources``, the ``queue`` of the runtime's
  ``scheduling.volcano.sh/queue-name`` annotation, ``priorityClassName`` and ``networkTopology``. Volcano
  holds a gang until it can start whole, with no deadline. So the test checks what it does with the queue and
  the gang's ``minResources``: in a Queue whose ``capability`` is one millicore short of the gang's CPU (room
  for one Pod, not two), the gang stays Pending, none bound, and the scheduler says "queue resource quota
  insufficient" (the capacity plugin's ``JobEnqueueable``), though the nodes have room; once the capability
  equals ``minResources``, both Pods are bound together and the TrainJob Completes.
"""

from __future__ import annotations

import datetime
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import kubernetes
import pytest
import yaml

from runtime.api import constants
from runtime.plugins.volcano import QUEUE_NAME_ANNOTATION
from support import allreduce_runtime as allreduce
from support import kind_gang, kind_jobs
from support.kind_jobs import JOBSET_NAME_LABEL, REPLICATED_JOB_LABEL, create, trainjob, wait_finished

SCHEDULER_NAMESPACE = "scheduler-plugins"
"""Where hack/e2e-setup-kind.sh installs scheduler-plugins' chart."""
SCHEDULER_CONFIG = "scheduler-config"
"""The chart's ConfigMap: the KubeSchedulerConfiguration of its scheduler."""
SCHEDULER_DEPLOYMENT = "scheduler-plugins-scheduler"
VOLCANO_NAMESPACE = "volcano-system"
"""Where hack/e2e-setup-kind.sh installs Volcano's chart (VOLCANO=1), as release ``volcano``."""
VOLCANO_CONFIG = "volcano-scheduler-configmap"
"""The chart's ConfigMap: the scheduler's actions and plugin tiers."""
VOLCANO_DEPLOYMENTS = ("volcano-scheduler", "volcano-controllers")
VOLCANO_SCHEDULER_NAME = "volcano"
"""The scheduler's default ``--scheduler-name`` (the chart passes none)."""
VOLCANO_QUEUES = ("scheduling.volcano.sh", "v1beta1", "queues")
NO_SCHEDULER = "no-such-scheduler"
"""A schedulerName that no scheduler serves: its Pods are never attempted."""
MIN_POD_CPU = 20
"""Millicores: below this, the nodes are too full for the held-whole test to mean anything."""
DECIDED_TIMEOUT = 120.0
"""Seconds for a scheduler to report on every Pod of a gang (Pods exist seconds after the TrainJob)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GangScheduler:
    """A gang scheduler on the cluster, and how it shows what it decided."""

    policy: str
    """The runtime's ``podGroupPolicy`` key, and the test ids' name."""
    scheduler_name: str
    """The Pods' ``schedulerName``; also the reporter of its scheduling events."""
    pod_groups: tuple[str, str, str]
    """Group, version and plural of the PodGroups the runtime plugin writes."""
    waiting_reasons: frozenset[str]
    """PodScheduled False reasons of a Pod the scheduler tried and did not bind."""
    finished_phase: str
    """The PodGroup's phase once every member succeeded."""

    def holds(self, pod_group: dict[str, Any]) -> bool:
        """The scheduler has seen the whole gang and holds it unbound."""
        status = pod_group.get("status", {})
        if self.policy == "coscheduling":
            return bool(status.get("phase") == "Scheduling")
        unschedulable = any(
            c.get("type") == "Unschedulable" and c.get("status") == "True"
            for c in status.get("conditions", [])
        )
        return unschedulable and status.get("phase") in {"Pending", "Inqueue"}

    def spec_extras(self) -> dict[str, Any]:
        """What the runtime plugin writes into the PodGroup's spec besides minMember and minResources, for a
        runtime that sets nothing else."""
        if self.policy == "coscheduling":
            return {"scheduleTimeoutSeconds": constants.DEFAULT_SCHEDULE_TIMEOUT_SECONDS}
        return {}


def _coscheduling(e2e_cluster: Any) -> GangScheduler:
    """scheduler-plugins' scheduler, whose profile must enable Coscheduling."""
    try:
        config_map = e2e_cluster.core.read_namespaced_config_map(SCHEDULER_CONFIG, SCHEDULER_NAMESPACE)
    except kubernetes.client.ApiException as exc:
        pytest.fail(
            f"no {SCHEDULER_NAMESPACE}/{SCHEDULER_CONFIG} ConfigMap ({exc}): hack/e2e-setup-kind.sh installs "
            "scheduler-plugins",
            pytrace=False,
        )
    config = yaml.safe_load(config_map.data["scheduler-config.yaml"])
    profile = config["profiles"][0]
    enabled = [p["name"] for p in profile["plugins"]["multiPoint"]["enabled"]]
    assert "Coscheduling" in enabled, profile
    apps = kubernetes.client.AppsV1Api(e2e_cluster.api)
    deployment: Any = apps.read_namespaced_deployment(SCHEDULER_DEPLOYMENT, SCHEDULER_NAMESPACE)
    assert deployment.status.available_replicas, (
        f"{SCHEDULER_DEPLOYMENT} is not available: {deployment.status}"
    )
    return GangScheduler(
        policy="coscheduling",
        scheduler_name=str(profile["schedulerName"]),
        pod_groups=("scheduling.x-k8s.io", "v1alpha1", "podgroups"),
        waiting_reasons=frozenset({"Unschedulable"}),
        finished_phase="Finished",
    )


def _volcano(e2e_cluster: Any) -> GangScheduler:
    """Volcano's scheduler, whose configuration must enable the gang plugin, and its controller manager;
    skips unless hack/e2e-setup-kind.sh installed it (VOLCANO=1, which it passes on as E2E_VOLCANO)."""
    expected = os.environ.get("E2E_VOLCANO") == "1"
    try:
        config_map = e2e_cluster.core.read_namespaced_config_map(VOLCANO_CONFIG, VOLCANO_NAMESPACE)
    except kubernetes.client.ApiException as exc:
        if not expected:
            pytest.skip(
                "Volcano is opt-in: VOLCANO=1 hack/e2e-setup-kind.sh installs it (docs/development.md)"
            )
        pytest.fail(
            f"no {VOLCANO_NAMESPACE}/{VOLCANO_CONFIG} ConfigMap ({exc.status} {exc.reason}), though "
            "E2E_VOLCANO=1 (hack/e2e-setup-kind.sh installs it)",
            pytrace=False,
        )
    config = yaml.safe_load(config_map.data["volcano-scheduler.conf"])
    plugins = [p["name"] for tier in config["tiers"] for p in tier["plugins"]]
    assert "gang" in plugins and "capacity" in plugins, config
    apps = kubernetes.client.AppsV1Api(e2e_cluster.api)
    for name in VOLCANO_DEPLOYMENTS:
        deployment: Any = apps.read_namespaced_deployment(name, VOLCANO_NAMESPACE)
        assert deployment.status.available_replicas, f"{name} is not available: {deployment.status}"
    return GangScheduler(
        policy="volcano",
        scheduler_name=VOLCANO_SCHEDULER_NAME,
        pod_groups=("scheduling.volcano.sh", "v1beta1", "podgroups"),
        waiting_reasons=frozenset({"Unschedulable", "Schedulable"}),
        finished_phase="Completed",
    )


def _kind_only(e2e_cluster: Any) -> None:
    kind_jobs.skip_unless_kind(e2e_cluster, "real Pods and a gang scheduler")


@pytest.fixture(scope="module", params=["coscheduling", "volcano"])
def gang(e2e_cluster: Any, request: pytest.FixtureRequest) -> GangScheduler:
    """Each gang scheduler in turn; skips off kind, and Volcano when it is not installed."""
    _kind_only(e2e_cluster)
    return _coscheduling(e2e_cluster) if request.param == "coscheduling" else _volcano(e2e_cluster)


@pytest.fixture(scope="module")
def coscheduling(e2e_cluster: Any) -> GangScheduler:
    _kind_only(e2e_cluster)
    return _coscheduling(e2e_cluster)


@pytest.fixture(scope="module")
def volcano(e2e_cluster: Any) -> GangScheduler:
    _kind_only(e2e_cluster)
    return _volcano(e2e_cluster)


@pytest.fixture(scope="module")
def workload_image(e2e_cluster: Any) -> str:
    _kind_only(e2e_cluster)
    return kind_jobs.workload_image()


def gang_runtime(
    name: str,
    image: str,
    *,
    gang: GangScheduler,
    cpu_millis: int = 10,
    schedule_timeout: int | None = None,
    straggler: bool = False,
    queue: str | None = None,
) -> dict[str, Any]:
    """The all-reduce TrainingRuntime, gang-scheduled by ``gang``, each node requesting ``cpu_millis``;
    with ``straggler``, one more replicated job whose one Pod names a scheduler that does not run; with
    ``queue``, the JobSet annotation that names the Volcano queue."""
    runtime = allreduce.allreduce_runtime(name, image, command=["python3", "allreduce.py"])
    spec = runtime["spec"]
    policy = {} if schedule_timeout is None else {"scheduleTimeoutSeconds": schedule_timeout}
    spec["podGroupPolicy"] = {gang.policy: policy}
    if queue is not None:
        spec["template"]["metadata"] = {"annotations": {QUEUE_NAME_ANNOTATION: queue}}
    jobs = spec["template"]["spec"]["replicatedJobs"]
    pod_spec = jobs[0]["template"]["spec"]["template"]["spec"]
    pod_spec["schedulerName"] = gang.scheduler_name
    pod_spec["containers"][0]["resources"]["requests"]["cpu"] = f"{cpu_millis}m"
    if straggler:
        jobs.append(
            {
                "name": "straggler",
                "template": {
                    "spec": {
                        "template": {
                            "spec": {
                                "schedulerName": NO_SCHEDULER,
                                "containers": [
                                    {
                                        "name": "straggler",
                                        "image": image,
                                        "command": ["true"],
                                        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                                    }
                                ],
                            }
                        }
                    }
                },
            }
        )
    return runtime


def gang_pods(e2e_cluster: Any, namespace: str, name: str, replicated_job: str | None = None) -> list[Any]:
    selector = f"{JOBSET_NAME_LABEL}={name}"
    if replicated_job is not None:
        selector += f",{REPLICATED_JOB_LABEL}={replicated_job}"
    pods = e2e_cluster.core.list_namespaced_pod(namespace, label_selector=selector).items
    return sorted(pods, key=lambda p: p.metadata.name)


def pod_group_name(prefix: str, namespace: str) -> str:
    """A TrainJob (and PodGroup) name no other test's namespace has: scheduler-plugins' PodGroup controller
    counts the Pods labelled with a PodGroup's name in every namespace, so a Pod of an earlier run's gang of
    the same name, in a namespace still being deleted, would change this one's phase."""
    return f"{prefix}-{namespace.rsplit('-', 1)[-1]}"


def read_pod_group(e2e_cluster: Any, gang: GangScheduler, namespace: str, name: str) -> dict[str, Any]:
    group, version, plural = gang.pod_groups
    return dict(e2e_cluster.custom.get_namespaced_custom_object(group, version, namespace, plural, name))


def pod_group_phase(e2e_cluster: Any, gang: GangScheduler, namespace: str, name: str) -> str:
    return str(read_pod_group(e2e_cluster, gang, namespace, name).get("status", {}).get("phase", ""))


def assert_none_bound(e2e_cluster: Any, namespace: str, name: str, uids: set[str], why: str) -> None:
    """The gang's Pods are still ``uids``, none bound (read again: the end of a window of holding)."""
    pods = gang_pods(e2e_cluster, namespace, name)
    assert {p.metadata.uid for p in pods} == uids, "a Pod of the gang was replaced"
    started = [(p.metadata.name, p.spec.node_name) for p in pods if kind_gang.bound(p)]
    assert not started, f"the gang started in part, {started}, {why}"


def wait_bound_together(
    e2e_cluster: Any,
    gang: GangScheduler,
    namespace: str,
    name: str,
    *,
    uids: set[str],
    eventually: Callable[..., Any],
) -> None:
    """Wait until every Pod of the gang (the same Pods, ``uids``) is bound, then check that the scheduler
    bound them within a second of each other. Volcano records its events through the core API, whose times
    are whole seconds: there it means in the same second or the next."""

    def all_bound() -> list[Any]:
        pods = gang_pods(e2e_cluster, namespace, name)
        assert {p.metadata.uid for p in pods} == uids, "a Pod of the gang was replaced"
        assert all(kind_gang.bound(p) for p in pods), [(p.metadata.name, p.spec.node_name) for p in pods]
        return pods

    pods = eventually(all_bound, timeout=DECIDED_TIMEOUT, interval=0.5)

    def scheduled_times() -> list[datetime.datetime]:
        times = []
        for pod in pods:
            said = [
                r
                for r in kind_gang.reports(e2e_cluster, namespace, pod.metadata.name)
                if r.reason == "Scheduled"
            ]
            assert len(said) == 1 and said[0].reporting_controller == gang.scheduler_name, (
                pod.metadata.name,
                said,
            )
            times.append(said[0].time)
        return times

    scheduled = eventually(scheduled_times, timeout=30.0, interval=0.5)
    spread = (max(scheduled) - min(scheduled)).total_seconds()
    assert spread <= 1.0, f"the gang's Pods were bound {spread:.3f} s apart: {scheduled}"
    print(f"{gang.policy}: the gang's Pods bound {spread * 1000:.0f} ms apart")


def wait_completed(
    e2e_cluster: Any, gang: GangScheduler, namespace: str, name: str, eventually: Callable[..., Any]
) -> None:
    """Wait until the TrainJob Completes and its PodGroup reaches the scheduler's finished phase."""
    logs: dict[str, str] = {}
    condition = wait_finished(e2e_cluster, namespace, name, eventually, logs)
    assert condition["type"] == "Complete", (condition, logs)

    def pod_group_finished() -> None:
        phase = pod_group_phase(e2e_cluster, gang, namespace, name)
        assert phase == gang.finished_phase, (
            f"PodGroup {namespace}/{name} is {phase!r}, not {gang.finished_phase}"
        )

    eventually(pod_group_finished, timeout=60.0)


def test_kind_gang_that_cannot_fit_is_held_whole_then_starts_together_and_completes(
    e2e_cluster: Any, namespace: str, gang: GangScheduler, workload_image: str, eventually: Callable[..., Any]
) -> None:
    # Room for exactly one Pod of the gang: blockers leave one and a half Pods' CPU on the node with the
    # most, half a Pod's on every other (a Pod is a quarter of the least free node's CPU).
    kind_gang.wait_settled(e2e_cluster, eventually)
    rooms = kind_gang.free_cpu(e2e_cluster)
    pod_cpu = min(r.free_cpu_millis for r in rooms) // 4
    assert pod_cpu >= MIN_POD_CPU, f"the nodes have too little free CPU for this test: {rooms}"
    widest = max(rooms, key=lambda r: r.free_cpu_millis)
    for index, room in enumerate(rooms):
        leave = pod_cpu * 3 // 2 if room is widest else pod_cpu // 2
        blocker = kind_gang.blocker_pod(
            f"blocker-{index}", room.node, room.free_cpu_millis - leave, workload_image
        )
        e2e_cluster.core.create_namespaced_pod(namespace, blocker)

    def blockers_running() -> None:
        pods = e2e_cluster.core.list_namespaced_pod(
            namespace, label_selector=f"{kind_gang.BLOCKER_LABEL}=true"
        ).items
        assert len(pods) == len(rooms) and all(p.status.phase == "Running" for p in pods), [
            (p.metadata.name, p.status.phase) for p in pods
        ]

    eventually(blockers_running, timeout=120.0, interval=0.5)
    held = kind_gang.free_cpu(e2e_cluster)
    assert sum(r.free_cpu_millis // pod_cpu for r in held) == 1, (pod_cpu, held)

    name = pod_group_name("held", namespace)
    create(
        e2e_cluster,
        namespace,
        gang_runtime("gang", workload_image, gang=gang, cpu_millis=pod_cpu),
    )
    create(e2e_cluster, namespace, trainjob(name, "gang", num_nodes=2))

    # The window: until the scheduler has reported on every Pod (bound, or tried and not bound) and holds
    # the whole gang (gang.holds). No Pod may be bound by then.
    start = time.monotonic()

    def decided() -> list[Any]:
        pods = gang_pods(e2e_cluster, namespace, name)
        assert len(pods) == 2, [p.metadata.name for p in pods]
        assert all(kind_gang.bound(p) or kind_gang.unschedulable(p, gang.waiting_reasons) for p in pods), [
            (p.metadata.name, p.status.conditions) for p in pods
        ]
        pod_group = read_pod_group(e2e_cluster, gang, namespace, name)
        assert gang.holds(pod_group), pod_group.get("status")
        return pods

    pods = eventually(decided, timeout=DECIDED_TIMEOUT, interval=0.5)
    held_for = time.monotonic() - start
    uids = {p.metadata.uid for p in pods}
    assert_none_bound(e2e_cluster, namespace, name, uids, "though both Pods never fitted together")
    pod_group = read_pod_group(e2e_cluster, gang, namespace, name)
    spec = pod_group["spec"]
    assert spec["minMember"] == 2
    assert kind_gang.cpu_millis(spec["minResources"]["cpu"]) == 2 * pod_cpu, spec
    extras = {k: v for k, v in spec.items() if k not in {"minMember", "minResources"}}
    assert extras == gang.spec_extras(), spec
    for pod in pods:
        said = kind_gang.reports(e2e_cluster, namespace, pod.metadata.name)
        assert said and all(r.reporting_controller == gang.scheduler_name for r in said), (
            pod.metadata.name,
            said,
        )
        assert all(r.reason == "FailedScheduling" for r in said), said
    # Still none bound after those reads: the window ends here.
    assert_none_bound(e2e_cluster, namespace, name, uids, "though both Pods never fitted together")
    reasons = sorted({c.reason for p in pods for c in p.status.conditions or [] if c.type == "PodScheduled"})
    phase = pod_group.get("status", {}).get("phase")
    print(f"{gang.policy}: held (PodGroup {phase}), none bound ({reasons}), {held_for:.1f} s after creation")

    # Release: the blockers go, and the whole gang is bound at once. The Coscheduling plugin has the
    # scheduler retry the Pods it rejected when a Pod is created or a PodGroup changes (its
    # EventsToRegister), not when one is deleted: a gang that its minResources check refused (always so on
    # one node) is otherwise retried only by the queue's flush of unschedulable Pods, every 5 minutes. In a
    # cluster, Pods are created all the time; here one Pod of another workload is, once the blockers are gone.
    # (Volcano retries every scheduling period and needs no such event.)
    e2e_cluster.core.delete_collection_namespaced_pod(
        namespace, label_selector=f"{kind_gang.BLOCKER_LABEL}=true", grace_period_seconds=0
    )

    def blockers_gone() -> None:
        pods = e2e_cluster.core.list_namespaced_pod(
            namespace, label_selector=f"{kind_gang.BLOCKER_LABEL}=true"
        ).items
        assert not pods, [p.metadata.name for p in pods]

    eventually(blockers_gone, timeout=120.0, interval=0.5)
    e2e_cluster.core.create_namespaced_pod(
        namespace, kind_gang.passing_pod("another-workload", workload_image)
    )
    wait_bound_together(e2e_cluster, gang, namespace, name, uids=uids, eventually=eventually)
    wait_completed(e2e_cluster, gang, namespace, name, eventually)


def test_kind_gang_members_are_rejected_together_after_schedule_timeout_seconds(
    e2e_cluster: Any,
    namespace: str,
    coscheduling: GangScheduler,
    workload_image: str,
    eventually: Callable[..., Any],
) -> None:
    timeout = 5
    name = pod_group_name("stalled", namespace)
    create(
        e2e_cluster,
        namespace,
        gang_runtime("stall", workload_image, gang=coscheduling, schedule_timeout=timeout, straggler=True),
    )
    create(e2e_cluster, namespace, trainjob(name, "stall", num_nodes=2))
    # What the scheduler says of a member rejected at its own timeout, and of one that Unreserve rejected
    # with it (k8s.io/kubernetes pkg/scheduler/framework/runtime/waiting_pods_map.go; coscheduling.go).
    expired = f"rejected due to timeout after waiting {timeout}s at plugin Coscheduling"
    with_it = "rejection in Unreserve"

    def group_rejections(reports: list[kind_gang.Report]) -> list[kind_gang.Report]:
        return [r for r in reports if "rejected due to timeout after waiting" in r.note or with_it in r.note]

    def rejected() -> tuple[list[Any], dict[str, list[kind_gang.Report]]]:
        nodes = gang_pods(e2e_cluster, namespace, name, constants.NODE)
        assert len(nodes) == 2, [p.metadata.name for p in nodes]
        said = {p.metadata.name: kind_gang.reports(e2e_cluster, namespace, p.metadata.name) for p in nodes}
        assert all(group_rejections(r) for r in said.values()), (
            f"not every waiting member was rejected: {said}"
        )
        notes = sorted({r.note for reports in said.values() for r in group_rejections(reports)})
        assert any(expired in note for note in notes), (
            f"not rejected after the PodGroup's {timeout} s: {notes}"
        )
        return nodes, said

    nodes, said = eventually(rejected, timeout=DECIDED_TIMEOUT, interval=0.5)
    everyone = gang_pods(e2e_cluster, namespace, name)
    assert len(everyone) == 3, [p.metadata.name for p in everyone]
    assert not [p.metadata.name for p in everyone if kind_gang.bound(p)], (
        "a member of the stalled gang was bound"
    )
    for pod in nodes:
        reports = said[pod.metadata.name]
        assert all(
            r.reason == "FailedScheduling" and r.reporting_controller == coscheduling.scheduler_name
            for r in reports
        ), reports
        # Rejected after waiting: no earlier than the timeout after the Pod existed (seconds resolution).
        waited = (group_rejections(reports)[0].time - pod.metadata.creation_timestamp).total_seconds()
        assert waited >= timeout - 1, (pod.metadata.name, waited, reports)
    straggler = [p for p in everyone if p.metadata.labels.get(REPLICATED_JOB_LABEL) == "straggler"]
    assert len(straggler) == 1 and not kind_gang.reports(e2e_cluster, namespace, straggler[0].metadata.name)
    pod_group = read_pod_group(e2e_cluster, coscheduling, namespace, name)
    assert pod_group["spec"]["minMember"] == 3
    assert pod_group["spec"]["scheduleTimeoutSeconds"] == timeout
    assert pod_group["status"]["phase"] == "Scheduling", pod_group["status"]
    notes = sorted({r.note for reports in said.values() for r in reports})
    print(f"gang members rejected after {timeout} s: {notes}")


def test_kind_volcano_gang_waits_in_its_queue_until_the_queue_holds_its_min_resources(
    e2e_cluster: Any,
    namespace: str,
    volcano: GangScheduler,
    workload_image: str,
    eventually: Callable[..., Any],
) -> None:
    pod_cpu = 10
    name = pod_group_name("queued", namespace)
    queue = name
    group, version, plural = VOLCANO_QUEUES
    # A Queue is cluster-scoped: one per test namespace, removed at the end. Its capability is one
    # millicore short of the gang's CPU: one Pod would fit in it, the gang does not.
    e2e_cluster.custom.create_cluster_custom_object(
        group,
        version,
        plural,
        {
            "apiVersion": f"{group}/{version}",
            "kind": "Queue",
            "metadata": {"name": queue},
            "spec": {"weight": 1, "reclaimable": False, "capability": {"cpu": f"{2 * pod_cpu - 1}m"}},
        },
    )
    try:
        create(
            e2e_cluster,
            namespace,
            gang_runtime("queued", workload_image, gang=volcano, cpu_millis=pod_cpu, queue=queue),
        )
        create(e2e_cluster, namespace, trainjob(name, "queued", num_nodes=2))

        # The window: until the scheduler has said that the queue cannot take the gang's minResources.
        insufficient = "queue resource quota insufficient"

        def refused() -> list[Any]:
            pods = gang_pods(e2e_cluster, namespace, name)
            assert len(pods) == 2, [p.metadata.name for p in pods]
            started = [(p.metadata.name, p.spec.node_name) for p in pods if kind_gang.bound(p)]
            if started:  # a bound Pod stays bound: no use waiting
                written = read_pod_group(e2e_cluster, volcano, namespace, name)["spec"].get("queue")
                pytest.fail(
                    f"the gang started, {started}, though queue {queue} cannot hold it (its PodGroup's "
                    f"queue: {written!r})",
                    pytrace=False,
                )
            said = kind_gang.reports(
                e2e_cluster, namespace, name, kind="PodGroup", reasons=frozenset({"Unschedulable"})
            )
            assert any(insufficient in r.note for r in said), (
                f"Volcano has not said {insufficient!r} of PodGroup {name}: {[r.note for r in said]}"
            )
            return pods

        pods = eventually(refused, timeout=DECIDED_TIMEOUT, interval=0.5)
        pod_group = read_pod_group(e2e_cluster, volcano, namespace, name)
        assert pod_group["spec"]["queue"] == queue, pod_group["spec"]
        assert pod_group["spec"]["minMember"] == 2
        assert kind_gang.cpu_millis(pod_group["spec"]["minResources"]["cpu"]) == 2 * pod_cpu, pod_group[
            "spec"
        ]
        assert "scheduleTimeoutSeconds" not in pod_group["spec"], pod_group["spec"]
        assert pod_group.get("status", {}).get("phase") == "Pending", pod_group.get("status")
        uids = {p.metadata.uid for p in pods}
        assert_none_bound(e2e_cluster, namespace, name, uids, "though its queue cannot hold the gang")
        print(f"volcano: the gang waits in queue {queue} ({2 * pod_cpu - 1}m): {insufficient}")

        # The queue grows to the gang's minResources: the gang is enqueued and bound whole.
        e2e_cluster.custom.patch_cluster_custom_object(
            group, version, plural, queue, {"spec": {"capability": {"cpu": f"{2 * pod_cpu}m"}}}
        )
        wait_bound_together(e2e_cluster, volcano, namespace, name, uids=uids, eventually=eventually)
        wait_completed(e2e_cluster, volcano, namespace, name, eventually)
    finally:
        e2e_cluster.custom.delete_cluster_custom_object(group, version, plural, queue)
