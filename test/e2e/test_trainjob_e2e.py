"""TrainJobs through the running manager on a full cluster: the e2e tier of the Trainer controller.

A module fixture starts ``trainer-controller-manager`` on the host against the local cluster, as ``make demo``
does (``hack/cluster.py`` ``start_manager``: the shipped configuration with loopback bind addresses, leader
election on). Each test creates TrainJobs as a user would and reads the world back through the official
client: the JobSets the manager applied run on the kwok nodes, and the TrainJob status the manager wrote
follows them.

Covered: the default ClusterTrainingRuntimes torch-distributed, deepspeed-distributed (MPI: SSH Secret,
hostfile ConfigMap, launcher and node jobs), jax-distributed and xgboost-distributed run to Complete; a
namespaced TrainingRuntime with CoScheduling gets its scheduler-plugins PodGroup (the default scheduler places
the pods, the PodGroup only has to be right); a pod failed through a runtime patch that labels it for kwok's
fail stage makes the TrainJob Failed with the JobSet's reason; a running TrainJob counts active jobs, and
deleting it garbage-collects everything it owned.

The scenarios mirror upstream's e2e suite (kubeflow/trainer ``test/e2e/e2e_test.go``: the "PyTorch",
"DeepSpeed", "JAX" and "XGBoost" TrainJobs, active then Complete) on kwok instead of kind. Those are kwok
only (``kwok_only``: the fail label and the pods' timed lifecycle are kwok stages). On either path
(``hack/e2e_paths.py``: the host manager on kwok, the installed Deployment on kind) a suspended TrainJob gets
its snapshot and suspended JobSet, and kube-apiserver reaches the validating webhook.
"""

from __future__ import annotations

import base64
import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from controller import envtest
from controller.client.client import Client
from runtime.api import constants
from runtime.api.views import TrainJobView

ROOT = Path(__file__).resolve().parents[2]

FAIL_LABEL = "pod-container-running-failed.stage.kwok.x-k8s.io"
EXIT_CODE_ANNOTATION = f"{FAIL_LABEL}/exit-code"
RUN_TIME_ANNOTATION = "pod-complete.stage.kwok.x-k8s.io/delay"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
COUNTERS = ("active", "ready", "succeeded", "failed", "suspended")


hack = envtest.load_script(ROOT / "hack" / "cluster.py", "_hack_cluster")
paths = envtest.load_script(ROOT / "hack" / "e2e_paths.py", "_hack_e2e_paths")


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
    hack.install_trainer(client)
    hack.install_crds(client, [hack.scheduler_plugins_podgroup_crd()])


