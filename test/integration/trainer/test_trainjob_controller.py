"""The TrainJob controller against a real kube-apiserver: upstream's scenarios (upstream
`test/integration/controller/trainjob_controller_test.go`), for the objects and conditions of every ML
policy. The active deadline, the runtime snapshots and what the port adds have modules of their own
(`test_trainjob_controller_*.py`).

The manager runs in this process exactly as in production (its informers, five TrainJob workers, leader
election). Tier 1 has no JobSet controller and no garbage collector: the tests write JobSet status.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import pytest

from controller.client.client import Client
from support import trainer_objects as _objects

CONFIGMAP = _objects.CONFIGMAP
JOBSET = _objects.JOBSET
POD_GROUP = _objects.POD_GROUP
REQUESTS = _objects.REQUESTS
SECRET = _objects.SECRET
TRAINJOB = _objects.TRAINJOB
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
torch_runtime = _objects.torch_runtime
trainjob = _objects.trainjob
_create = _objects.create

pytestmark = pytest.mark.allow_thread_leaks

COMPLETED = jobset_condition("Completed", "AllJobsCompleted", "jobset completed successfully")
FAILED = jobset_condition("Failed", "FailedJobs", "jobset failed due to one or more job failures")


def _env(pod: Mapping[str, Any], container_name: str = "node") -> list[tuple[str, Any]]:
    for c in pod.get("containers", []) + pod.get("initContainers", []):
        if c["name"] == container_name:
            return [(e["name"], e.get("value", e.get("valueFrom"))) for e in c.get("env") or []]
    raise AssertionError(f"no container {container_name}")


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
    from controller.client.errors import Invalid

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
