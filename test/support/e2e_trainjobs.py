"""What the e2e modules of TrainJobs share: the module fixtures (a client, the Trainer API installed, the
manager as this cluster's path runs it, the kwok-only skip), the manifest builders and the readers.

``test/e2e/test_trainjob_e2e.py`` and ``test/e2e/test_trainjob_lifecycle_e2e.py`` register the fixtures under
their names (a module-scoped fixture is set up once per module that uses it).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from controller.client.client import Client
from runtime.api import constants
from runtime.api.views import TrainJobView
from support import e2e_paths as paths
from support import install, kwok

FAIL_LABEL = "pod-container-running-failed.stage.kwok.x-k8s.io"
EXIT_CODE_ANNOTATION = f"{FAIL_LABEL}/exit-code"
RUN_TIME_ANNOTATION = "pod-complete.stage.kwok.x-k8s.io/delay"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
COUNTERS = ("active", "ready", "succeeded", "failed", "suspended")
NEVER_PULLED_IMAGE = "registry.invalid/workload:never-pulled"
WORKLOAD_SCRIPT = 'if [ -n "$FAIL_EXIT_CODE" ]; then exit "$FAIL_EXIT_CODE"; fi; exec sleep "${RUN_TIME:-2s}"'
"""What a :func:`workload_runtime` container runs: exit with the pod's fail exit code if it has one, else
sleep for the pod's run time (GNU ``sleep`` reads kwok's ``1h``, ``1s``)."""


@pytest.fixture(scope="module")
def client(e2e_cluster: Any) -> Iterator[Client]:
    c = Client.load(str(e2e_cluster.kubeconfig), user_agent="test_trainjob_e2e")
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def trainer_api(client: Client) -> None:
    """The Trainer CRDs, the default ClusterTrainingRuntimes, and the PodGroup CRD CoScheduling needs."""
    install.install_trainer(client)
    install.install_crds(client, [kwok.scheduler_plugins_podgroup_crd()])


@pytest.fixture(scope="module")
def manager(e2e_cluster: Any, trainer_api: None) -> Iterator[Any]:
    """The manager as this cluster's path runs it (``support.e2e_paths``): on kwok a host process this module
    starts and stops (or ``make demo``'s, on an external cluster), on kind the installed Deployment."""
    name = (
        os.environ.get("E2E_CLUSTER_NAME", "trainer-e2e-pytest") if e2e_cluster.owned else kwok.DEFAULT_NAME
    )
    try:
        with paths.running_manager(
            e2e_cluster.flavour, e2e_cluster.kubeconfig, owned=e2e_cluster.owned, cluster_name=name
        ) as running:
            yield running
    except paths.ManagerUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def kwok_stages(e2e_cluster: Any) -> None:
    if e2e_cluster.flavour != "kwok":
        pytest.skip("this test relies on kwok stages (instant pods, the fail label)")


@pytest.fixture(scope="module")
def workload_image(e2e_cluster: Any) -> str:
    """The image of :func:`workload_runtime`'s pods: on kind the one built for the training Pods
    (``WORKLOAD_IMAGE``, which hack/e2e-setup-kind.sh exports and loads), on kwok a name never pulled."""
    if e2e_cluster.flavour != "kind":
        return NEVER_PULLED_IMAGE
    image = os.environ.get("WORKLOAD_IMAGE", "")
    assert image, "WORKLOAD_IMAGE is not set (hack/e2e-setup-kind.sh exports it)"
    return image


# ------------------------------------------------------------------------------------------------ manifests


def trainjob(
    name: str,
    runtime: str,
    *,
    kind: str = constants.CLUSTER_TRAINING_RUNTIME_KIND,
    num_nodes: int | None = None,
    runtime_patches: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"runtimeRef": {"name": runtime, "kind": kind}}
    if num_nodes is not None:
        spec["trainer"] = {"numNodes": num_nodes}
    if runtime_patches:
        spec["runtimePatches"] = runtime_patches
    return {
        "apiVersion": constants.API_VERSION,
        "kind": constants.TRAINJOB_KIND,
        "metadata": {"name": name},
        "spec": spec,
    }


def gang_runtime(namespace: str) -> dict[str, Any]:
    """A namespaced Torch TrainingRuntime, gang-scheduled; its Job fails at the first pod failure."""
    resources = {"cpu": "1", "memory": "1Gi"}
    return {
        "apiVersion": constants.API_VERSION,
        "kind": constants.TRAINING_RUNTIME_KIND,
        "metadata": {"name": "torch-gang", "namespace": namespace},
        "spec": {
            "mlPolicy": {"numNodes": 2, "torch": {}},
            "podGroupPolicy": {"coscheduling": {"scheduleTimeoutSeconds": 30}},
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "metadata": {
                                    "labels": {constants.LABEL_TRAINJOB_ANCESTOR: constants.ANCESTOR_TRAINER}
                                },
                                "spec": {
                                    "backoffLimit": 0,
                                    "template": {
                                        "spec": {
                                            "containers": [
                                                {
                                                    "name": "node",
                                                    "image": "registry.invalid/torch:never-pulled",
                                                    "resources": {"requests": resources},
                                                }
                                            ]
                                        }
                                    },
                                },
                            },
                        }
                    ]
                }
            },
        },
    }


