"""Smoke tests for the Tier 2 cluster: JobSets run, finish, fail and are collected.

They hold on any cluster with JobSet installed. On the kwok cluster pods run nothing: the kwok stages in
hack/kwok/stages/ move them Running → Succeeded, or → Failed when the pod carries the fail label; on kind
the same pods run a tiny shell command instead, in the image built for the training Pods (``WORKLOAD_IMAGE``,
``hack/build-images.sh``: nothing is pulled; see ``pod_template``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

# Names the kwok stages read (hack/kwok/stages/*.yaml; docs/development.md, "Making a pod fail").
FAIL_LABEL = "pod-container-running-failed.stage.kwok.x-k8s.io"
EXIT_CODE_ANNOTATION = f"{FAIL_LABEL}/exit-code"
RUN_TIME_ANNOTATION = "pod-complete.stage.kwok.x-k8s.io/delay"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
KIND_IMAGE = os.environ.get("WORKLOAD_IMAGE", "trainer-e2e/allreduce:unset")

GROUP, VERSION, PLURAL = "jobset.x-k8s.io", "v1alpha2", "jobsets"


def pod_template(flavour: str, *, run_seconds: int = 1, exit_code: int = 0) -> dict[str, Any]:
    """A pod that runs for ``run_seconds`` and exits with ``exit_code``, on kwok or on kind."""
    resources = {"requests": {"cpu": "100m", "memory": "64Mi"}}
    if flavour != "kind":
        metadata: dict[str, Any] = {"annotations": {RUN_TIME_ANNOTATION: f"{run_seconds}s"}}
        if exit_code:
            metadata["labels"] = {FAIL_LABEL: "true"}
            metadata["annotations"] = {
                f"{FAIL_LABEL}/delay": f"{run_seconds}s",
                EXIT_CODE_ANNOTATION: str(exit_code),
            }
        container = {"name": "main", "image": "registry.invalid/never-pulled:latest", "resources": resources}
        return {"metadata": metadata, "spec": {"containers": [container]}}
    command = ["sh", "-c", f"sleep {run_seconds}; exit {exit_code}"]
    container = {"name": "main", "image": KIND_IMAGE, "command": command, "resources": resources}
    return {"metadata": {}, "spec": {"containers": [container]}}


def replicated_job(
    name: str, *, replicas: int, pods: int, template: dict[str, Any], backoff_limit: int = 0
) -> dict[str, Any]:
    spec = {"parallelism": pods, "completions": pods, "backoffLimit": backoff_limit, "template": template}
    return {"name": name, "replicas": replicas, "template": {"spec": spec}}


def jobset(name: str, namespace: str, *replicated_jobs: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicatedJobs": list(replicated_jobs)},
    }


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in obj.get("status", {}).get("conditions") or []:
        if c.get("type") == kind and c.get("status") == "True":
            return dict(c)
    return None


def get_jobset(cluster: Any, namespace: str, name: str) -> dict[str, Any]:
    return dict(cluster.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name))


def owned_by(cluster: Any, namespace: str, name: str) -> tuple[list[Any], list[Any]]:
    selector = f"{JOBSET_NAME_LABEL}={name}"
    jobs = cluster.batch.list_namespaced_job(namespace, label_selector=selector).items
    pods = cluster.core.list_namespaced_pod(namespace, label_selector=selector).items
    return jobs, pods


def test_a_jobset_with_two_replicated_jobs_is_scheduled_and_completes(
    e2e_cluster: Any, namespace: str, eventually: Callable[..., Any]
) -> None:
    template = pod_template(e2e_cluster.flavour)
    e2e_cluster.custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        jobset(
            "smoke",
            namespace,
            replicated_job("leader", replicas=1, pods=1, template=template),
            replicated_job("workers", replicas=2, pods=2, template=template),
        ),
    )

    def completed() -> dict[str, Any]:
        current = get_jobset(e2e_cluster, namespace, "smoke")
        assert condition(current, "Completed"), current.get("status")
        return current

    finished = eventually(completed, timeout=120)

    # JobSet's mutating webhook answered: these defaults exist only in the webhook, not in the CRD.
    assert finished["spec"]["successPolicy"]["operator"] == "All"
    assert finished["spec"]["replicatedJobs"][0]["template"]["spec"]["completionMode"] == "Indexed"
    jobs, pods = owned_by(e2e_cluster, namespace, "smoke")
    assert sorted(j.metadata.name for j in jobs) == ["smoke-leader-0", "smoke-workers-0", "smoke-workers-1"]
    assert all(j.status.succeeded == j.spec.completions for j in jobs)
    assert len(pods) == 1 + 2 * 2
    assert {p.status.phase for p in pods} == {"Succeeded"}
    nodes = {n.metadata.name: n for n in e2e_cluster.core.list_node().items}
    assert all(p.spec.node_name in nodes for p in pods), "every pod was bound to a node by the scheduler"
    if e2e_cluster.flavour == "kwok":
        assert all(
            nodes[p.spec.node_name].metadata.annotations.get("kwok.x-k8s.io/node") == "fake" for p in pods
        )


@pytest.mark.parametrize("propagation", ["Foreground", "Background"])
def test_deleting_a_running_jobset_garbage_collects_its_jobs_and_pods(
    e2e_cluster: Any, namespace: str, eventually: Callable[..., Any], propagation: str
) -> None:
    template = pod_template(e2e_cluster.flavour, run_seconds=3600)
    e2e_cluster.custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        jobset(
            "doomed",
            namespace,
            replicated_job("leader", replicas=1, pods=1, template=template),
            replicated_job("workers", replicas=2, pods=1, template=template),
        ),
    )

    def all_running() -> None:
        jobs, pods = owned_by(e2e_cluster, namespace, "doomed")
        assert len(jobs) == 3 and len(pods) == 3, (len(jobs), len(pods))
        assert {p.status.phase for p in pods} == {"Running"}

    eventually(all_running, timeout=120)
    e2e_cluster.custom.delete_namespaced_custom_object(
        GROUP, VERSION, namespace, PLURAL, "doomed", propagation_policy=propagation
    )

    def collected() -> None:
        with pytest.raises(ApiException) as gone:
            get_jobset(e2e_cluster, namespace, "doomed")
        assert gone.value.status == 404
        jobs, pods = owned_by(e2e_cluster, namespace, "doomed")
        assert not jobs and not pods, ([j.metadata.name for j in jobs], [p.metadata.name for p in pods])

    eventually(collected, timeout=120, retry_on=(AssertionError, pytest.fail.Exception))


def test_a_pod_marked_to_fail_fails_its_job_and_the_jobset(
    e2e_cluster: Any, namespace: str, eventually: Callable[..., Any]
) -> None:
    e2e_cluster.custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        jobset(
            "broken",
            namespace,
            replicated_job(
                "crash", replicas=1, pods=1, template=pod_template(e2e_cluster.flavour, exit_code=3)
            ),
        ),
    )

    def failed() -> dict[str, Any]:
        current = get_jobset(e2e_cluster, namespace, "broken")
        assert condition(current, "Failed"), current.get("status")
        return current

    finished = eventually(failed, timeout=120)

    assert condition(finished, "Completed") is None
    jobs, pods = owned_by(e2e_cluster, namespace, "broken")
    assert [j.metadata.name for j in jobs] == ["broken-crash-0"]
    assert any(c.type == "Failed" and c.status == "True" for c in jobs[0].status.conditions or [])
    if e2e_cluster.flavour == "kind":
        return  # a real Job's failed Pod may already be deleted with it; kwok keeps it (below)
    failed_pods = [p for p in pods if p.status.phase == "Failed"]
    assert failed_pods, [p.status.phase for p in pods]
    exit_codes = {s.state.terminated.exit_code for s in failed_pods[0].status.container_statuses}
    assert exit_codes == {3}


def test_labelling_one_running_pod_fails_that_pod_alone(
    e2e_cluster: Any, namespace: str, eventually: Callable[..., Any]
) -> None:
    if e2e_cluster.flavour != "kwok":
        pytest.skip("the fail label is read by kwok stages; a real kubelet ignores it")
    long_running = pod_template("kwok", run_seconds=3600)
    e2e_cluster.custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        namespace,
        PLURAL,
        jobset(
            "one-bad",
            namespace,
            # A back-off limit above zero keeps the Job, and with it the other pods, alive after one failure.
            replicated_job("workers", replicas=1, pods=3, template=long_running, backoff_limit=6),
        ),
    )

    def three_running() -> list[str]:
        _, pods = owned_by(e2e_cluster, namespace, "one-bad")
        assert [p.status.phase for p in pods] == ["Running"] * 3
        return sorted(p.metadata.name for p in pods)

    chosen, *others = eventually(three_running, timeout=120)
    e2e_cluster.core.patch_namespaced_pod(chosen, namespace, {"metadata": {"labels": {FAIL_LABEL: "true"}}})

    def chosen_failed_and_counted() -> None:
        assert e2e_cluster.core.read_namespaced_pod(chosen, namespace).status.phase == "Failed"
        job = e2e_cluster.batch.read_namespaced_job("one-bad-workers-0", namespace)
        assert job.status.failed == 1, job.status

    eventually(chosen_failed_and_counted, timeout=60)
    assert [e2e_cluster.core.read_namespaced_pod(name, namespace).status.phase for name in others] == [
        "Running",
        "Running",
    ]
    assert condition(get_jobset(e2e_cluster, namespace, "one-bad"), "Failed") is None
