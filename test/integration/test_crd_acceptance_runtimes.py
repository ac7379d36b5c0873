"""CRD acceptance of (Cluster)TrainingRuntimes against a real kube-apiserver (Tier 1): what the schema and
CEL accept, default and refuse, as upstream's trainingruntime and clustertrainingruntime webhook tests (the
CRD half) for upstream v2.3.0's CRDs. With no webhook installed every rejection is the CRD's: HTTP 422
`Invalid`. The official `kubernetes` client is the HTTP client, as the Kubeflow Python SDK uses it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from support.crd_acceptance import (
    ANCESTOR,
    GROUP,
    VERSION,
    Trainer,
    expect_invalid,
    mpi_runtime,
    torch_runtime,
)

pytest_plugins = ("support.crd_acceptance",)


# -- runtimes (upstream: trainingruntime/clustertrainingruntime webhook tests)


def test_a_torch_distributed_cluster_training_runtime_is_accepted(
    trainer: Trainer, cluster_names: Callable[[str], str]
) -> None:
    # Upstream: "Should succeed to create ClusterTrainingRuntime".
    name = cluster_names("torch-distributed")
    trainer.create(torch_runtime("ClusterTrainingRuntime", name))
    got = trainer.get("ClusterTrainingRuntime", name)
    jobs = got["spec"]["template"]["spec"]["replicatedJobs"]
    assert [job["name"] for job in jobs] == ["dataset-initializer", "model-initializer", "node"]
    # JobSet's own schema defaults apply inside the embedded template.
    assert [(job["replicas"], job["groupName"]) for job in jobs] == [(1, "default")] * 3
    # Template metadata is typed, not pruned: the ancestor label survives.
    assert jobs[2]["template"]["metadata"]["labels"] == {ANCESTOR: "trainer"}
    # Quantities stay as written (an integer stays an integer).
    limits = jobs[2]["template"]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"cpu": 2, "memory": "4Gi"}


def test_a_training_runtime_is_accepted(trainer: Trainer, namespace: str) -> None:
    # Upstream: "Should succeed to create TrainingRuntime".
    created = trainer.create(torch_runtime("TrainingRuntime", "torch"), namespace)
    assert created["spec"]["mlPolicy"] == {"numNodes": 1, "torch": {}}


def test_an_mpi_runtime_gets_upstreams_mpi_defaults(trainer: Trainer, namespace: str) -> None:
    # Upstream cases 43-46: mpiImplementation, sshAuthMountPath, runLauncherAsNode, numProcPerNode defaulted.
    created = trainer.create(mpi_runtime("deepspeed"), namespace)
    assert created["spec"]["mlPolicy"]["mpi"] == {
        "mpiImplementation": "OpenMPI",
        "numProcPerNode": 1,
        "runLauncherAsNode": False,
        "sshAuthMountPath": "/root/.ssh",
    }
    assert created["spec"]["template"]["spec"]["successPolicy"]["targetReplicatedJobs"] == ["launcher"]


def test_explicit_mpi_values_are_kept(trainer: Trainer, namespace: str) -> None:
    created = trainer.create(
        mpi_runtime("mpi", numProcPerNode=4, sshAuthMountPath="/home/mpiuser/.ssh", runLauncherAsNode=True),
        namespace,
    )
    mpi = created["spec"]["mlPolicy"]["mpi"]
    assert (mpi["numProcPerNode"], mpi["sshAuthMountPath"], mpi["runLauncherAsNode"]) == (
        4,
        "/home/mpiuser/.ssh",
        True,
    )


POLICY_COMBINATIONS = {
    "mpi and torch": {"mpi": {}, "torch": {}},
    "jax and torch": {"jax": {}, "torch": {}},
    "torch and flux": {"torch": {}, "flux": {}},
    "mpi and flux": {"mpi": {}, "flux": {}},
    "jax and flux": {"jax": {}, "flux": {}},
    "jax and mpi": {"jax": {}, "mpi": {}},
    "all four": {"torch": {}, "mpi": {}, "jax": {}, "flux": {}},
    "xgboost and torch": {"xgboost": {}, "torch": {}},
}


@pytest.mark.parametrize("policies", POLICY_COMBINATIONS.values(), ids=POLICY_COMBINATIONS.keys())
def test_two_or_more_ml_policies_are_invalid(
    trainer: Trainer, namespace: str, policies: dict[str, Any]
) -> None:
    # Upstream cases 34-40.
    runtime = torch_runtime("TrainingRuntime", "too-many")
    runtime["spec"]["mlPolicy"] = {"numNodes": 1, **policies}
    expect_invalid(lambda: trainer.create(runtime, namespace), "Only one of the policy can be configured")


def test_an_unknown_mpi_implementation_is_invalid(trainer: Trainer, namespace: str) -> None:
    # Upstream case 41.
    expect_invalid(
        lambda: trainer.create(mpi_runtime("bad-mpi", mpiImplementation="invalid"), namespace),
        "spec.mlPolicy.mpi.mpiImplementation",
        "Unsupported value",
    )


def test_intel_mpi_is_refused_by_the_enum_although_go_defines_it(trainer: Trainer, namespace: str) -> None:
    expect_invalid(
        lambda: trainer.create(mpi_runtime("intel", mpiImplementation="Intel"), namespace), "Unsupported"
    )


def test_mpi_num_proc_per_node_has_no_bound_as_in_upstream_v2_3(trainer: Trainer, namespace: str) -> None:
    # The CEL rule `self >= 1` (upstream case 42) came after v2.3.0; its CRD accepts 0, and so does ours.
    data, status, _ = trainer.create_with_status(mpi_runtime("zero-procs", numProcPerNode=0), namespace)
    assert (status, data["spec"]["mlPolicy"]["mpi"]["numProcPerNode"]) == (201, 0)


def test_flux_num_proc_per_node_zero_is_invalid_and_one_is_the_default(
    trainer: Trainer, namespace: str
) -> None:
    runtime = torch_runtime("TrainingRuntime", "flux")
    runtime["spec"]["mlPolicy"] = {"numNodes": 1, "flux": {"numProcPerNode": 0}}
    expect_invalid(lambda: trainer.create(runtime, namespace), "NumProcPerNode in fluxPolicy must be >= 1")
    runtime["spec"]["mlPolicy"]["flux"] = {}
    assert trainer.create(runtime, namespace)["spec"]["mlPolicy"]["flux"] == {"numProcPerNode": 1}


def test_torch_env_injection_may_not_target_the_node_container(trainer: Trainer, namespace: str) -> None:
    runtime = torch_runtime("TrainingRuntime", "inject")
    targets = [{"jobName": "node", "containerNames": ["sidecar", "node"]}]
    runtime["spec"]["mlPolicy"]["torch"] = {"envInjection": {"targets": targets}}
    expect_invalid(
        lambda: trainer.create(runtime, namespace),
        "containerNames must not include the main node container because PET_* envs are always "
        "injected into it",
    )
    targets[0]["containerNames"] = ["sidecar"]
    created = trainer.create(runtime, namespace)
    assert created["spec"]["mlPolicy"]["torch"]["envInjection"]["targets"] == targets


def test_pod_group_policies_get_their_defaults(trainer: Trainer, namespace: str) -> None:
    runtime = torch_runtime("TrainingRuntime", "gang")
    runtime["spec"]["podGroupPolicy"] = {"coscheduling": {}}
    assert trainer.create(runtime, namespace)["spec"]["podGroupPolicy"] == {
        "coscheduling": {"scheduleTimeoutSeconds": 60}
    }
    runtime["metadata"]["name"] = "volcano"
    runtime["spec"]["podGroupPolicy"] = {"volcano": {"networkTopology": {}}}
    assert trainer.create(runtime, namespace)["spec"]["podGroupPolicy"] == {
        "volcano": {"networkTopology": {"highestTierAllowed": 1, "mode": "hard"}}
    }


def test_an_empty_runtime_spec_is_invalid(trainer: Trainer, namespace: str) -> None:
    runtime = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "TrainingRuntime", "metadata": {"name": "empty"}}
    runtime["spec"] = {}
    expect_invalid(lambda: trainer.create(runtime, namespace), "spec", "at least 1 properties")


def test_embedded_jobset_rules_apply_inside_a_runtime(trainer: Trainer, namespace: str) -> None:
    runtime = torch_runtime("TrainingRuntime", "startup")
    runtime["spec"]["template"]["spec"]["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
    expect_invalid(
        lambda: trainer.create(runtime, namespace), "StartupPolicy and DependsOn APIs are mutually exclusive"
    )


def test_server_side_apply_merges_runtime_containers_and_envs_by_name(
    trainer: Trainer, namespace: str
) -> None:
    # The embedded pod template keeps its list-map keys, so two managers' entries merge instead of replacing.
    runtime = torch_runtime("TrainingRuntime", "merged")
    node = runtime["spec"]["template"]["spec"]["replicatedJobs"][2]
    node["template"]["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "A", "value": "1"}]
    trainer.apply(runtime, namespace, "team-a")
    second = copy.deepcopy(runtime)
    second_node = second["spec"]["template"]["spec"]["replicatedJobs"][2]
    second_node["template"]["spec"]["template"]["spec"]["containers"] = [
        {"name": "node", "env": [{"name": "B", "value": "2"}]},
        {"name": "sidecar", "image": "busybox"},
    ]
    second["spec"] = {"template": {"spec": {"replicatedJobs": [second_node]}}}
    merged = trainer.apply(second, namespace, "team-b")
    jobs = {job["name"]: job for job in merged["spec"]["template"]["spec"]["replicatedJobs"]}
    assert sorted(jobs) == ["dataset-initializer", "model-initializer", "node"]
    containers = {c["name"]: c for c in jobs["node"]["template"]["spec"]["template"]["spec"]["containers"]}
    assert sorted(containers) == ["node", "sidecar"]
    assert containers["node"]["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert containers["node"]["image"] == "pytorch/pytorch:2.7.1-cuda12.8-cudnn9-runtime"