def workload_runtime(
    namespace: str, image: str, *, mpi: bool = False, name: str = "workload"
) -> dict[str, Any]:
    """A namespaced TrainingRuntime whose pods do for real what kwok's stages play.

    Each container reads its pod's kwok annotations through the downward API: it exits with
    ``EXIT_CODE_ANNOTATION`` when the pod has one, else sleeps for ``RUN_TIME_ANNOTATION`` (2 s without
    one), so the runtime patches that time or fail pods on kwok (:func:`run_for_an_hour_patch`,
    :func:`fail_node_pods_patch`) do the same on kind with ``image`` (:func:`workload_image`). Plain (two
    ``node`` pods, labelled ancestor trainer), or ``mpi``: the shipped MPI runtimes' shape (a ``node`` job
    and a trainer-labelled ``launcher`` that waits for it to be Ready, ``runLauncherAsNode``). A failed pod
    fails its Job at once (``backoffLimit: 0``), and a deleted one stops within a second.
    """

    def job(job_name: str, *, trainer: bool, **extra: Any) -> dict[str, Any]:
        env = [
            {"name": var, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{annotation}']"}}}
            for var, annotation in (
                ("RUN_TIME", RUN_TIME_ANNOTATION),
                ("FAIL_EXIT_CODE", EXIT_CODE_ANNOTATION),
            )
        ]
        container = {
            "name": "node",
            "image": image,
            "command": ["/bin/sh", "-c", WORKLOAD_SCRIPT],
            "env": env,
        }
        template: dict[str, Any] = {
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "spec": {
                        "terminationGracePeriodSeconds": 1,
                        "restartPolicy": "Never",
                        "containers": [container],
                    }
                },
            }
        }
        if trainer:
            template["metadata"] = {"labels": {constants.LABEL_TRAINJOB_ANCESTOR: constants.ANCESTOR_TRAINER}}
        return {"name": job_name, "template": template, **extra}

    if mpi:
        ml_policy: dict[str, Any] = {
            "numNodes": 1,
            "mpi": {
                "numProcPerNode": 1,
                "mpiImplementation": "OpenMPI",
                "sshAuthMountPath": "/root/.ssh",
                "runLauncherAsNode": True,
            },
        }
        jobs = [
            job(constants.NODE, trainer=False),
            job(constants.LAUNCHER, trainer=True, dependsOn=[{"name": constants.NODE, "status": "Ready"}]),
        ]
    else:
        ml_policy = {"numNodes": 2}
        jobs = [job(constants.NODE, trainer=True)]
    return {
        "apiVersion": constants.API_VERSION,
        "kind": constants.TRAINING_RUNTIME_KIND,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"mlPolicy": ml_policy, "template": {"spec": {"replicatedJobs": jobs}}},
    }


