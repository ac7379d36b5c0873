"""Gang scheduling on real Pods: scheduler-plugins' Coscheduling plugin acting on the PodGroups that the
CoScheduling runtime plugin writes. kind only (``hack/e2e-setup-kind.sh``).

``hack/e2e-setup-kind.sh`` installs scheduler-plugins as a second scheduler, from its Go module's Helm chart
with the images built here; the ``gang_scheduler`` fixture reads the scheduler's name and checks that its
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
- **scheduleTimeoutSeconds.** As the PodGroup API documents it (``ScheduleTimeoutSeconds defines the maximal
  time of members/tasks to wait before run the pod group``) and the Coscheduling plugin implements it
  (``Permit`` waits that long, from the PodGroup, for the rest of the gang; a member that times out is
  rejected and ``Unreserve`` rejects every other waiting member, which go back to the scheduling queue,
  unbound): a gang with a member that this scheduler never attempts (it names a scheduler that does not
  run) has its two other members wait ``scheduleTimeoutSeconds`` (5, not the chart's
  ``permitWaitingTimeSeconds`` of 10), then both are rejected, none bound; the PodGroup stays Scheduling.
  (The chart leaves ``podGroupBackoffSeconds`` at 0, so no group back-off follows the rejection.)
"""

from __future__ import annotations

import datetime
import os
import time
from collections.abc import Callable
from typing import Any

import kubernetes
import pytest
import yaml

from runtime.api import constants
from support import allreduce_runtime as allreduce
from support import kind_gang as gang
from support.kind_jobs import JOBSET_NAME_LABEL, REPLICATED_JOB_LABEL, create, trainjob, wait_finished

SCHEDULER_NAMESPACE = "scheduler-plugins"
"""Where hack/e2e-setup-kind.sh installs scheduler-plugins' chart."""
SCHEDULER_CONFIG = "scheduler-config"
"""The chart's ConfigMap: the KubeSchedulerConfiguration of its scheduler."""
SCHEDULER_DEPLOYMENT = "scheduler-plugins-scheduler"
NO_SCHEDULER = "no-such-scheduler"
"""A schedulerName that no scheduler serves: its Pods are never attempted."""
MIN_POD_CPU = 20
"""Millicores: below this, the nodes are too full for the held-whole test to mean anything."""
POD_GROUPS = ("scheduling.x-k8s.io", "v1alpha1", "podgroups")
DECIDED_TIMEOUT = 120.0
"""Seconds for a scheduler to report on every Pod of a gang (Pods exist seconds after the TrainJob)."""


@pytest.fixture(scope="module")
def gang_scheduler(e2e_cluster: Any) -> str:
    """The name of scheduler-plugins' scheduler, whose profile enables Coscheduling; skips off kind."""
    if e2e_cluster.flavour != "kind":
        pytest.skip("kind only: real Pods and scheduler-plugins' scheduler (hack/e2e-setup-kind.sh)")
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
    return str(profile["schedulerName"])


@pytest.fixture(scope="module")
def workload_image(gang_scheduler: str) -> str:
    image = os.environ.get("WORKLOAD_IMAGE", "")
    if not image:
        pytest.fail("WORKLOAD_IMAGE is not set (hack/e2e-setup-kind.sh exports it)", pytrace=False)
    return image


def gang_runtime(
    name: str,
    image: str,
    *,
    scheduler: str,
    cpu_millis: int = 10,
    schedule_timeout: int | None = None,
    straggler: bool = False,
) -> dict[str, Any]:
    """The all-reduce TrainingRuntime, gang-scheduled by ``scheduler``, each node requesting ``cpu_millis``;
    with ``straggler``, one more replicated job whose one Pod names a scheduler that does not run."""
    runtime = allreduce.allreduce_runtime(name, image, command=["python3", "allreduce.py"])
    spec = runtime["spec"]
    policy = {} if schedule_timeout is None else {"scheduleTimeoutSeconds": schedule_timeout}
    spec["podGroupPolicy"] = {"coscheduling": policy}
    jobs = spec["template"]["spec"]["replicatedJobs"]
    pod_spec = jobs[0]["template"]["spec"]["template"]["spec"]
    pod_spec["schedulerName"] = scheduler
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


def read_pod_group(e2e_cluster: Any, namespace: str, name: str) -> dict[str, Any]:
    group, version, plural = POD_GROUPS
    return dict(e2e_cluster.custom.get_namespaced_custom_object(group, version, namespace, plural, name))


def pod_group_phase(e2e_cluster: Any, namespace: str, name: str) -> str:
    return str(read_pod_group(e2e_cluster, namespace, name).get("status", {}).get("phase", ""))