@pytest.fixture(scope="module")
def manager(e2e_cluster: Any, trainer_api: None) -> Iterator[Any]:
    """The manager as this cluster's path runs it (``hack/e2e_paths.py``): on kwok a host process this module
    starts and stops (or ``make demo``'s, on an external cluster), on kind the installed Deployment."""
    name = (
        os.environ.get("E2E_CLUSTER_NAME", "trainer-e2e-pytest") if e2e_cluster.owned else hack.DEFAULT_NAME
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


pytestmark = pytest.mark.usefixtures("manager")
kwok_only = pytest.mark.usefixtures("kwok_stages")


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


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeCase:
    runtime: str
    num_nodes: int | None
    plugin_objects: tuple[tuple[str, str], ...] = ()
    """(kind, name) the plugins own besides the snapshot and the JobSet; ``{name}`` is the TrainJob's name."""
    jobs_status: dict[str, dict[str, int]]
    """``status.jobsStatus`` once Complete, by job name."""


DEFAULT_RUNTIME_CASES = [
    RuntimeCase(runtime="torch-distributed", num_nodes=2, jobs_status={"node": counters(succeeded=1)}),
    RuntimeCase(
        runtime="deepspeed-distributed",
        num_nodes=2,
        plugin_objects=(("Secret", "{name}-mpi-ssh-auth"), ("ConfigMap", "{name}-mpi-hostfile")),
        jobs_status={"node": counters(succeeded=1), "launcher": counters(succeeded=1)},
    ),
    RuntimeCase(runtime="jax-distributed", num_nodes=2, jobs_status={"node": counters(succeeded=1)}),
    RuntimeCase(runtime="xgboost-distributed", num_nodes=None, jobs_status={"node": counters(succeeded=1)}),
]


@kwok_only
@pytest.mark.parametrize("case", DEFAULT_RUNTIME_CASES, ids=lambda case: case.runtime)
def test_a_trainjob_on_a_default_runtime_runs_to_complete(
    e2e_cluster: Any, client: Client, namespace: str, eventually: Callable[..., Any], case: RuntimeCase
) -> None:
    name = "job"
    created = hack.create_trainjob(client, trainjob(name, case.runtime, num_nodes=case.num_nodes), namespace)
    stored = finished(e2e_cluster, namespace, name, eventually)

    # The manager applied the snapshot, the JobSet and the plugins' objects, each controlled by the TrainJob
    # and owned by the field manager `trainer`.
    expected = {("ConfigMap", f"{name}-runtime-snapshot"), ("JobSet", name)}
    expected |= {(kind, pattern.format(name=name)) for kind, pattern in case.plugin_objects}
    assert owned_by(e2e_cluster, namespace, created) == expected
    jobset = read_jobset(e2e_cluster, namespace, name)
    assert_controlled_by(jobset, created)
    assert constants.FIELD_MANAGER in {m["manager"] for m in jobset["metadata"]["managedFields"]}

    # The JobSet ran on the kwok nodes; every pod succeeded.
    completed = true_condition(jobset, "Completed")
    pods = jobset_pods(e2e_cluster, namespace, name)
    assert pods and {p.status.phase for p in pods} == {"Succeeded"}
    assert all(p.spec.node_name.startswith("kwok-node-") for p in pods)

    # The status the manager wrote follows the JobSet (and the API server's schema accepted it).
    assert [c["type"] for c in stored["status"]["conditions"]] == [constants.CONDITION_COMPLETE]
    complete = true_condition(stored, constants.CONDITION_COMPLETE)
    assert (complete["reason"], complete["message"]) == (completed["reason"], completed["message"])
    assert complete["reason"] == "AllJobsCompleted"
    assert TrainJobView(stored).is_complete and not TrainJobView(stored).is_failed

    def all_counted() -> None:
        assert jobs_status(read_trainjob(e2e_cluster, namespace, name)) == case.jobs_status

    eventually(all_counted, timeout=30)


@kwok_only
def test_mpi_objects_carry_the_key_pair_and_a_hostfile_naming_every_node(
    e2e_cluster: Any, client: Client, namespace: str, eventually: Callable[..., Any]
) -> None:
    name = "mpi"
    hack.create_trainjob(client, trainjob(name, "deepspeed-distributed", num_nodes=3), namespace)

    secret = eventually(
        lambda: e2e_cluster.core.read_namespaced_secret(f"{name}-mpi-ssh-auth", namespace),
        retry_on=(ApiException,),
    )
    assert secret.type == "kubernetes.io/ssh-auth" and secret.immutable is True
    assert base64.b64decode(secret.data["ssh-privatekey"]).startswith(b"-----BEGIN EC PRIVATE KEY-----")
    assert base64.b64decode(secret.data["ssh-publickey"]).startswith(b"ecdsa-sha2-nistp521 ")
    hostfile = eventually(
        lambda: e2e_cluster.core.read_namespaced_config_map(f"{name}-mpi-hostfile", namespace),
        retry_on=(ApiException,),
    )
    # runLauncherAsNode: the launcher is one of the three hosts; hosts in template order (node first).
    assert hostfile.data["hostfile"] == "".join(
        f"{name}-{job_name}-0-{index}.{name} slots=1\n"
        for job_name, index in (("node", 0), ("node", 1), ("launcher", 0))
    )
    finished(e2e_cluster, namespace, name, eventually)
    jobs = e2e_cluster.batch.list_namespaced_job(namespace, label_selector=f"{JOBSET_NAME_LABEL}={name}")
    assert {j.metadata.name: j.spec.parallelism for j in jobs.items} == {
        f"{name}-launcher-0": 1,
        f"{name}-node-0": 2,
    }


@kwok_only
def test_a_trainjob_on_a_namespaced_runtime_with_coscheduling_gets_its_pod_group(
    e2e_cluster: Any, client: Client, namespace: str, eventually: Callable[..., Any]
) -> None:
    client.apply(gang_runtime(namespace), "e2e", force=True)
    name = "gang"
    created = hack.create_trainjob(
        client, trainjob(name, "torch-gang", kind=constants.TRAINING_RUNTIME_KIND), namespace
    )
    stored = finished(e2e_cluster, namespace, name, eventually)

    pod_group = e2e_cluster.custom.get_namespaced_custom_object(
        "scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", name
    )
    assert_controlled_by(pod_group, created)
    assert pod_group["spec"]["minMember"] == 2
    assert pod_group["spec"]["scheduleTimeoutSeconds"] == 30
    assert pod_group["spec"]["minResources"] == {"cpu": "2", "memory": "2Gi"}
    pods = jobset_pods(e2e_cluster, namespace, name)
    assert len(pods) == 2
    assert {p.metadata.labels.get(POD_GROUP_LABEL) for p in pods} == {name}
    assert true_condition(stored, constants.CONDITION_COMPLETE)["reason"] == "AllJobsCompleted"


@kwok_only
def test_a_failing_pod_makes_the_trainjob_failed_with_the_jobsets_reason(
    e2e_cluster: Any, client: Client, namespace: str, eventually: Callable[..., Any]
) -> None:
    client.apply(gang_runtime(namespace), "e2e", force=True)
    name = "broken"
    job = trainjob(
        name, "torch-gang", kind=constants.TRAINING_RUNTIME_KIND, runtime_patches=[fail_node_pods_patch(7)]
    )
    hack.create_trainjob(client, job, namespace)
    stored = finished(e2e_cluster, namespace, name, eventually)

    failed_jobset = true_condition(read_jobset(e2e_cluster, namespace, name), "Failed")
    failed_pods = [p for p in jobset_pods(e2e_cluster, namespace, name) if p.status.phase == "Failed"]
    assert failed_pods
    assert {s.state.terminated.exit_code for s in failed_pods[0].status.container_statuses} == {7}

    assert [c["type"] for c in stored["status"]["conditions"]] == [constants.CONDITION_FAILED]
    failed = true_condition(stored, constants.CONDITION_FAILED)
    assert (failed["reason"], failed["message"]) == (failed_jobset["reason"], failed_jobset["message"])
    assert failed["reason"] == "FailedJobs"
    view = TrainJobView(stored)
    assert view.is_failed and not view.is_complete

    def failure_counted() -> None:
        assert jobs_status(read_trainjob(e2e_cluster, namespace, name))["node"]["failed"] == 1

    eventually(failure_counted, timeout=30)


@kwok_only
def test_a_running_trainjob_counts_active_jobs_and_deleting_it_collects_everything_it_owns(
    e2e_cluster: Any, client: Client, namespace: str, eventually: Callable[..., Any]
) -> None:
    name = "doomed"
    job = trainjob(
        name,
        "deepspeed-distributed",
        num_nodes=2,
        runtime_patches=[run_for_an_hour_patch(("node", "launcher"))],
    )
    created = hack.create_trainjob(client, job, namespace)

    # Upstream's e2e "DeepSpeed" case: while it runs, no condition and each job counted active.
    def running() -> dict[str, Any]:
        stored = read_trainjob(e2e_cluster, namespace, name)
        assert jobs_status(stored) == {
            "node": counters(active=1, ready=1),
            "launcher": counters(active=1, ready=1),
        }
        return stored

    stored = eventually(running, timeout=60)
    assert not (stored.get("status") or {}).get("conditions")
    assert {p.status.phase for p in jobset_pods(e2e_cluster, namespace, name)} == {"Running"}
    owned = owned_by(e2e_cluster, namespace, created)
    assert owned == {
        ("ConfigMap", f"{name}-runtime-snapshot"),
        ("JobSet", name),
        ("Secret", f"{name}-mpi-ssh-auth"),
        ("ConfigMap", f"{name}-mpi-hostfile"),
    }

    e2e_cluster.custom.delete_namespaced_custom_object(
        constants.GROUP, constants.VERSION, namespace, "trainjobs", name, propagation_policy="Background"
    )

    def left_behind() -> list[str]:
        found = []
        for kind, obj_name in sorted(owned):
            read = {
                "ConfigMap": e2e_cluster.core.read_namespaced_config_map,
                "Secret": e2e_cluster.core.read_namespaced_secret,
                "JobSet": lambda n, ns: read_jobset(e2e_cluster, ns, n),
            }[kind]
            try:
                read(obj_name, namespace)
            except ApiException as exc:
                if exc.status != 404:
                    raise
                continue
            found.append(f"{kind}/{obj_name}")
        selector = f"{JOBSET_NAME_LABEL}={name}"
        found += [
            f"Job/{j.metadata.name}"
            for j in e2e_cluster.batch.list_namespaced_job(namespace, label_selector=selector).items
        ]
        found += [f"Pod/{p.metadata.name}" for p in jobset_pods(e2e_cluster, namespace, name)]
        return found

    def collected() -> None:
        remaining = left_behind()
        assert not remaining, remaining

    # The garbage collector finds a new CRD's objects at its next rediscovery (every 30 s,
    # docs/development.md "Troubleshooting"): run first on a fresh cluster this waited 38 s; later, ~2 s.
    eventually(collected, timeout=120, interval=1.0)


def test_on_either_path_a_suspended_trainjob_gets_its_objects_and_the_webhook_answers(
    e2e_cluster: Any, client: Client, namespace: str, eventually: Callable[..., Any]
) -> None:
    # Suspended, so no pod is created: nothing depends on what the nodes run.
    answer = paths.webhook_answer(client, namespace)
    assert paths.webhook_serving(answer), answer
    name = "parked"
    job = trainjob(name, "torch-distributed", num_nodes=2)
    job["spec"]["suspend"] = True
    created = hack.create_trainjob(client, job, namespace)

    def suspended() -> dict[str, Any]:
        stored = read_trainjob(e2e_cluster, namespace, name)
        return true_condition(stored, constants.CONDITION_SUSPENDED)

    assert eventually(suspended)["reason"] == constants.REASON_SUSPENDED
    jobset = read_jobset(e2e_cluster, namespace, name)
    assert_controlled_by(jobset, created)
    assert jobset["spec"]["suspend"] is True
    assert owned_by(e2e_cluster, namespace, created) == {
        ("ConfigMap", f"{name}-runtime-snapshot"),
        ("JobSet", name),
    }
    assert not jobset_pods(e2e_cluster, namespace, name)
