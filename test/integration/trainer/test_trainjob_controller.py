"""The TrainJob controller against a real kube-apiserver: upstream's scenarios, each named by its
number in the behaviour notes (upstream `test/integration/controller/trainjob_controller_test.go`), plus what
the port adds (no writes in steady state, runtime created after its TrainJob, label-narrowed caches).

The manager runs in this process exactly as in production (its informers, five TrainJob workers, leader
election). Tier 1 has no JobSet controller and no garbage collector: the tests write JobSet status.
"""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from controller.client import Client
from controller.envtest import ControlPlane, load_script
from controller.reconcile import Request

_objects = load_script(Path(__file__).with_name("objects.py"), "_trainer_integration_objects")
CLUSTER_TRAINING_RUNTIME = _objects.CLUSTER_TRAINING_RUNTIME
CONFIGMAP = _objects.CONFIGMAP
EVENT = _objects.EVENT
JOBSET = _objects.JOBSET
POD_GROUP = _objects.POD_GROUP
REQUESTS = _objects.REQUESTS
SECRET = _objects.SECRET
TRAINING_RUNTIME = _objects.TRAINING_RUNTIME
TRAINJOB = _objects.TRAINJOB
USER = _objects.USER
Eventually = _objects.Eventually
absent = _objects.absent
alpha_runtime = _objects.alpha_runtime
alpha_trainjob = _objects.alpha_trainjob
conditions = _objects.conditions
container = _objects.container
get = _objects.get
job = _objects.job
jobs_status = _objects.jobs_status
jobset_condition = _objects.jobset_condition
pod_spec = _objects.pod_spec
replicated_jobs = _objects.replicated_jobs
runtime = _objects.runtime
set_jobset_status = _objects.set_jobset_status
trainjob = _objects.trainjob

pytestmark = pytest.mark.allow_thread_leaks

COMPLETED = jobset_condition("Completed", "AllJobsCompleted", "jobset completed successfully")
FAILED = jobset_condition("Failed", "FailedJobs", "jobset failed due to one or more job failures")


def _create(client: Client, obj: Mapping[str, Any]) -> dict[str, Any]:
    return client.create(dict(obj), field_manager=USER)


def _env(pod: Mapping[str, Any], container_name: str = "node") -> list[tuple[str, Any]]:
    for c in pod.get("containers", []) + pod.get("initContainers", []):
        if c["name"] == container_name:
            return [(e["name"], e.get("value", e.get("valueFrom"))) for e in c.get("env") or []]
    raise AssertionError(f"no container {container_name}")


def torch_runtime(namespace: str, name: str = "alpha", **ml: Any) -> dict[str, Any]:
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


# --- PlainML ------------------------------------------------------------------------------------------------


