"""What the kind tier's tests share about TrainJobs on real Pods: the kind-only skip, creating a TrainJob or a
TrainingRuntime in a test's namespace, waiting for its final condition, and the logs of its Pods, read as soon
as each Pod's containers end (a failed JobSet's Pods may be gone by the time the TrainJob says Failed).

The kind cluster has a control plane, tainted, and at least two workers (``hack/e2e-setup-kind.sh``). A
test that shows Pods of one TrainJob meeting over the network spreads them over the workers
(``spread_over_nodes`` on a runtime it creates, ``one_pod_per_node`` on a TrainJob of a shipped runtime)
and checks that they ran on two nodes at least (``assert_on_distinct_nodes`` on the nodes that
``wait_finished`` recorded), so that what it shows went
through the Pod network between nodes, not through one node's bridge.

The ``e2e_cluster`` argument is the session fixture of ``test/e2e/conftest.py`` (``flavour``, ``custom``
and ``core`` API clients); ``eventually`` is its fixture of the same name (retries on ``AssertionError``
until a deadline, then fails naming what was awaited).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import kubernetes
import pytest
from kubernetes.stream import stream

from runtime.api import constants

JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
REPLICATED_JOB_LABEL = "jobset.sigs.k8s.io/replicatedjob-name"
TIMEOUT = 240.0
"""Seconds a TrainJob on real Pods gets to finish: Pods start in seconds with their image on the node."""
REMOVED_CONTAINER_LOG = "unable to retrieve container logs for "
"""How the kubelet answers (200 OK) a log read of a container the runtime already removed."""
IMAGE_NOT_THERE = frozenset({"ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName"})
"""Waiting reasons of a container whose image is not on the node: images are loaded into kind, never
pulled, so waiting longer cannot help."""
PLURALS = {constants.TRAINING_RUNTIME_KIND: "trainingruntimes", constants.TRAINJOB_KIND: "trainjobs"}
HOSTNAME_KEY = "kubernetes.io/hostname"
CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
SPREAD_PATCH_MANAGER = "e2e.trainer.kubeflow.org/spread"
"""The ``spec.runtimePatches[].manager`` of ``one_pod_per_node``'s entry."""


def skip_unless_kind(e2e_cluster: Any, needs: str) -> None:
    """Skip the calling test (or module, from a module fixture) unless the suite runs on kind."""
    if e2e_cluster.flavour != "kind":
        pytest.skip(f"kind only: {needs} (hack/e2e-setup-kind.sh)")


def workload_image() -> str:
    """The image of ``test/e2e/workload`` (Debian's Python and the workload's scripts) that
    ``hack/e2e-setup-kind.sh`` exports as ``WORKLOAD_IMAGE``; fails the calling test without it."""
    image = os.environ.get("WORKLOAD_IMAGE", "")
    if not image:
        pytest.fail("WORKLOAD_IMAGE is not set (hack/e2e-setup-kind.sh exports it)", pytrace=False)
    return image


def trainjob(name: str, runtime: str, *, num_nodes: int) -> dict[str, Any]:
    """A TrainJob of ``num_nodes`` nodes on the TrainingRuntime ``runtime`` of its namespace."""
    return {
        "apiVersion": f"{constants.GROUP}/{constants.VERSION}",
        "kind": constants.TRAINJOB_KIND,
        "metadata": {"name": name},
        "spec": {
            "runtimeRef": {"name": runtime, "kind": constants.TRAINING_RUNTIME_KIND},
            "trainer": {"numNodes": num_nodes},
        },
    }


def create(e2e_cluster: Any, namespace: str, body: dict[str, Any]) -> None:
    """Create a TrainJob or a TrainingRuntime in ``namespace``."""
    e2e_cluster.custom.create_namespaced_custom_object(
        constants.GROUP, constants.VERSION, namespace, PLURALS[body["kind"]], body
    )


def final_condition(e2e_cluster: Any, namespace: str, name: str) -> dict[str, Any] | None:
    """The TrainJob's Complete or Failed condition once it is true, else None."""
    stored = e2e_cluster.custom.get_namespaced_custom_object(
        constants.GROUP, constants.VERSION, namespace, "trainjobs", name
    )
    for condition in stored.get("status", {}).get("conditions", []):
        if condition["type"] in {"Complete", "Failed"} and condition["status"] == "True":
            return dict(condition)
    return None


