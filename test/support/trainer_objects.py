"""Object builders and reads shared by the Trainer integration tests (loaded by path: test/ is no package).

The fixtures of upstream's integration suite, as plain dicts: the three-job TrainingRuntime ``alpha`` with
initializers, a 100-node trainer and coscheduling; the suspended TrainJob ``alpha`` with a runtime patch and
trainer overrides; and helpers to read objects and to write JobSet status (Tier 1 runs no JobSet controller).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from controller.client.client import Client
from controller.client.errors import NotFound
from controller.client.gvk import GVK

TRAINJOB = GVK("trainer.kubeflow.org", "v1alpha1", "TrainJob")
TRAINING_RUNTIME = GVK("trainer.kubeflow.org", "v1alpha1", "TrainingRuntime")
CLUSTER_TRAINING_RUNTIME = GVK("trainer.kubeflow.org", "v1alpha1", "ClusterTrainingRuntime")
JOBSET = GVK("jobset.x-k8s.io", "v1alpha2", "JobSet")
POD_GROUP = GVK("scheduling.x-k8s.io", "v1alpha1", "PodGroup")
CONFIGMAP = GVK("", "v1", "ConfigMap")
SECRET = GVK("", "v1", "Secret")
EVENT = GVK("", "v1", "Event")

USER = "integration-test"


# --- object builders -------------------------------------------------------------------------------------


def container(name: str = "node", **fields: Any) -> dict[str, Any]:
    return {"name": name, **fields}


REQUESTS = {"requests": {"cpu": "1", "memory": "4Gi"}}


def job(name: str, *containers: Mapping[str, Any], ancestor: str | None = None, **pod: Any) -> dict[str, Any]:
    metadata = {"labels": {"trainer.kubeflow.org/trainjob-ancestor-step": ancestor}} if ancestor else {}
    return {
        "name": name,
        "replicas": 1,
        "template": {
            "metadata": metadata,
            "spec": {"template": {"spec": {"containers": [dict(c) for c in containers], **pod}}},
        },
    }


def runtime(
    namespace: str | None,
    name: str,
    *jobs: Mapping[str, Any],
    ml_policy: Mapping[str, Any] | None = None,
    pod_group_policy: Mapping[str, Any] | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    kind = "TrainingRuntime" if namespace else "ClusterTrainingRuntime"
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    spec: dict[str, Any] = {"template": {"spec": {"replicatedJobs": [dict(j) for j in jobs]}}}
    if labels:
        spec["template"]["metadata"] = {"labels": dict(labels)}
    if ml_policy is not None:
        spec["mlPolicy"] = dict(ml_policy)
    if pod_group_policy is not None:
        spec["podGroupPolicy"] = dict(pod_group_policy)
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": kind, "metadata": metadata, "spec": spec}


def torch_runtime(namespace: str, name: str = "alpha", **ml: Any) -> dict[str, Any]:
    """A one-job Torch TrainingRuntime: a 100-node trainer, with `ml` merged into its `mlPolicy`."""
    return runtime(
        namespace,
        name,
        job(
            "node",
            container(image="test:runtime", command=["runtime"], resources=REQUESTS),
            ancestor="trainer",
        ),
        ml_policy={"numNodes": 100, "torch": {}, **ml},
    )


def alpha_runtime(namespace: str, name: str = "alpha") -> dict[str, Any]:
    """Upstream's integration fixture: initializers with a PVC each, a 100-node trainer, coscheduling."""

    def initializer(step: str, path: str) -> dict[str, Any]:
        return job(
            step,
            container(
                step,
                image="test:runtime",
                command=["runtime"],
                args=["runtime"],
                resources=REQUESTS,
                volumeMounts=[{"name": "initializer", "mountPath": path}],
            ),
            ancestor=step,
            volumes=[{"name": "initializer", "persistentVolumeClaim": {"claimName": "initializer"}}],
        )

    node = job(
        "node",
        container(
            image="test:runtime",
            command=["runtime"],
            args=["runtime"],
            resources=REQUESTS,
            volumeMounts=[
                {"name": "initializer", "mountPath": "/workspace/dataset"},
                {"name": "initializer", "mountPath": "/workspace/model"},
            ],
        ),
        ancestor="trainer",
        volumes=[{"name": "initializer", "persistentVolumeClaim": {"claimName": "initializer"}}],
    )
    return runtime(
        namespace,
        name,
        initializer("dataset-initializer", "/workspace/dataset"),
        initializer("model-initializer", "/workspace/model"),
        node,
        ml_policy={"numNodes": 100},
        pod_group_policy={"coscheduling": {"scheduleTimeoutSeconds": 100}},
    )


