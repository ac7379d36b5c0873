"""What the kind tier's tests share about TrainJobs on real Pods: the kind-only skip, creating a TrainJob or a
TrainingRuntime in a test's namespace, waiting for its final condition, and the logs of its Pods, read as soon
as each Pod's containers end (a failed JobSet's Pods may be gone by the time the TrainJob says Failed).

The ``e2e_cluster`` argument is the session fixture of ``test/e2e/conftest.py`` (``flavour``, ``custom``
and ``core`` API clients); ``eventually`` is its fixture of the same name (retries on ``AssertionError``
until a deadline, then fails naming what was awaited).
"""

from __future__ import annotations

from collections.abc import Callable
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


def skip_unless_kind(e2e_cluster: Any, needs: str) -> None:
    """Skip the calling test (or module, from a module fixture) unless the suite runs on kind."""
    if e2e_cluster.flavour != "kind":
        pytest.skip(f"kind only: {needs} (hack/e2e-setup-kind.sh)")


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


def wait_finished(
    e2e_cluster: Any,
    namespace: str,
    name: str,
    eventually: Callable[..., Any],
    logs: dict[str, str] | None = None,
    *,
    replicated_job: str | None = None,
    timeout: float = TIMEOUT,
) -> dict[str, Any]:
    """The TrainJob's final condition (Complete or Failed); ``logs``, when given, gets the log of each of its
    Pods (of ``replicated_job`` only, if given) as soon as the Pod ended."""

    def finished() -> dict[str, Any]:
        if logs is not None:  # logs first: when the TrainJob has finished, every Pod has ended and been read
            read_ended_logs(e2e_cluster, namespace, name, logs, replicated_job=replicated_job)
        condition = final_condition(e2e_cluster, namespace, name)
        assert condition is not None, f"TrainJob {namespace}/{name} has not finished"
        return condition

    result: dict[str, Any] = eventually(finished, timeout=timeout, interval=0.5)
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