def read_ended_logs(
    e2e_cluster: Any, namespace: str, name: str, logs: dict[str, str], *, replicated_job: str | None = None
) -> None:
    """Add to ``logs`` (Pod name → log) each Pod of the TrainJob's JobSet (of one replicated job if given)
    whose containers have all terminated and whose log is still there; a Pod already in ``logs`` is not read
    again (its container may be removed afterwards). Fails at once on a container whose image is not on
    the node."""
    core = e2e_cluster.core
    selector = f"{JOBSET_NAME_LABEL}={name}"
    if replicated_job is not None:
        selector += f",{REPLICATED_JOB_LABEL}={replicated_job}"
    for pod in core.list_namespaced_pod(namespace, label_selector=selector).items:
        statuses = pod.status.container_statuses or []
        for status in statuses:
            waiting = status.state.waiting
            if waiting is not None and waiting.reason in IMAGE_NOT_THERE:
                pytest.fail(
                    f"Pod {pod.metadata.name}: {waiting.reason} for {status.image}: build it with "
                    "hack/build-images.sh and load it into kind (hack/e2e-setup-kind.sh does both)",
                    pytrace=False,
                )
        if pod.metadata.name in logs or not statuses or any(s.state.terminated is None for s in statuses):
            continue
        try:
            text = str(core.read_namespaced_pod_log(pod.metadata.name, namespace))
        except kubernetes.client.ApiException as exc:
            if exc.status != 404:  # deleted between the list and the read
                raise
            continue
        if not text.startswith(REMOVED_CONTAINER_LOG):
            logs[pod.metadata.name] = text


def describe_pods(e2e_cluster: Any, namespace: str, name: str) -> str:
    """One line per Pod of TrainJob ``name``'s JobSet: its node, phase and restarts, and for a container
    that ended before (a restart in place), the exit code and last log line of that run: why a TrainJob
    that has not finished is stuck, in the failure's message."""
    core = e2e_cluster.core
    pods = core.list_namespaced_pod(namespace, label_selector=f"{JOBSET_NAME_LABEL}={name}").items
    if not pods:
        return "it has no Pods"
    lines = []
    for pod in sorted(pods, key=lambda p: p.metadata.name):
        line = f"{pod.metadata.name} on {pod.spec.node_name or '(no node)'}: {pod.status.phase}"
        for status in pod.status.container_statuses or []:
            line += f", {status.name} restarted {status.restart_count}"
            last = status.last_state.terminated if status.last_state else None
            if last is None:
                continue
            try:
                log = str(
                    core.read_namespaced_pod_log(
                        pod.metadata.name, namespace, container=status.name, previous=True
                    )
                )
            except kubernetes.client.ApiException:
                log = ""
            tail = log.strip().splitlines()[-1:] or [""]
            line += f" (last exit {last.exit_code}: {tail[0]!r})"
        lines.append(line)
    return "its Pods: " + "; ".join(lines)


def wait_finished(
    e2e_cluster: Any,
    namespace: str,
    name: str,
    eventually: Callable[..., Any],
    logs: dict[str, str] | None = None,
    *,
    replicated_job: str | None = None,
    nodes: dict[str, str] | None = None,
    timeout: float = TIMEOUT,
) -> dict[str, Any]:
    """The TrainJob's final condition (Complete or Failed); ``logs``, when given, gets the log of each of its
    Pods (of ``replicated_job`` only, if given) as soon as the Pod ended; ``nodes``, when given, gets the
    node of each of its Pods (all of them) as soon as the Pod is bound to one."""

    def finished() -> dict[str, Any]:
        if nodes is not None:
            record_nodes(e2e_cluster, namespace, name, nodes)
        if logs is not None:  # logs first: when the TrainJob has finished, every Pod has ended and been read
            read_ended_logs(e2e_cluster, namespace, name, logs, replicated_job=replicated_job)
        condition = final_condition(e2e_cluster, namespace, name)
        if condition is None:
            raise AssertionError(f"TrainJob {namespace}/{name} has not finished")
        return condition

    try:
        result: dict[str, Any] = eventually(finished, timeout=timeout, interval=0.5)
    except AssertionError as exc:
        raise AssertionError(
            f"{exc} within {timeout:.0f} s; {describe_pods(e2e_cluster, namespace, name)}"
        ) from None
    if logs is not None:  # a Pod that ended between the last read of logs and that of the condition
        read_ended_logs(e2e_cluster, namespace, name, logs, replicated_job=replicated_job)
    return result