def trainjob(
    namespace: str,
    name: str,
    runtime_name: str,
    *,
    kind: str = "TrainingRuntime",
    suspend: bool | None = None,
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {"runtimeRef": {"name": runtime_name, "kind": kind}, **spec}
    if suspend is not None:
        body["suspend"] = suspend
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": namespace},
        "spec": body,
    }


def alpha_trainjob(namespace: str, name: str = "alpha", runtime_name: str = "alpha") -> dict[str, Any]:
    """Upstream's TrainJob fixture: suspended, a runtime patch with labels/annotations, a trainer override,
    dataset and model initializers."""
    return trainjob(
        namespace,
        name,
        runtime_name,
        suspend=True,
        runtimePatches=[
            {
                "manager": "test.io/manager",
                "trainingRuntimeSpec": {
                    "template": {
                        "metadata": {
                            "labels": {"testingKey": "testingVal"},
                            "annotations": {"testingKey": "testingVal"},
                        }
                    }
                },
            }
        ],
        trainer={
            "image": "test:trainjob",
            "command": ["trainjob"],
            "args": ["trainjob"],
            "resourcesPerNode": REQUESTS,
        },
        initializer={
            "dataset": {"storageUri": "hf://trainjob-dataset"},
            "model": {"storageUri": "hf://trainjob-model"},
        },
    )


# --- writes, reads and JobSet status ----------------------------------------------------------------------


def create(client: Client, obj: Mapping[str, Any]) -> dict[str, Any]:
    """Create `obj` as the test's user."""
    return client.create(dict(obj), field_manager=USER)


def get(client: Client, gvk: GVK, name: str, namespace: str | None) -> dict[str, Any]:
    """The object, or AssertionError (so `eventually` retries) while it does not exist."""
    try:
        return client.get(gvk, name, namespace)
    except NotFound as exc:
        raise AssertionError(f"{gvk.kind} {namespace}/{name} does not exist (yet)") from exc


def absent(client: Client, gvk: GVK, name: str, namespace: str | None) -> bool:
    try:
        client.get(gvk, name, namespace)
    except NotFound:
        return True
    return False


def conditions(obj: Mapping[str, Any]) -> list[tuple[str, str, str, str]]:
    return [
        (c["type"], c["status"], c["reason"], c["message"])
        for c in (obj.get("status") or {}).get("conditions") or []
    ]


def replicated_jobs(jobset: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {rj["name"]: rj for rj in jobset["spec"]["replicatedJobs"]}


def pod_spec(jobset: Mapping[str, Any], job_name: str) -> dict[str, Any]:
    spec: dict[str, Any] = replicated_jobs(jobset)[job_name]["template"]["spec"]["template"]["spec"]
    return spec


def set_jobset_status(client: Client, namespace: str, name: str, status: Mapping[str, Any]) -> None:
    """Write the JobSet's status as its controller would (Tier 1 runs none)."""
    client.patch_status(JOBSET, name, {"status": dict(status)}, namespace)


def jobs_status(*entries: tuple[str, int, int, int, int, int]) -> list[dict[str, Any]]:
    """`replicatedJobsStatus` items from (name, ready, succeeded, failed, active, suspended)."""
    return [
        {"name": n, "ready": r, "succeeded": s, "failed": f, "active": a, "suspended": su}
        for n, r, s, f, a, su in entries
    ]


def jobset_condition(type_: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "type": type_,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }


Eventually = Callable[..., Any]