def pod_metadata_patch(
    manager: str,
    jobs: tuple[str, ...],
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A runtime patch that puts labels and annotations on the pods of the named replicated jobs."""
    metadata = {"labels": labels or {}, "annotations": annotations or {}}
    replicated_jobs = [
        {"name": job, "template": {"spec": {"template": {"metadata": metadata}}}} for job in jobs
    ]
    return {
        "manager": manager,
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": replicated_jobs}}},
    }


def fail_node_pods_patch(exit_code: int) -> dict[str, Any]:
    """Node pods fail with ``exit_code`` (kwok's fail stage; docs/development.md "Making a pod fail")."""
    return pod_metadata_patch(
        "e2e.example.com/fault-injection",
        ("node",),
        labels={FAIL_LABEL: "true"},
        annotations={EXIT_CODE_ANNOTATION: str(exit_code)},
    )


def run_for_an_hour_patch(jobs: tuple[str, ...]) -> dict[str, Any]:
    """The pods of ``jobs`` stay Running for an hour instead of the cluster's default run time."""
    return pod_metadata_patch("e2e.example.com/long-run", jobs, annotations={RUN_TIME_ANNOTATION: "1h"})


# ------------------------------------------------------------------------------------------- reading back


def read_trainjob(cluster: Any, namespace: str, name: str) -> dict[str, Any]:
    return dict(
        cluster.custom.get_namespaced_custom_object(
            constants.GROUP, constants.VERSION, namespace, "trainjobs", name
        )
    )


def read_jobset(cluster: Any, namespace: str, name: str) -> dict[str, Any]:
    return dict(
        cluster.custom.get_namespaced_custom_object(
            constants.JOBSET_GROUP, constants.JOBSET_VERSION, namespace, "jobsets", name
        )
    )


def true_condition(obj: Mapping[str, Any], kind: str) -> dict[str, Any]:
    found = [c for c in obj.get("status", {}).get("conditions") or [] if c["type"] == kind]
    assert len(found) == 1 and found[0]["status"] == "True", obj.get("status")
    return dict(found[0])


def jobs_status(trainjob: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """``status.jobsStatus`` by job name, every counter present (the schema requires all five)."""
    jobs = (trainjob.get("status") or {}).get("jobsStatus") or []
    return {j["name"]: {k: j[k] for k in COUNTERS} for j in jobs}


def counters(**nonzero: int) -> dict[str, int]:
    return {k: nonzero.get(k, 0) for k in COUNTERS}


def assert_controlled_by(obj: Mapping[str, Any], trainjob: Mapping[str, Any]) -> None:
    assert obj["metadata"].get("ownerReferences") == [
        {
            "apiVersion": constants.API_VERSION,
            "kind": constants.TRAINJOB_KIND,
            "name": trainjob["metadata"]["name"],
            "uid": trainjob["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ], f"{obj['kind']} {obj['metadata']['name']}"


def jobset_pods(cluster: Any, namespace: str, name: str) -> list[Any]:
    return list(
        cluster.core.list_namespaced_pod(namespace, label_selector=f"{JOBSET_NAME_LABEL}={name}").items
    )


def finished(cluster: Any, namespace: str, name: str, eventually: Callable[..., Any]) -> dict[str, Any]:
    """The TrainJob once the manager has marked it Complete or Failed."""

    def done() -> dict[str, Any]:
        stored = read_trainjob(cluster, namespace, name)
        assert TrainJobView(stored).is_finished, stored.get("status")
        return stored

    result: dict[str, Any] = eventually(done, timeout=120)
    return result


def owned_by(cluster: Any, namespace: str, trainjob: Mapping[str, Any]) -> set[tuple[str, str]]:
    """(kind, name) of the ConfigMaps, Secrets and JobSet the TrainJob controls."""
    found = set()
    uid = trainjob["metadata"]["uid"]
    listed = [
        *cluster.core.list_namespaced_config_map(namespace).items,
        *cluster.core.list_namespaced_secret(namespace).items,
    ]
    for obj in listed:
        if any(ref.uid == uid and ref.controller for ref in obj.metadata.owner_references or ()):
            found.add((obj.kind or type(obj).__name__.removeprefix("V1"), obj.metadata.name))
    with contextlib.suppress(ApiException):
        jobset = read_jobset(cluster, namespace, trainjob["metadata"]["name"])
        if jobset["metadata"]["ownerReferences"][0]["uid"] == uid:
            found.add(("JobSet", jobset["metadata"]["name"]))
    return found


# -------------------------------------------------------------------------------------------------- tests