HOLD_FILE = "/tmp/release"
HOLD_COMMAND = ("sh", "-c", f"trap 'exit 143' TERM; until [ -e {HOLD_FILE} ]; do sleep 0.2; done")
"""A trainer command that keeps its Pod Running until :func:`release` creates :data:`HOLD_FILE` in it (then
it exits 0); SIGTERM ends it at once, so a suspended or preempted TrainJob's Pods go without the grace
period."""


def running_pods(e2e_cluster: Any, namespace: str, name: str) -> list[Any]:
    """The TrainJob's Pods, once each is Running and none is being deleted (AssertionError until then)."""
    pods = e2e_cluster.core.list_namespaced_pod(namespace, label_selector=f"{JOBSET_NAME_LABEL}={name}").items
    assert pods, f"TrainJob {namespace}/{name} has no Pods yet"
    for pod in pods:
        assert pod.metadata.deletion_timestamp is None, f"Pod {pod.metadata.name} is being deleted"
        assert pod.status.phase == "Running", f"Pod {pod.metadata.name} is {pod.status.phase}"
    return list(pods)


def release(e2e_cluster: Any, namespace: str, pods: list[Any]) -> None:
    """Let Pods running :data:`HOLD_COMMAND` end: create :data:`HOLD_FILE` in each (``kubectl exec``)."""
    for pod in pods:
        stream(
            e2e_cluster.core.connect_get_namespaced_pod_exec,
            pod.metadata.name,
            namespace,
            command=["touch", HOLD_FILE],
            stderr=True,
            stdin=False,
            stdout=True,
            tty=False,
        )


def record_nodes(e2e_cluster: Any, namespace: str, name: str, nodes: dict[str, str]) -> None:
    """Add to ``nodes`` (Pod name → node) each Pod of TrainJob ``name``'s JobSet that is bound to a node:
    the Pods there are, and the scheduler's ``Scheduled`` Events of those already gone. Once a TrainJob is
    Complete, JobSet may delete the Pods still running (an MPI TrainJob completes with its launcher, and its
    node Pods, which only serve sshd, are deleted), and a test that waits for another TrainJob first may
    look only then; the Events stay (an hour by default). A gone Pod is told by its name, ``<JobSet>-
    <replicated job>-<job index>-<pod index>-<suffix>``, so no other TrainJob of the namespace may be named
    ``<name>-...``."""
    pods = e2e_cluster.core.list_namespaced_pod(namespace, label_selector=f"{JOBSET_NAME_LABEL}={name}").items
    nodes.update({pod.metadata.name: pod.spec.node_name for pod in pods if pod.spec.node_name})
    events = e2e_cluster.core.list_namespaced_event(
        namespace, field_selector="reason=Scheduled,involvedObject.kind=Pod"
    ).items
    pod_name = re.compile(rf"{re.escape(name)}-[a-z0-9-]+-\d+-\d+-[a-z0-9]+")
    for event in events:
        pod = event.involved_object.name or ""
        bound = _ASSIGNED.fullmatch(event.message or "")
        if pod_name.fullmatch(pod) and bound is not None and bound["pod"] == f"{namespace}/{pod}":
            nodes.setdefault(pod, bound["node"])


_ASSIGNED = re.compile(r"Successfully assigned (?P<pod>\S+) to (?P<node>\S+)")
"""kube-scheduler's message on a Pod's ``Scheduled`` Event (any scheduler built on its framework)."""


