"""The TrainJob pipeline on a full cluster, driven by hand until the controller exists (issues 2 and 4).

Each test creates a TrainJob, renders it with ``runtime.render`` against its live runtime and its real UID,
server-side applies the objects in order (field manager ``trainer``, force), lets the JobSet run on the
kwok nodes, computes the TrainJob status with ``RuntimeRegistry.next_status`` from the live JobSet and
writes it with a merge patch on ``/status``: the steps of ``hack/cluster.py``'s pipeline functions, which
``make demo`` runs too. The assertions read the world back through the official client.

Covered: the default ClusterTrainingRuntimes torch-distributed, deepspeed-distributed (MPI: SSH Secret,
hostfile ConfigMap, launcher and node jobs), jax-distributed and xgboost-distributed; a namespaced
TrainingRuntime with CoScheduling (a scheduler-plugins PodGroup; the default scheduler places the pods,
the PodGroup only has to be right); a pod failed through a runtime patch that labels it for kwok's fail
stage; the status of a TrainJob still running; and garbage collection of everything a TrainJob owns once
it is deleted (kube-controller-manager's garbage collector, with a bounded wait for its rediscovery of
new CRDs).

The scenarios mirror upstream's e2e suite (kubeflow/trainer ``test/e2e/e2e_test.go``: the "PyTorch",
"DeepSpeed", "JAX" and "XGBoost" TrainJobs, active then Complete) on kwok instead of kind. kwok only: the
fail label and the pods' timed lifecycle are kwok stages. Not covered here: suspend and resume, the active
deadline, a second reconcile over existing objects; they need the controller's loop.
"""

from __future__ import annotations

import base64
import importlib.util
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from controller.client import Client
from runtime.api import constants
from runtime.api.views import TrainJobView

ROOT = Path(__file__).resolve().parents[2]

FAIL_LABEL = "pod-container-running-failed.stage.kwok.x-k8s.io"
EXIT_CODE_ANNOTATION = f"{FAIL_LABEL}/exit-code"
RUN_TIME_ANNOTATION = "pod-complete.stage.kwok.x-k8s.io/delay"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
POD_GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
COUNTERS = ("active", "ready", "succeeded", "failed", "suspended")


def _hack_cluster() -> ModuleType:
    """hack/cluster.py under the name test/e2e/conftest.py imports it as (one copy per process)."""
    name = "_hack_cluster"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "hack" / "cluster.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


hack = _hack_cluster()


@pytest.fixture(scope="module")
def client(e2e_cluster: Any) -> Iterator[Client]:
    if e2e_cluster.flavour != "kwok":
        pytest.skip("these tests rely on kwok stages (instant pods, the fail label)")
    c = Client.load(str(e2e_cluster.kubeconfig), user_agent="test_render_apply")
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(scope="module")
def trainer_api(client: Client) -> None:
    """The Trainer CRDs, the default ClusterTrainingRuntimes, and the PodGroup CRD CoScheduling needs."""
    hack.install_trainer(client)
    hack.install_crds(client, [hack.scheduler_plugins_podgroup_crd()])


pytestmark = pytest.mark.usefixtures("trainer_api")


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
    return {j["name"]: {k: j[k] for k in COUNTERS} for j in trainjob["status"].get("jobsStatus") or []}


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


# -------------------------------------------------------------------------------------------------- tests


@dataclass(frozen=True, slots=True, kw_only=True)
class RuntimeCase:
    runtime: str
    num_nodes: int | None
    plugin_objects: tuple[tuple[str, str], ...] = ()
    """(kind, name) applied after the snapshot and the JobSet; ``{name}`` is the TrainJob's name."""
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


@pytest.mark.parametrize("case", DEFAULT_RUNTIME_CASES, ids=lambda case: case.runtime)
def test_a_trainjob_on_a_default_runtime_is_rendered_applied_and_completes(
    e2e_cluster: Any, client: Client, namespace: str, case: RuntimeCase
) -> None:
    name = "job"
    run = hack.run_trainjob(client, trainjob(name, case.runtime, num_nodes=case.num_nodes), namespace)

    # Applied in render order, each controlled by the TrainJob through its real UID.
    expected_objects = [("ConfigMap", f"{name}-runtime-snapshot"), ("JobSet", name)]
    expected_objects += [(kind, pattern.format(name=name)) for kind, pattern in case.plugin_objects]
    assert [(o["kind"], o["metadata"]["name"]) for o in run.applied] == expected_objects
    for obj in run.applied:
        assert_controlled_by(obj, run.trainjob)
        assert constants.FIELD_MANAGER in {m["manager"] for m in obj["metadata"]["managedFields"]}

    # The JobSet ran on the kwok nodes; every pod succeeded.
    jobset = read_jobset(e2e_cluster, namespace, name)
    completed = true_condition(jobset, "Completed")
    pods = jobset_pods(e2e_cluster, namespace, name)
    assert pods and {p.status.phase for p in pods} == {"Succeeded"}
    assert all(p.spec.node_name.startswith("kwok-node-") for p in pods)

    # The status the controller will write, as stored by the API server (its schema accepted it).
    stored = read_trainjob(e2e_cluster, namespace, name)
    assert [c["type"] for c in stored["status"]["conditions"]] == [constants.CONDITION_COMPLETE]
    complete = true_condition(stored, constants.CONDITION_COMPLETE)
    assert (complete["reason"], complete["message"]) == (completed["reason"], completed["message"])
    assert complete["reason"] == "AllJobsCompleted"
    assert TrainJobView(stored).is_complete and not TrainJobView(stored).is_failed
    assert jobs_status(stored) == case.jobs_status
    assert run.update.requeue_after is None and not run.update.delete_jobset and not run.update.terminal