def test_kind_gang_that_cannot_fit_is_held_whole_then_starts_together_and_completes(
    e2e_cluster: Any, namespace: str, gang_scheduler: str, workload_image: str, eventually: Callable[..., Any]
) -> None:
    # Room for exactly one Pod of the gang: blockers leave one and a half Pods' CPU on the node with the
    # most, half a Pod's on every other (a Pod is a quarter of the least free node's CPU).
    gang.wait_settled(e2e_cluster, eventually)
    rooms = gang.free_cpu(e2e_cluster)
    pod_cpu = min(r.free_cpu_millis for r in rooms) // 4
    assert pod_cpu >= MIN_POD_CPU, f"the nodes have too little free CPU for this test: {rooms}"
    widest = max(rooms, key=lambda r: r.free_cpu_millis)
    for index, room in enumerate(rooms):
        leave = pod_cpu * 3 // 2 if room is widest else pod_cpu // 2
        blocker = gang.blocker_pod(
            f"blocker-{index}", room.node, room.free_cpu_millis - leave, workload_image
        )
        e2e_cluster.core.create_namespaced_pod(namespace, blocker)

    def blockers_running() -> None:
        pods = e2e_cluster.core.list_namespaced_pod(
            namespace, label_selector=f"{gang.BLOCKER_LABEL}=true"
        ).items
        assert len(pods) == len(rooms) and all(p.status.phase == "Running" for p in pods), [
            (p.metadata.name, p.status.phase) for p in pods
        ]

    eventually(blockers_running, timeout=120.0, interval=0.5)
    held = gang.free_cpu(e2e_cluster)
    assert sum(r.free_cpu_millis // pod_cpu for r in held) == 1, (pod_cpu, held)

    name = pod_group_name("held", namespace)
    create(
        e2e_cluster,
        namespace,
        gang_runtime("gang", workload_image, scheduler=gang_scheduler, cpu_millis=pod_cpu),
    )
    create(e2e_cluster, namespace, trainjob(name, "gang", num_nodes=2))

    # The window: until the scheduler has reported on every Pod (bound, or Unschedulable) and the PodGroup
    # controller has seen the whole gang. No Pod may be bound by then.
    start = time.monotonic()

    def decided() -> list[Any]:
        pods = gang_pods(e2e_cluster, namespace, name)
        assert len(pods) == 2, [p.metadata.name for p in pods]
        assert all(gang.bound(p) or gang.unschedulable(p) for p in pods), [
            (p.metadata.name, p.status.conditions) for p in pods
        ]
        assert pod_group_phase(e2e_cluster, namespace, name) == "Scheduling"
        return pods

    pods = eventually(decided, timeout=DECIDED_TIMEOUT, interval=0.5)
    held_for = time.monotonic() - start
    started = [(p.metadata.name, p.spec.node_name) for p in pods if gang.bound(p)]
    assert not started, f"the gang started in part, {started}, though both Pods never fitted together"
    pod_group = read_pod_group(e2e_cluster, namespace, name)
    assert pod_group["spec"]["minMember"] == 2
    assert gang.cpu_millis(pod_group["spec"]["minResources"]["cpu"]) == 2 * pod_cpu, pod_group["spec"]
    assert pod_group["spec"]["scheduleTimeoutSeconds"] == constants.DEFAULT_SCHEDULE_TIMEOUT_SECONDS
    for pod in pods:
        said = gang.reports(e2e_cluster, namespace, pod.metadata.name)
        assert said and all(r.reporting_controller == gang_scheduler for r in said), (pod.metadata.name, said)
        assert all(r.reason == "FailedScheduling" for r in said), said
    uids = {p.metadata.uid for p in pods}
    # Still none bound after those reads: the window ends here.
    again = gang_pods(e2e_cluster, namespace, name)
    assert {p.metadata.uid for p in again} == uids and not [p for p in again if gang.bound(p)], again
    print(f"gang held: both Pods Unschedulable, none bound, {held_for:.1f} s after the TrainJob was created")

    # Release: the blockers go, and the whole gang is bound at once. The Coscheduling plugin has the
    # scheduler retry the Pods it rejected when a Pod is created or a PodGroup changes (its
    # EventsToRegister), not when one is deleted: a gang that its minResources check refused (always so on
    # one node) is otherwise retried only by the queue's flush of unschedulable Pods, every 5 minutes. In a
    # cluster, Pods are created all the time; here one Pod of another workload is, once the blockers are gone.
    e2e_cluster.core.delete_collection_namespaced_pod(
        namespace, label_selector=f"{gang.BLOCKER_LABEL}=true", grace_period_seconds=0
    )

    def blockers_gone() -> None:
        pods = e2e_cluster.core.list_namespaced_pod(
            namespace, label_selector=f"{gang.BLOCKER_LABEL}=true"
        ).items
        assert not pods, [p.metadata.name for p in pods]

    eventually(blockers_gone, timeout=120.0, interval=0.5)
    e2e_cluster.core.create_namespaced_pod(namespace, gang.passing_pod("another-workload", workload_image))

    def all_bound() -> list[Any]:
        pods = gang_pods(e2e_cluster, namespace, name)
        assert {p.metadata.uid for p in pods} == uids, "a Pod of the gang was replaced"
        assert all(gang.bound(p) for p in pods), [(p.metadata.name, p.spec.node_name) for p in pods]
        return pods

    pods = eventually(all_bound, timeout=DECIDED_TIMEOUT, interval=0.5)

    def scheduled_times() -> list[datetime.datetime]:
        times = []
        for pod in pods:
            said = [
                r for r in gang.reports(e2e_cluster, namespace, pod.metadata.name) if r.reason == "Scheduled"
            ]
            assert len(said) == 1 and said[0].reporting_controller == gang_scheduler, (
                pod.metadata.name,
                said,
            )
            times.append(said[0].time)
        return times

    scheduled = eventually(scheduled_times, timeout=30.0, interval=0.5)
    spread = (max(scheduled) - min(scheduled)).total_seconds()
    assert spread <= 1.0, f"the gang's Pods were bound {spread:.3f} s apart: {scheduled}"
    print(f"gang released: both Pods bound {spread * 1000:.0f} ms apart")

    logs: dict[str, str] = {}
    condition = wait_finished(e2e_cluster, namespace, name, eventually, logs)
    assert condition["type"] == "Complete", (condition, logs)

    def pod_group_finished() -> None:
        phase = pod_group_phase(e2e_cluster, namespace, name)
        assert phase == "Finished", f"PodGroup {namespace}/{name} is {phase!r}, not Finished"

    eventually(pod_group_finished, timeout=60.0)


def test_kind_gang_members_are_rejected_together_after_schedule_timeout_seconds(
    e2e_cluster: Any, namespace: str, gang_scheduler: str, workload_image: str, eventually: Callable[..., Any]
) -> None:
    timeout = 5
    name = pod_group_name("stalled", namespace)
    create(
        e2e_cluster,
        namespace,
        gang_runtime(
            "stall", workload_image, scheduler=gang_scheduler, schedule_timeout=timeout, straggler=True
        ),
    )
    create(e2e_cluster, namespace, trainjob(name, "stall", num_nodes=2))
    # What the scheduler says of a member rejected at its own timeout, and of one that Unreserve rejected
    # with it (k8s.io/kubernetes pkg/scheduler/framework/runtime/waiting_pods_map.go; coscheduling.go).
    expired = f"rejected due to timeout after waiting {timeout}s at plugin Coscheduling"
    with_it = "rejection in Unreserve"

    def group_rejections(reports: list[gang.Report]) -> list[gang.Report]:
        return [r for r in reports if "rejected due to timeout after waiting" in r.note or with_it in r.note]

    def rejected() -> tuple[list[Any], dict[str, list[gang.Report]]]:
        nodes = gang_pods(e2e_cluster, namespace, name, constants.NODE)
        assert len(nodes) == 2, [p.metadata.name for p in nodes]
        said = {p.metadata.name: gang.reports(e2e_cluster, namespace, p.metadata.name) for p in nodes}
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
    assert not [p.metadata.name for p in everyone if gang.bound(p)], "a member of the stalled gang was bound"
    for pod in nodes:
        reports = said[pod.metadata.name]
        assert all(
            r.reason == "FailedScheduling" and r.reporting_controller == gang_scheduler for r in reports
        ), reports
        # Rejected after waiting: no earlier than the timeout after the Pod existed (seconds resolution).
        waited = (group_rejections(reports)[0].time - pod.metadata.creation_timestamp).total_seconds()
        assert waited >= timeout - 1, (pod.metadata.name, waited, reports)
    straggler = [p for p in everyone if p.metadata.labels.get(REPLICATED_JOB_LABEL) == "straggler"]
    assert len(straggler) == 1 and not gang.reports(e2e_cluster, namespace, straggler[0].metadata.name)
    pod_group = read_pod_group(e2e_cluster, namespace, name)
    assert pod_group["spec"]["minMember"] == 3
    assert pod_group["spec"]["scheduleTimeoutSeconds"] == timeout
    assert pod_group["status"]["phase"] == "Scheduling", pod_group["status"]
    notes = sorted({r.note for reports in said.values() for r in reports})
    print(f"gang members rejected after {timeout} s: {notes}")