def spread_over_nodes(runtime: dict[str, Any]) -> dict[str, Any]:
    """``runtime`` (a TrainingRuntime body), its Pods spread over the nodes: every replicated job's Pod
    template gets a topology spread constraint over ``kubernetes.io/hostname`` with ``maxSkew`` 1 and
    ``DoNotSchedule``, among the Pods of the same JobSet: the selector takes every JobSet's Pods (they all
    carry the replicated job label), and ``matchLabelKeys`` narrows it to the Pod's own JobSet name, so one
    TrainJob's Pods, not those of another on the same runtime (a key may not be in both). Any number of
    Pods fits: three on two workers go two and one.

    ``nodeTaintsPolicy: Honor``: the scheduler counts only the nodes whose taints the Pod tolerates. With
    the default (Ignore) the tainted control plane would count as a node of zero Pods, so the second Pod on
    a worker would exceed the skew and stay Pending. Returns ``runtime``, changed in place."""
    constraint = {
        "maxSkew": 1,
        "topologyKey": HOSTNAME_KEY,
        "whenUnsatisfiable": "DoNotSchedule",
        "nodeTaintsPolicy": "Honor",
        "labelSelector": {"matchExpressions": [{"key": REPLICATED_JOB_LABEL, "operator": "Exists"}]},
        "matchLabelKeys": [JOBSET_NAME_LABEL],
    }
    for rjob in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        pod_spec = rjob["template"]["spec"]["template"].setdefault("spec", {})
        pod_spec.setdefault("topologySpreadConstraints", []).append(dict(constraint))
    return runtime


def one_pod_per_node(
    trainjob: dict[str, Any], replicated_jobs: Sequence[str] = (constants.NODE,)
) -> dict[str, Any]:
    """``trainjob`` (a TrainJob body on any runtime, a shipped ClusterTrainingRuntime among them) with a
    runtime patch (``SPREAD_PATCH_MANAGER``) that gives the Pods of ``replicated_jobs`` a required pod
    anti-affinity over ``kubernetes.io/hostname`` against every Pod of its JobSet: no two on one node. A
    TrainJob of more Pods than there are workers would stay Pending: use ``spread_over_nodes`` on its
    runtime instead. Returns ``trainjob``, changed in place."""
    name = trainjob["metadata"]["name"]
    affinity = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"topologyKey": HOSTNAME_KEY, "labelSelector": {"matchLabels": {JOBSET_NAME_LABEL: name}}}
            ]
        }
    }
    patches = [
        {"name": rjob, "template": {"spec": {"template": {"spec": {"affinity": affinity}}}}}
        for rjob in replicated_jobs
    ]
    trainjob["spec"].setdefault("runtimePatches", []).append(
        {
            "manager": SPREAD_PATCH_MANAGER,
            "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": patches}}},
        }
    )
    return trainjob


def assert_on_distinct_nodes(namespace: str, name: str, nodes: dict[str, str], *, at_least: int = 2) -> None:
    """Fails unless the Pods of TrainJob ``name`` ran on ``at_least`` distinct nodes; ``nodes`` (Pod name →
    node) is what ``wait_finished(..., nodes=nodes)`` recorded while the TrainJob ran."""
    distinct = set(nodes.values())
    assert len(distinct) >= at_least, (
        f"TrainJob {namespace}/{name}: its Pods ran on {len(distinct)} node(s), not on {at_least} at least "
        f"(Pod → node: {nodes}); the kind cluster must have two workers (hack/e2e-setup-kind.sh) and the "
        "test must spread the Pods (support.kind_jobs.spread_over_nodes or one_pod_per_node)"
    )


STAND_IN_COMMAND = ("true",)
"""What :func:`stand_in_containers` makes every container run: ``true`` exits 0 at once, whatever arguments
the runtime gives it (``sshd -De -f ...``, ``tune run ...``)."""
ADMISSION_GROUP, ADMISSION_VERSION = "admissionregistration.k8s.io", "v1"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"