def test_mpi_objects_carry_the_key_pair_and_a_hostfile_naming_every_node(
    e2e_cluster: Any, client: Client, namespace: str
) -> None:
    name = "mpi"
    job = trainjob(name, "deepspeed-distributed", num_nodes=3)
    created = hack.create_trainjob(client, job, namespace)
    hack.apply_objects(client, hack.render_trainjob(client, created).objects)

    secret = e2e_cluster.core.read_namespaced_secret(f"{name}-mpi-ssh-auth", namespace)
    assert secret.type == "kubernetes.io/ssh-auth" and secret.immutable is True
    assert base64.b64decode(secret.data["ssh-privatekey"]).startswith(b"-----BEGIN EC PRIVATE KEY-----")
    assert base64.b64decode(secret.data["ssh-publickey"]).startswith(b"ecdsa-sha2-nistp521 ")
    hostfile = e2e_cluster.core.read_namespaced_config_map(f"{name}-mpi-hostfile", namespace)
    # runLauncherAsNode: the launcher is one of the three hosts; hosts in template order (node first).
    assert hostfile.data["hostfile"] == "".join(
        f"{name}-{job_name}-0-{index}.{name} slots=1\n"
        for job_name, index in (("node", 0), ("node", 1), ("launcher", 0))
    )
    hack.wait_for_jobset(client, namespace, name)
    jobs = e2e_cluster.batch.list_namespaced_job(namespace, label_selector=f"{JOBSET_NAME_LABEL}={name}")
    assert {j.metadata.name: j.spec.parallelism for j in jobs.items} == {
        f"{name}-launcher-0": 1,
        f"{name}-node-0": 2,
    }


def test_a_trainjob_on_a_namespaced_runtime_with_coscheduling_gets_its_pod_group(
    e2e_cluster: Any, client: Client, namespace: str
) -> None:
    client.apply(gang_runtime(namespace), "e2e", force=True)
    name = "gang"
    run = hack.run_trainjob(
        client, trainjob(name, "torch-gang", kind=constants.TRAINING_RUNTIME_KIND), namespace
    )

    assert [(o["kind"], o["metadata"]["name"]) for o in run.applied] == [
        ("ConfigMap", f"{name}-runtime-snapshot"),
        ("JobSet", name),
        ("PodGroup", name),
    ]
    pod_group = e2e_cluster.custom.get_namespaced_custom_object(
        "scheduling.x-k8s.io", "v1alpha1", namespace, "podgroups", name
    )
    assert_controlled_by(pod_group, run.trainjob)
    assert pod_group["spec"]["minMember"] == 2
    assert pod_group["spec"]["scheduleTimeoutSeconds"] == 30
    assert pod_group["spec"]["minResources"] == {"cpu": "2", "memory": "2Gi"}
    pods = jobset_pods(e2e_cluster, namespace, name)
    assert len(pods) == 2
    assert {p.metadata.labels.get(POD_GROUP_LABEL) for p in pods} == {name}

    stored = read_trainjob(e2e_cluster, namespace, name)
    assert true_condition(stored, constants.CONDITION_COMPLETE)["reason"] == "AllJobsCompleted"
    assert jobs_status(stored) == {"node": counters(succeeded=1)}


def test_a_failing_pod_makes_the_computed_status_failed(
    e2e_cluster: Any, client: Client, namespace: str
) -> None:
    client.apply(gang_runtime(namespace), "e2e", force=True)
    name = "broken"
    job = trainjob(
        name, "torch-gang", kind=constants.TRAINING_RUNTIME_KIND, runtime_patches=[fail_node_pods_patch(7)]
    )
    run = hack.run_trainjob(client, job, namespace)

    failed_jobset = true_condition(read_jobset(e2e_cluster, namespace, name), "Failed")
    failed_pods = [p for p in jobset_pods(e2e_cluster, namespace, name) if p.status.phase == "Failed"]
    assert failed_pods
    assert {s.state.terminated.exit_code for s in failed_pods[0].status.container_statuses} == {7}

    stored = read_trainjob(e2e_cluster, namespace, name)
    assert [c["type"] for c in stored["status"]["conditions"]] == [constants.CONDITION_FAILED]
    failed = true_condition(stored, constants.CONDITION_FAILED)
    assert (failed["reason"], failed["message"]) == (failed_jobset["reason"], failed_jobset["message"])
    assert failed["reason"] == "FailedJobs"
    view = TrainJobView(stored)
    assert view.is_failed and not view.is_complete
    assert jobs_status(stored)["node"]["failed"] == 1
    assert run.update.status == stored["status"]


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
    applied = hack.apply_objects(client, hack.render_trainjob(client, created).objects)
    owned = {(o["kind"], o["metadata"]["name"]) for o in applied}
    assert owned == {
        ("ConfigMap", f"{name}-runtime-snapshot"),
        ("JobSet", name),
        ("Secret", f"{name}-mpi-ssh-auth"),
        ("ConfigMap", f"{name}-mpi-hostfile"),
    }

    # Upstream's e2e "DeepSpeed" case: while it runs, no condition and each job counted active.
    def running() -> dict[str, Any]:
        update = hack.compute_status(client, created)
        assert update.error is None, update.error
        assert jobs_status({"status": update.status}) == {
            "node": counters(active=1, ready=1),
            "launcher": counters(active=1, ready=1),
        }
        return dict(update.status)

    status = eventually(running, timeout=60)
    assert "conditions" not in status
    stored = hack.write_status(client, created, status)
    assert not TrainJobView(stored).is_finished
    assert {p.status.phase for p in jobset_pods(e2e_cluster, namespace, name)} == {"Running"}

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