def test_1_create_trainjob_with_training_runtime(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    _create(client, alpha_runtime(namespace))
    created = _create(client, alpha_trainjob(namespace))
    jobset = eventually(lambda: get(client, JOBSET, "alpha", namespace), timeout=20)

    owner = jobset["metadata"]["ownerReferences"]
    assert owner == [
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "name": "alpha",
            "uid": created["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert jobset["spec"]["suspend"] is True
    assert jobset["metadata"]["labels"]["testingKey"] == "testingVal"
    assert jobset["metadata"]["annotations"]["testingKey"] == "testingVal"
    jobs = replicated_jobs(jobset)
    assert list(jobs) == ["dataset-initializer", "model-initializer", "node"]
    for name, rjob in jobs.items():
        assert rjob["replicas"] == 1
        labels = rjob["template"]["spec"]["template"]["metadata"]["labels"]
        assert labels["scheduling.x-k8s.io/pod-group"] == "alpha"
        expected = 100 if name == "node" else 1
        assert rjob["template"]["spec"].get("parallelism", 1) == expected
        assert rjob["template"]["spec"].get("completions", 1) == expected
    node = pod_spec(jobset, "node")["containers"][0]
    assert (node["image"], node["command"], node["args"]) == ("test:trainjob", ["trainjob"], ["trainjob"])
    dataset = pod_spec(jobset, "dataset-initializer")["containers"][0]
    assert dataset["image"] == "test:runtime"
    assert ("STORAGE_URI", "hf://trainjob-dataset") in _env(
        pod_spec(jobset, "dataset-initializer"), "dataset-initializer"
    )

    pod_group = eventually(lambda: get(client, POD_GROUP, "alpha", namespace), timeout=10)
    assert pod_group["spec"]["minMember"] == 102
    assert pod_group["spec"]["scheduleTimeoutSeconds"] == 100
    resources = pod_group["spec"]["minResources"]
    assert (resources["cpu"], resources["memory"]) == ("102", "408Gi")
    assert pod_group["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]


def test_2_not_reconcile_trainjob_managed_by_external_controller(
    trainer: Any, client: Client, namespace: str
) -> None:
    _create(client, alpha_runtime(namespace))
    external = alpha_trainjob(namespace)
    external["spec"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    _create(client, external)
    # Consistently, for as long as a reconcile of this TrainJob takes when it does happen (test 1: < 1 s).
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        assert absent(client, JOBSET, "alpha", namespace)
        assert not (get(client, TRAINJOB, "alpha", namespace).get("status") or {}).get("conditions")
        time.sleep(0.25)


def test_3_update_jobset_when_trainjob_is_suspended(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    _create(client, alpha_runtime(namespace))
    _create(client, alpha_trainjob(namespace))
    eventually(lambda: get(client, JOBSET, "alpha", namespace), timeout=20)
    pod_group_before = get(client, POD_GROUP, "alpha", namespace)["spec"]

    patches = get(client, TRAINJOB, "alpha", namespace)["spec"]["runtimePatches"]
    patches.append(
        {
            "manager": "test.io/kueue",
            "trainingRuntimeSpec": {
                "template": {
                    "spec": {
                        "replicatedJobs": [
                            {
                                "name": "node",
                                "template": {
                                    "spec": {"template": {"spec": {"nodeSelector": {"updated": "selector"}}}}
                                },
                            }
                        ]
                    }
                }
            },
        }
    )
    client.patch(TRAINJOB, "alpha", {"spec": {"runtimePatches": patches}}, namespace)

    def selector_applied() -> None:
        jobset = get(client, JOBSET, "alpha", namespace)
        assert pod_spec(jobset, "node").get("nodeSelector") == {"updated": "selector"}

    eventually(selector_applied, timeout=20)
    assert get(client, POD_GROUP, "alpha", namespace)["spec"] == pod_group_before

    # The trainer is immutable (CEL): refused by the API server as Invalid.
    from controller.errors import Invalid

    with pytest.raises(Invalid):
        client.patch(TRAINJOB, "alpha", {"spec": {"trainer": {"image": "test:changed"}}}, namespace)

    # And a patch the TrainJob no longer carries is removed from the JobSet (server-side apply releases
    # the field): what Kueue relies on when it suspends a workload again.
    client.patch(TRAINJOB, "alpha", {"spec": {"runtimePatches": patches[:1]}}, namespace)

    def selector_removed() -> None:
        jobset = get(client, JOBSET, "alpha", namespace)
        assert "nodeSelector" not in pod_spec(jobset, "node")

    eventually(selector_removed, timeout=20)


def test_4_propagate_termination_grace_period_from_runtime_patches(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    _create(
        client,
        runtime(
            namespace,
            "alpha",
            job("node", container(image="test:runtime"), ancestor="trainer"),
            ml_policy={"numNodes": 1},
        ),
    )
    patch = {
        "manager": "test.io/manager",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {
                    "replicatedJobs": [
                        {
                            "name": "node",
                            "template": {
                                "spec": {"template": {"spec": {"terminationGracePeriodSeconds": 300}}}
                            },
                        }
                    ]
                }
            }
        },
    }
    _create(client, trainjob(namespace, "alpha", "alpha", runtimePatches=[patch]))
    jobset = eventually(lambda: get(client, JOBSET, "alpha", namespace), timeout=20)
    assert pod_spec(jobset, "node")["terminationGracePeriodSeconds"] == 300


# --- Torch ----------------------------------------------------------------------------------------------


def test_5_create_trainjob_with_torch_training_runtime(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    _create(client, torch_runtime(namespace))
    _create(
        client,
        trainjob(
            namespace,
            "alpha",
            "alpha",
            trainer={
                "image": "test:trainjob",
                "command": ["trainjob"],
                "args": ["trainjob"],
                "env": [{"name": "TRAIN_JOB", "value": "value"}],
            },
        ),
    )
    jobset = eventually(lambda: get(client, JOBSET, "alpha", namespace), timeout=20)
    assert jobset["spec"]["suspend"] is False
    assert replicated_jobs(jobset)["node"]["template"]["spec"]["parallelism"] == 100
    node = pod_spec(jobset, "node")["containers"][0]
    assert node["ports"] == [{"containerPort": 29500, "protocol": "TCP"}]
    env = _env(pod_spec(jobset, "node"))
    assert [name for name, _ in env] == [
        "TRAIN_JOB",
        "PET_NNODES",
        "PET_NPROC_PER_NODE",
        "PET_NODE_RANK",
        "PET_MASTER_ADDR",
        "PET_MASTER_PORT",
    ]
    values = dict(env)
    assert values["PET_NNODES"] == "100"
    assert values["PET_NPROC_PER_NODE"] == "1"
    assert values["PET_MASTER_ADDR"] == "alpha-node-0-0.alpha"
    assert values["PET_MASTER_PORT"] == "29500"


def _run_to(
    client: Client, namespace: str, eventually: Eventually, jobset_status: Mapping[str, Any]
) -> dict[str, Any]:
    _create(client, alpha_runtime(namespace))
    _create(client, alpha_trainjob(namespace))
    eventually(lambda: get(client, JOBSET, "alpha", namespace), timeout=20)

    def suspended() -> None:
        assert conditions(get(client, TRAINJOB, "alpha", namespace)) == [
            ("Suspended", "True", "Suspended", "TrainJob is suspended")
        ]

    eventually(suspended, timeout=20)
    client.patch(TRAINJOB, "alpha", {"spec": {"suspend": False}}, namespace)

    def resumed() -> None:
        assert conditions(get(client, TRAINJOB, "alpha", namespace)) == [
            ("Suspended", "False", "Resumed", "TrainJob is resumed")
        ]
        assert get(client, JOBSET, "alpha", namespace)["spec"]["suspend"] is False

    eventually(resumed, timeout=20)
    set_jobset_status(client, namespace, "alpha", jobset_status)
    return get(client, TRAINJOB, "alpha", namespace)


@pytest.mark.parametrize(
    ("jobset_condition_", "node", "expected"),
    [
        (
            COMPLETED,
            ("node", 0, 1, 0, 0, 0),
            ("Complete", "True", "AllJobsCompleted", "jobset completed successfully"),
        ),
        (
            FAILED,
            ("node", 0, 0, 1, 0, 0),
            ("Failed", "True", "FailedJobs", "jobset failed due to one or more job failures"),
        ),
    ],
    ids=["6-complete", "7-failed"],
)
def test_6_7_reconcile_conditions_with_complete_and_failed(  # noqa: PLR0917 - fixtures and parameters
    trainer: Any,
    client: Client,
    namespace: str,
    eventually: Eventually,
    jobset_condition_: dict[str, Any],
    node: tuple[str, int, int, int, int, int],
    expected: tuple[str, str, str, str],
) -> None:
    status = jobs_status(("dataset-initializer", 0, 1, 0, 0, 0), ("model-initializer", 0, 1, 0, 0, 0), node)
    _run_to(
        client, namespace, eventually, {"conditions": [jobset_condition_], "replicatedJobsStatus": status}
    )

    def finished() -> None:
        got = get(client, TRAINJOB, "alpha", namespace)
        assert conditions(got) == [("Suspended", "False", "Resumed", "TrainJob is resumed"), expected]
        assert got["status"]["jobsStatus"] == status

    eventually(finished, timeout=20)


_POLICIES = {
    "mpi": {"mpi": {"numProcPerNode": 1}},
    "jax": {"jax": {}},
    "xgboost": {"xgboost": {}},
    "flux": {"flux": {"numProcPerNode": 1}},
}


@pytest.mark.parametrize(
    ("policy", "jobset_condition_", "expected"),
    [
        (policy, condition_, expected)
        for policy in _POLICIES
        for condition_, expected in (
            (COMPLETED, ("Complete", "True", "AllJobsCompleted", "jobset completed successfully")),
            (FAILED, ("Failed", "True", "FailedJobs", "jobset failed due to one or more job failures")),
        )
    ],
    ids=[
        f"{number}-{policy}-{outcome}"
        for policy, numbers in zip(_POLICIES, ((11, 12), (18, 19), (21, 22), (24, 25)), strict=True)
        for number, outcome in zip(numbers, ("complete", "failed"), strict=True)
    ],
)
def test_11_12_18_19_21_22_24_25_conditions_follow_the_jobset_for_every_ml_policy(  # noqa: PLR0917 - fixtures
    trainer: Any,
    client: Client,
    namespace: str,
    eventually: Eventually,
    policy: str,
    jobset_condition_: dict[str, Any],
    expected: tuple[str, str, str, str],
) -> None:
    node = job("node", container(image="test:runtime", resources=REQUESTS), ancestor="trainer")
    _create(client, runtime(namespace, "alpha", node, ml_policy={"numNodes": 1, **_POLICIES[policy]}))
    _create(client, trainjob(namespace, "alpha", "alpha", trainer={"numNodes": 1}))
    eventually(lambda: get(client, JOBSET, "alpha", namespace), timeout=20)
    status = jobs_status(("node", 0, 1, 0, 0, 0))
    set_jobset_status(
        client, namespace, "alpha", {"conditions": [jobset_condition_], "replicatedJobsStatus": status}
    )

    def finished() -> None:
        got = get(client, TRAINJOB, "alpha", namespace)
        assert conditions(got) == [expected]
        assert got["status"]["jobsStatus"] == status

    eventually(finished, timeout=20)


def test_8_synchronize_jobs_status_from_jobset(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    _create(client, alpha_runtime(namespace))
    _create(client, alpha_trainjob(namespace))
    eventually(lambda: get(client, JOBSET, "alpha", namespace), timeout=20)
    for status in (
        jobs_status(("node", 1, 0, 0, 1, 0)),
        jobs_status(("node", 0, 0, 1, 0, 0)),
    ):
        set_jobset_status(client, namespace, "alpha", {"replicatedJobsStatus": status})

        def synced(expected: list[dict[str, Any]] = status) -> None:
            status = get(client, TRAINJOB, "alpha", namespace).get("status") or {}
            assert status.get("jobsStatus") == expected

        eventually(synced, timeout=20)


def test_9_create_trainjob_with_runtime_patches(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    node = job(
        "node",
        container(image="test:runtime", resources=REQUESTS),
        ancestor="trainer",
        initContainers=[
            container(
                "override-init-container",
                image="test:runtime",
                env=[
                    {"name": "INIT_ENV", "value": "original_init"},
                    {"name": "DATASET_PATH", "value": "runtime"},
                ],
            )
        ],
    )
    _create(client, runtime(namespace, "alpha", node, ml_policy={"numNodes": 1, "torch": {}}))
    pod_patch = {
        "metadata": {"labels": {"l1": "v1", "l2": "v2"}, "annotations": {"a1": "v1", "a2": "v2"}},
        "spec": {
            "serviceAccountName": "override-sa",
            "initContainers": [
                {
                    "name": "override-init-container",
                    "env": [
                        {"name": "INIT_ENV", "value": "override_init"},
                        {"name": "NEW_VALUE", "value": "from_overrides"},
                    ],
                }
            ],
        },
    }
    patch = {
        "manager": "test.io/manager",
        "trainingRuntimeSpec": {
            "template": {
                "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": pod_patch}}}]}
            }
        },
    }
    _create(client, trainjob(namespace, "alpha", "alpha", runtimePatches=[patch], trainer={"numNodes": 1}))
    jobset = eventually(lambda: get(client, JOBSET, "alpha", namespace), timeout=20)
    template = replicated_jobs(jobset)["node"]["template"]["spec"]["template"]
    assert {"l1": "v1", "l2": "v2"}.items() <= template["metadata"]["labels"].items()
    assert template["metadata"]["annotations"] == {"a1": "v1", "a2": "v2"}
    assert template["spec"]["serviceAccountName"] == "override-sa"
    assert _env(template["spec"], "override-init-container") == [
        ("INIT_ENV", "override_init"),
        ("NEW_VALUE", "from_overrides"),
        ("DATASET_PATH", "runtime"),
    ]
    assert [n for n, _ in _env(template["spec"])][:1] == ["PET_NNODES"]


# --- OpenMPI ----------------------------------------------------------------------------------------------


def test_10_create_trainjob_with_openmpi_training_runtime(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    launcher = job(
        "launcher",
        container(image="test:runtime", command=["mpirun"], args=["echo.sh"]),
        dependsOn=None,
    )
    launcher["dependsOn"] = [{"name": "node", "status": "Ready"}]
    node = job("node", container(image="test:runtime"), ancestor="trainer")
    mpi = {"numProcPerNode": 8, "mpiImplementation": "OpenMPI", "sshAuthMountPath": "/root/.ssh"}
    _create(client, runtime(namespace, "alpha", launcher, node, ml_policy={"numNodes": 1, "mpi": mpi}))
    created = _create(
        client,
        trainjob(
            namespace, "alpha", "alpha", trainer={"numNodes": 2, "env": [{"name": "TRAIN_JOB", "value": "v"}]}
        ),
    )
    jobset = eventually(lambda: get(client, JOBSET, "alpha", namespace), timeout=20)
    assert replicated_jobs(jobset)["node"]["template"]["spec"]["parallelism"] == 2
    launcher_env = dict(_env(pod_spec(jobset, "launcher")))
    assert launcher_env["OMPI_MCA_orte_set_default_slots"] == "8"
    assert launcher_env["OMPI_MCA_orte_default_hostfile"] == "/etc/mpi/hostfile"

    hostfile = eventually(lambda: get(client, CONFIGMAP, "alpha-mpi-hostfile", namespace), timeout=10)
    assert hostfile["data"]["hostfile"] == "alpha-node-0-0.alpha slots=8\nalpha-node-0-1.alpha slots=8\n"
    secret = get(client, SECRET, "alpha-mpi-ssh-auth", namespace)
    assert secret["type"] == "kubernetes.io/ssh-auth"
    assert secret["immutable"] is True
    assert {"ssh-privatekey", "ssh-publickey"} <= set(secret["data"])
    for obj in (hostfile, secret):
        assert obj["metadata"]["ownerReferences"][0]["uid"] == created["metadata"]["uid"]


# --- Timeouts ---------------------------------------------------------------------------------------------


def _mock_runtime(client: Client) -> None:
    spec = runtime(None, "mock-deadline", job("node", container(image="test:runtime"), ancestor="trainer"))
    try:
        _create(client, spec)
    except Exception as exc:
        if "already exists" not in str(exc):
            raise


def _deadline_exceeded(client: Client, namespace: str) -> bool:
    return any(c[2] == "DeadlineExceeded" for c in conditions(get(client, TRAINJOB, "tj", namespace)))


def test_13_fail_with_deadline_exceeded_when_active_deadline_expires(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    _mock_runtime(client)
    _create(
        client,
        trainjob(namespace, "tj", "mock-deadline", kind="ClusterTrainingRuntime", activeDeadlineSeconds=1),
    )

    def expired() -> None:
        got = get(client, TRAINJOB, "tj", namespace)
        assert ("Failed", "True", "DeadlineExceeded", "TrainJob exceeded its active deadline") in conditions(
            got
        )
        assert absent(client, JOBSET, "tj", namespace)

    eventually(expired, timeout=20)


@pytest.mark.parametrize("suspend", [False, True], ids=["14-not-exceeded", "15-suspended"])
def test_14_15_no_deadline_exceeded_before_the_deadline_or_while_suspended(
    trainer: Any, client: Client, namespace: str, eventually: Eventually, suspend: bool
) -> None:
    _mock_runtime(client)
    seconds = 1 if suspend else 3600
    _create(
        client,
        trainjob(
            namespace,
            "tj",
            "mock-deadline",
            kind="ClusterTrainingRuntime",
            activeDeadlineSeconds=seconds,
            suspend=suspend,
        ),
    )
    eventually(lambda: get(client, JOBSET, "tj", namespace), timeout=20)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        assert not _deadline_exceeded(client, namespace)
        time.sleep(0.25)


def test_16_reset_deadline_timer_upon_resume(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    _mock_runtime(client)
    _create(
        client,
        trainjob(
            namespace,
            "tj",
            "mock-deadline",
            kind="ClusterTrainingRuntime",
            activeDeadlineSeconds=2,
            suspend=True,
        ),
    )
    eventually(lambda: get(client, JOBSET, "tj", namespace), timeout=20)
    time.sleep(2.5)  # longer than the deadline: suspended time does not count
    assert not _deadline_exceeded(client, namespace)
    client.patch(TRAINJOB, "tj", {"spec": {"suspend": False}}, namespace)

    def expired() -> None:
        assert _deadline_exceeded(client, namespace)
        assert absent(client, JOBSET, "tj", namespace)

    eventually(expired, timeout=20)


# --- JAX, XGBoost, Flux -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        (
            {"jax": {}},
            {"JAX_NUM_PROCESSES": "2", "JAX_COORDINATOR_ADDRESS": "alpha-node-0-0.alpha:29500"},
        ),
        (
            {"xgboost": {}},
            {
                "DMLC_TRACKER_URI": "alpha-node-0-0.alpha",
                "DMLC_TRACKER_PORT": "29500",
                "DMLC_NUM_WORKER": "2",
            },
        ),
    ],
    ids=["17-jax", "20-xgboost"],
)
def test_17_20_create_trainjob_with_jax_and_xgboost_runtimes(  # noqa: PLR0917 - fixtures and parameters
    trainer: Any,
    client: Client,
    namespace: str,
    eventually: Eventually,
    policy: dict[str, Any],
    expected: dict[str, str],
) -> None:
    node = job("node", container(image="test:runtime", resources=REQUESTS), ancestor="trainer")
    _create(client, runtime(namespace, "alpha", node, ml_policy={"numNodes": 1, **policy}))
    _create(client, trainjob(namespace, "alpha", "alpha", trainer={"numNodes": 2}))
    jobset = eventually(lambda: get(client, JOBSET, "alpha", namespace), timeout=20)
    assert replicated_jobs(jobset)["node"]["template"]["spec"]["parallelism"] == 2
    env = dict(_env(pod_spec(jobset, "node")))
    assert expected.items() <= env.items()
    assert pod_spec(jobset, "node")["containers"][0]["ports"][0]["containerPort"] == 29500


def test_23_create_trainjob_with_flux_training_runtime(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    node = job("node", container(image="test:runtime", command=["runtime"]), ancestor="trainer")
    _create(
        client, runtime(namespace, "alpha", node, ml_policy={"numNodes": 2, "flux": {"numProcPerNode": 1}})
    )
    _create(
        client,
        trainjob(
            namespace,
            "alpha",
            "alpha",
            trainer={"numNodes": 2, "image": "test:trainjob", "command": ["trainjob"], "args": ["trainjob"]},
        ),
    )
    jobset = eventually(lambda: get(client, JOBSET, "alpha", namespace), timeout=20)
    spec = pod_spec(jobset, "node")
    assert [c["name"] for c in spec["initContainers"]] == ["flux-installer"]
    assert spec["containers"][0]["command"] == [
        "/bin/bash",
        "/etc/flux-config/entrypoint.sh",
        "trainjob trainjob",
    ]
    assert {v["name"] for v in spec["volumes"]} >= {
        "spack-install",
        "flux-install",
        "shared-memory",
        "flux-curve",
    }
    entrypoint = eventually(lambda: get(client, CONFIGMAP, "alpha-flux-entrypoint", namespace), timeout=30)
    assert {"entrypoint.sh", "init.sh"} <= set(entrypoint["data"])
    curve = eventually(lambda: get(client, SECRET, "alpha-flux-curve", namespace), timeout=30)
    assert "curve.cert" in curve["data"]


# --- Runtime snapshots ------------------------------------------------------------------------------------


def test_26_snapshot_configmap_for_a_training_runtime(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    _create(client, alpha_runtime(namespace))
    created = _create(client, alpha_trainjob(namespace))
    snapshot = eventually(lambda: get(client, CONFIGMAP, "alpha-runtime-snapshot", namespace), timeout=20)
    assert snapshot["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "name": "alpha",
            "uid": created["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert "kind: TrainingRuntime" in snapshot["data"]["runtime"]
    assert "name: alpha" in snapshot["data"]["runtime"]


def test_27_snapshot_configmap_for_a_cluster_training_runtime(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    name = f"ctr-{namespace[-12:]}"
    cluster = alpha_runtime("unused", name)
    del cluster["metadata"]["namespace"]
    cluster["kind"] = "ClusterTrainingRuntime"
    _create(client, cluster)
    try:
        tj = alpha_trainjob(namespace, runtime_name=name)
        tj["spec"]["runtimeRef"]["kind"] = "ClusterTrainingRuntime"
        _create(client, tj)
        snapshot = eventually(lambda: get(client, CONFIGMAP, "alpha-runtime-snapshot", namespace), timeout=20)
        assert "kind: ClusterTrainingRuntime" in snapshot["data"]["runtime"]
        assert f"name: {name}" in snapshot["data"]["runtime"]
    finally:
        client.delete(CLUSTER_TRAINING_RUNTIME, name)


def test_28_use_the_snapshot_rather_than_the_current_runtime(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    marked = alpha_runtime(namespace)
    marked["spec"]["template"]["metadata"] = {"labels": {"snapshot-test-marker": "snapshot-v1"}}
    _create(client, marked)
    _create(client, alpha_trainjob(namespace))
    jobset = eventually(lambda: get(client, JOBSET, "alpha", namespace), timeout=20)
    assert jobset["metadata"]["labels"]["snapshot-test-marker"] == "snapshot-v1"
    snapshot_before = get(client, CONFIGMAP, "alpha-runtime-snapshot", namespace)["data"]

    client.patch(
        TRAINING_RUNTIME,
        "alpha",
        {"spec": {"template": {"metadata": {"labels": {"snapshot-test-marker": "snapshot-v2"}}}}},
        namespace,
    )
    client.patch(TRAINJOB, "alpha", {"spec": {"suspend": False}}, namespace)

    def resumed_on_v1() -> None:
        got = get(client, JOBSET, "alpha", namespace)
        assert got["spec"]["suspend"] is False
        assert got["metadata"]["labels"]["snapshot-test-marker"] == "snapshot-v1"

    eventually(resumed_on_v1, timeout=20)
    assert get(client, CONFIGMAP, "alpha-runtime-snapshot", namespace)["data"] == snapshot_before


def test_29_create_snapshots_for_pre_existing_trainjobs(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    _create(client, alpha_runtime(namespace))
    _create(client, alpha_trainjob(namespace))
    eventually(lambda: get(client, CONFIGMAP, "alpha-runtime-snapshot", namespace), timeout=20)
    client.delete(CONFIGMAP, "alpha-runtime-snapshot", namespace)
    client.patch(TRAINJOB, "alpha", {"metadata": {"annotations": {"touch": "1"}}}, namespace)
    snapshot = eventually(lambda: get(client, CONFIGMAP, "alpha-runtime-snapshot", namespace), timeout=20)
    assert "runtime" in snapshot["data"]


# --- what the port adds -----------------------------------------------------------------------------------


def test_a_trainjob_created_before_its_runtime_is_reconciled_when_the_runtime_appears(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    _create(client, alpha_trainjob(namespace))

    def failed_often() -> None:
        # The Warning event's count is the number of failed reconciles. After 12, the per-item backoff
        # (5 ms doubling) is past 10 s: a JobSet within 5 s of the runtime's creation is not the retry.
        events = [
            e for e in client.list(EVENT, namespace).items if e["reason"] == "TrainJobResourcesCreationFailed"
        ]
        assert events and events[0].get("count", 1) >= 12, [e.get("count") for e in events]

    # 12 failures take about 10 s of backoff; the rest is a loaded machine's slack.
    eventually(failed_often, timeout=120, interval=0.5)
    _create(client, alpha_runtime(namespace))
    eventually(lambda: get(client, JOBSET, "alpha", namespace), timeout=5)


def test_a_burst_of_trainjobs_is_reconciled_without_a_single_error(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    # Upstream reads the JobSet it has just applied from its cache, which has not seen it: about a third of
    # its reconciles in a burst fail with NotFound. Here the status step reads what the apply returned. The
    # metric has no namespace, so count the reason only a burst could produce (other modules' TrainJobs fail
    # for their own reasons meanwhile), and the Warning events of this namespace.
    from controller.metrics import REGISTRY

    def status_failures() -> float:
        value = REGISTRY.get_sample_value(
            "kubeflow_trainer_reconcile_failures_total", {"reason": "JobSetStatusFailed"}
        )
        return value or 0.0

    _create(client, torch_runtime(namespace))
    before = status_failures()
    names = [f"burst-{i}" for i in range(30)]
    for name in names:
        _create(client, trainjob(namespace, name, "alpha", trainer={"numNodes": 2}))

    def all_jobsets() -> None:
        have = {j["metadata"]["name"] for j in client.list(JOBSET, namespace).items}
        assert set(names) <= have, sorted(set(names) - have)

    eventually(all_jobsets, timeout=60, interval=0.5)
    assert status_failures() == before
    warnings = [e["message"] for e in client.list(EVENT, namespace).items if e["type"] == "Warning"]
    assert warnings == []


def test_an_unsupported_runtime_kind_is_a_persisted_failure(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    odd = trainjob(namespace, "odd", "whatever", kind="SomethingElse")

    def failed() -> None:
        assert conditions(get(client, TRAINJOB, "odd", namespace)) == [
            (
                "Failed",
                "True",
                "TrainingRuntimeNotSupported",
                "unsupported runtime: SomethingElse.trainer.kubeflow.org",
            )
        ]

    _create(client, odd)
    eventually(failed, timeout=20)
    assert absent(client, JOBSET, "odd", namespace)


def test_a_tampered_snapshot_fails_only_its_trainjob_with_a_warning(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    _create(client, alpha_runtime(namespace))
    _create(client, alpha_trainjob(namespace))
    eventually(lambda: get(client, JOBSET, "alpha", namespace), timeout=20)
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)
    )
    client.patch(CONFIGMAP, "alpha-runtime-snapshot", {"data": {"runtime": bomb}}, namespace)
    client.patch(TRAINJOB, "alpha", {"metadata": {"annotations": {"touch": "1"}}}, namespace)

    def warned() -> None:
        events = [
            e
            for e in client.list(EVENT, namespace).items
            if e["reason"] == "TrainJobResourcesCreationFailed" and "snapshot" in e["message"]
        ]
        assert events, "no warning about the snapshot yet"
        assert len(events[0]["message"]) < 1100

    eventually(warned, timeout=20)
    # The manager is alive and serves other TrainJobs.
    _create(client, alpha_trainjob(namespace, name="beta"))
    eventually(lambda: get(client, JOBSET, "beta", namespace), timeout=20)


def _apiserver_writes(control_plane: ControlPlane) -> dict[str, float]:
    """The API server's own count of successful writes, by resource (`apiserver_request_total`)."""
    body = control_plane.admin_request("GET", "/metrics").body
    text = body.decode() if isinstance(body, bytes) else str(body)
    writes: dict[str, float] = {}
    pattern = re.compile(r"^apiserver_request_total\{([^}]*)\} ([0-9.e+]+)$")
    for line in text.splitlines():
        match = pattern.match(line)
        if not match:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group(1)))
        # Successful writes only: TrainJobs of earlier tests live on in namespaces that Tier 1 (no namespace
        # controller) leaves Terminating, and their retried applies are refused there (403) meanwhile.
        successful = labels.get("code", "").startswith("2")
        if successful and labels.get("verb") in _WRITE_VERBS:
            key = labels.get("resource", "") + (
                "/" + labels["subresource"] if labels.get("subresource") else ""
            )
            writes[key] = writes.get(key, 0.0) + float(match.group(2))
    return writes


@pytest.mark.parametrize("suspend", [True, False], ids=["suspended", "running"])
def test_a_steady_state_reconcile_makes_no_write(  # noqa: PLR0917 - fixtures and parameters
    trainer: Any,
    client: Client,
    namespace: str,
    eventually: Eventually,
    control_plane: ControlPlane,
    suspend: bool,
) -> None:
    launcher = job("launcher", container(image="test:runtime"))
    node = job("node", container(image="test:runtime"), ancestor="trainer")
    _create(client, runtime(namespace, "mpi", launcher, node, ml_policy={"numNodes": 1, "mpi": {}}))
    _create(client, trainjob(namespace, "alpha", "mpi", suspend=suspend, trainer={"numNodes": 2}))
    eventually(lambda: get(client, CONFIGMAP, "alpha-mpi-hostfile", namespace), timeout=20)

    def settled() -> None:
        got = get(client, TRAINJOB, "alpha", namespace)
        if suspend:
            assert conditions(got)
        trainer.controllers.trainjob.reconcile(Request(namespace=namespace, name="alpha"))
        events_before = _events(client, namespace)
        before = _apiserver_writes(control_plane)
        for _ in range(3):
            trainer.controllers.trainjob.reconcile(Request(namespace=namespace, name="alpha"))
        after = _apiserver_writes(control_plane)
        ours = {
            k: after[k] - before.get(k, 0) for k in after if k in _WATCHED and after[k] != before.get(k, 0)
        }
        assert ours == {}
        assert _events(client, namespace) == events_before

    eventually(settled, timeout=20)


_WRITE_VERBS = ("POST", "PUT", "PATCH", "APPLY", "DELETE", "CREATE", "UPDATE")
_WATCHED = {"jobsets", "configmaps", "secrets", "trainjobs", "trainjobs/status", "podgroups"}
# Not "events": earlier tests' TrainJobs keep failing in Terminating namespaces, and the recorder's patches of
# their existing events succeed there. This test's own events are compared in its namespace instead.


def _events(client: Client, namespace: str) -> dict[str, int]:
    return {e["metadata"]["name"]: e.get("count", 1) for e in client.list(EVENT, namespace).items}


def test_no_configmap_or_secret_without_our_label_enters_the_cache(
    trainer: Any, client: Client, namespace: str, eventually: Eventually
) -> None:
    client.create(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "foreign", "namespace": namespace}},
        field_manager=USER,
    )
    client.create(
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "foreign", "namespace": namespace}},
        field_manager=USER,
    )
    _create(client, alpha_runtime(namespace))
    _create(client, alpha_trainjob(namespace))
    eventually(lambda: get(client, JOBSET, "alpha", namespace), timeout=20)
    informers = trainer.manager.cache.informers()  # type: ignore[attr-defined]
    label = "trainer.kubeflow.org/trainjob-name"
    for gvk in (CONFIGMAP, SECRET):
        cached = informers[gvk].get_store().list()
        assert all(label in (o["metadata"].get("labels") or {}) for o in cached), gvk
    snapshots = [o["metadata"]["name"] for o in informers[CONFIGMAP].get_store().list()]
    assert "foreign" not in snapshots


def test_metrics_show_the_trainer_families(trainer: Any, client: Client, namespace: str) -> None:
    host, port = trainer.manager.metrics_address  # type: ignore[misc]
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=5) as response:
        body = response.read().decode()
    assert 'controller_runtime_max_concurrent_reconciles{controller="trainjob_controller"} 5.0' in body
    assert "kubeflow_trainer_trainjobs" in body
    assert "kubeflow_trainer_trainjob_jobset_creation_seconds" in body