@contextlib.contextmanager
def stand_in_containers(
    e2e_cluster: Any, namespace: str, image: str, eventually: Callable[..., Any]
) -> Iterator[None]:
    """While the context lasts, every container of every Pod created in ``namespace`` runs
    :data:`STAND_IN_COMMAND` from ``image`` (``imagePullPolicy: IfNotPresent``); nothing else of the Pod
    changes, its resources least of all.

    For a test that needs the Pods of a shipped runtime to exist and end, not to do their work: the
    runtimes' images are not in the kind cluster, an untagged one (``ghcr.io/kubeflow/trainer/...``)
    defaults to ``imagePullPolicy: Always``, which nothing here can serve, and their commands (``sshd``,
    ``tune run``) would not exit 0 on a stand-in image. The TrainJob, its runtime, the JobSet and the Jobs
    are left as they are: a MutatingAdmissionPolicy (admissionregistration.k8s.io/v1, on by default since
    Kubernetes 1.36) bound to the namespace rewrites the containers of each Pod as it is created. Entered
    once the API server applies it (a dry-run Pod comes back rewritten); the policy and its binding are
    deleted on exit."""
    name = f"stand-in-{namespace}"
    # A JSON patch: an apply configuration may not set an atomic list such as a container's command.
    rewrite = " + ".join(
        "object.spec.containers.transformList(i, c, JSONPatch{"
        f'op: "add", path: "/spec/containers/" + string(i) + "/{field}", value: {json.dumps(value)}}})'
        for field, value in (
            ("image", image),
            ("imagePullPolicy", "IfNotPresent"),
            ("command", list(STAND_IN_COMMAND)),
        )
    )
    policy = {
        "apiVersion": f"{ADMISSION_GROUP}/{ADMISSION_VERSION}",
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": name},
        "spec": {
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                    }
                ]
            },
            "failurePolicy": "Fail",
            "reinvocationPolicy": "Never",
            "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": rewrite}}],
        },
    }
    binding = {
        "apiVersion": f"{ADMISSION_GROUP}/{ADMISSION_VERSION}",
        "kind": "MutatingAdmissionPolicyBinding",
        "metadata": {"name": name},
        "spec": {
            "policyName": name,
            "matchResources": {"namespaceSelector": {"matchLabels": {NAMESPACE_NAME_LABEL: namespace}}},
        },
    }
    custom = e2e_cluster.custom
    plurals = ("mutatingadmissionpolicies", "mutatingadmissionpolicybindings")
    custom.create_cluster_custom_object(ADMISSION_GROUP, ADMISSION_VERSION, plurals[0], policy)
    try:
        custom.create_cluster_custom_object(ADMISSION_GROUP, ADMISSION_VERSION, plurals[1], binding)
        probe = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "stand-in-probe"},
            "spec": {"containers": [{"name": "probe", "image": "registry.invalid/probe:never-pulled"}]},
        }

        def rewritten() -> None:
            pod = e2e_cluster.core.create_namespaced_pod(namespace, probe, dry_run="All")
            (container,) = pod.spec.containers
            assert (container.image, tuple(container.command or ())) == (image, STAND_IN_COMMAND), (
                f"MutatingAdmissionPolicy {name} not applied yet: a dry-run Pod in {namespace} runs "
                f"{container.image} {container.command}"
            )

        eventually(rewritten, timeout=30, interval=0.25)
        yield
    finally:
        for plural in reversed(plurals):
            with contextlib.suppress(kubernetes.client.ApiException):
                custom.delete_cluster_custom_object(ADMISSION_GROUP, ADMISSION_VERSION, plural, name)


def worker_names(e2e_cluster: Any) -> list[str]:
    """The nodes without the control-plane role: the kind cluster's workers."""
    nodes = e2e_cluster.core.list_node().items
    return sorted(n.metadata.name for n in nodes if CONTROL_PLANE_LABEL not in (n.metadata.labels or {}))


@contextlib.contextmanager
def advertised_extended_resource(e2e_cluster: Any, resource: str, quantity: str) -> Iterator[list[str]]:
    """While the context lasts, every worker advertises ``quantity`` of the extended resource ``resource``
    (``nvidia.com/gpu``) in its status, capacity and allocatable, so that the scheduler places a Pod that
    requests it (the kubelet admits a Pod whose extended resource no device plugin manages). The documented
    way to advertise an extended resource ("Advertise Extended Resources for a Node"): a PATCH of the Node's
    status; the kubelet keeps a capacity it does not manage and derives allocatable from it. Yields the
    workers' names; removed from each on exit."""
    names = worker_names(e2e_cluster)
    patched = []
    try:
        for node in names:
            amount = {resource: quantity}
            e2e_cluster.core.patch_node_status(node, {"status": {"capacity": amount, "allocatable": amount}})
            patched.append(node)
        yield names
    finally:
        for node in patched:
            gone = {resource: None}
            e2e_cluster.core.patch_node_status(node, {"status": {"capacity": gone, "allocatable": gone}})
