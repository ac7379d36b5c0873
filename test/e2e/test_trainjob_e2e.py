"""TrainJobs through the running manager on a full cluster: the e2e tier of the Trainer controller.

A module fixture starts ``trainer-controller-manager`` on the host against the local cluster, as ``make demo``
does (``support.cluster_manager`` ``start_manager``: the shipped configuration with loopback bind addresses,
leader election on). Each test creates TrainJobs as a user would and reads the world back through the official
client: the JobSets the manager applied run on the kwok nodes, and the TrainJob status the manager wrote
follows them.

Covered: the default ClusterTrainingRuntimes torch-distributed, deepspeed-distributed, jax-distributed and
xgboost-distributed run to Complete; the MPI plugin's SSH Secret and hostfile ConfigMap, and the launcher and
node jobs, on a runtime of deepspeed-distributed's shape; a
namespaced TrainingRuntime with CoScheduling gets its scheduler-plugins PodGroup (the default scheduler places
the pods, the PodGroup only has to be right); a failing pod makes the TrainJob Failed with the JobSet's
reason; a running TrainJob counts active jobs, and deleting it garbage-collects everything it owned.

The scenarios mirror upstream's e2e suite (kubeflow/trainer ``test/e2e/e2e_test.go``: the "PyTorch",
"DeepSpeed", "JAX" and "XGBoost" TrainJobs, active then Complete). The default runtimes, the MPI objects and
CoScheduling are kwok only (``kwok_only``: the shipped runtimes' images are not in the kind cluster, and their
pods' timed lifecycle is kwok's stages). The MPI objects, the failure and the collection run on both paths
(``support.e2e_paths``: the host manager on kwok, the installed Deployment on kind), on a namespaced runtime
of ``support.e2e_trainjobs.workload_runtime``: on kwok its pods are played by the stages, on kind they run
the workload image, whose container exits with the fail annotation's code or sleeps for the run-time
annotation. On either path too, a suspended TrainJob gets its snapshot and suspended JobSet, and
kube-apiserver reaches the validating webhook.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from controller.client.client import Client
from runtime.api import constants
from runtime.api.views import TrainJobView
from runtime.features import TRAIN_JOB_STATUS
from support import e2e_paths as paths
from support import e2e_trainjobs, install
from support.e2e_trainjobs import (
    JOBSET_NAME_LABEL,
    POD_GROUP_LABEL,
    assert_controlled_by,
    counters,
    fail_node_pods_patch,
    finished,
    gang_runtime,
    jobs_status,
    jobset_pods,
    owned_by,
    read_jobset,
    read_trainjob,
    run_for_an_hour_patch,
    trainjob,
    true_condition,
    workload_runtime,
)

# The module fixtures, registered here under their names (test_trainjob_lifecycle_e2e.py does the same).
client = e2e_trainjobs.client
trainer_api = e2e_trainjobs.trainer_api  # `manager` asks for it by name
manager = e2e_trainjobs.manager
kwok_stages = e2e_trainjobs.kwok_stages
workload_image = e2e_trainjobs.workload_image

pytestmark = pytest.mark.usefixtures("manager")
kwok_only = pytest.mark.usefixtures("kwok_stages")


def status_server_objects(client: Client, name: str) -> set[tuple[str, str]]:
    """What the TrainJobStatus plugin owns besides: a ConfigMap with the status server's CA for the pods,
    when the gate is on (the Helm install of hack/e2e-setup-kind.sh turns it on, as upstream's e2e set-up
    does)."""
    if paths.feature_gate_on(client, TRAIN_JOB_STATUS):
        return {("ConfigMap", f"{name}-tls-config")}
    return set()


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
    created = install.create_trainjob(
        client, trainjob(name, case.runtime, num_nodes=case.num_nodes), namespace
    )
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


def test_mpi_objects_carry_the_key_pair_and_a_hostfile_naming_every_node(
    e2e_cluster: Any, client: Client, namespace: str, workload_image: str, eventually: Callable[..., Any]
) -> None:
    # The shipped DeepSpeed runtime's shape (the launcher a node, labelled trainer), its pods the workload's.
    client.apply(workload_runtime(namespace, workload_image, mpi=True), "e2e", force=True)
    name = "mpi"
    job = trainjob(name, "workload", kind=constants.TRAINING_RUNTIME_KIND, num_nodes=3)
    install.create_trainjob(client, job, namespace)

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
    created = install.create_trainjob(
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


def test_a_failing_pod_makes_the_trainjob_failed_with_the_jobsets_reason(
    e2e_cluster: Any, client: Client, namespace: str, workload_image: str, eventually: Callable[..., Any]
) -> None:
    # On kwok the fail stage fails the node pods; on kind their container exits with the code.
    client.apply(workload_runtime(namespace, workload_image), "e2e", force=True)
    name = "broken"
    job = trainjob(
        name, "workload", kind=constants.TRAINING_RUNTIME_KIND, runtime_patches=[fail_node_pods_patch(7)]
    )
    install.create_trainjob(client, job, namespace)

    # Each pod's exit code as soon as it ends: a real Job's failed pods may go once the JobSet has failed.
    exit_codes: dict[str, set[int]] = {}

    def failed_and_seen() -> dict[str, Any]:
        for pod in jobset_pods(e2e_cluster, namespace, name):
            terminated = [
                s.state.terminated for s in pod.status.container_statuses or () if s.state.terminated
            ]
            if pod.status.phase == "Failed" and terminated:
                exit_codes[pod.metadata.name] = {t.exit_code for t in terminated}
        stored = read_trainjob(e2e_cluster, namespace, name)
        assert TrainJobView(stored).is_finished, stored.get("status")
        assert exit_codes, "no failed pod seen"
        return stored

    stored = eventually(failed_and_seen, timeout=120)
    failed_jobset = true_condition(read_jobset(e2e_cluster, namespace, name), "Failed")
    assert set().union(*exit_codes.values()) == {7}, exit_codes

    assert [c["type"] for c in stored["status"]["conditions"]] == [constants.CONDITION_FAILED]
    failed = true_condition(stored, constants.CONDITION_FAILED)
    assert (failed["reason"], failed["message"]) == (failed_jobset["reason"], failed_jobset["message"])
    assert failed["reason"] == "FailedJobs"
    view = TrainJobView(stored)
    assert view.is_failed and not view.is_complete

    def failure_counted() -> None:
        assert jobs_status(read_trainjob(e2e_cluster, namespace, name))["node"]["failed"] == 1

    eventually(failure_counted, timeout=30)


def test_a_running_trainjob_counts_active_jobs_and_deleting_it_collects_everything_it_owns(
    e2e_cluster: Any, client: Client, namespace: str, workload_image: str, eventually: Callable[..., Any]
) -> None:
    # The shipped DeepSpeed runtime's shape (MPI, the launcher a node), its pods running for an hour.
    client.apply(workload_runtime(namespace, workload_image, mpi=True), "e2e", force=True)
    name = "doomed"
    job = trainjob(
        name,
        "workload",
        kind=constants.TRAINING_RUNTIME_KIND,
        num_nodes=2,
        runtime_patches=[run_for_an_hour_patch(("node", "launcher"))],
    )
    created = install.create_trainjob(client, job, namespace)

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
    } | status_server_objects(client, name)

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
    created = install.create_trainjob(client, job, namespace)

    def suspended() -> dict[str, Any]:
        stored = read_trainjob(e2e_cluster, namespace, name)
        return true_condition(stored, constants.CONDITION_SUSPENDED)

    assert eventually(suspended)["reason"] == constants.REASON_SUSPENDED
    jobset = read_jobset(e2e_cluster, namespace, name)
    assert_controlled_by(jobset, created)
    assert jobset["spec"]["suspend"] is True
    expected = {("ConfigMap", f"{name}-runtime-snapshot"), ("JobSet", name)}
    assert owned_by(e2e_cluster, namespace, created) == expected | status_server_objects(client, name)
    assert not jobset_pods(e2e_cluster, namespace, name)
