"""The JAX plugin: JAX_* envs and the coordinator port on the trainer container."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.plugins.jax import JAX


def _node_spec(make: Any, *, parallelism: int | None = None, **node: Any) -> Any:
    return make.runtime_spec(
        make.job("node", ancestor="trainer", parallelism=parallelism, containers=[make.container(**node)]),
        ml_policy={"jax": {}},
    )


def _expected(name: str, processes: int) -> dict[str, Any]:
    return {
        "name": "node",
        "env": [
            {"name": "JAX_NUM_PROCESSES", "value": str(processes)},
            {
                "name": "JAX_PROCESS_ID",
                "valueFrom": {
                    "fieldRef": {
                        "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"
                    }
                },
            },
            {"name": "JAX_COORDINATOR_ADDRESS", "value": f"{name}-node-0-0.{name}:29500"},
        ],
        "ports": [{"containerPort": 29500}],
    }


@pytest.mark.parametrize(
    "ml_policy", [None, {"numNodes": 1}, {"torch": {}}], ids=["no policy", "no source", "torch source"]
)
def test_no_action_without_a_jax_policy(make: Any, ml_policy: dict[str, Any] | None) -> None:
    # upstream: "no action when mlPolicySource is nil", "no action when mlPolicySource JAX is null"
    trainjob = make.trainjob("test-job", trainer={"numNodes": 3})
    spec = make.runtime_spec(
        make.job("node", ancestor="trainer", containers=[make.container()]), ml_policy=ml_policy
    )
    info = make.info(trainjob, spec)
    JAX().enforce_ml_policy(info, trainjob)
    assert info.pod_sets[0].containers[0].obj == {"name": "node"}


def test_no_failure_when_the_trainer_pod_set_is_absent(make: Any) -> None:
    # upstream: "no panic when JAX policy is set but trainer PodSet is absent"
    trainjob = make.trainjob("test-job", trainer={"numNodes": 2})
    info = make.info(trainjob, make.runtime_spec(make.job("other"), ml_policy={"jax": {}}))
    JAX().enforce_ml_policy(info, trainjob)
    assert info.pod_sets[0].pod_spec == {"containers": []}


def test_single_node_jax_training(make: Any) -> None:
    # upstream: "single node JAX training"
    trainjob = make.trainjob("test-job", trainer={"numNodes": 1})
    info = make.info(trainjob, _node_spec(make))
    JAX().enforce_ml_policy(info, trainjob)
    assert info.pod_sets[0].count == 1
    assert info.pod_sets[0].containers[0].obj == _expected("test-job", 1)


def test_multi_node_jax_training(make: Any) -> None:
    # upstream: "multi-node JAX training" and "trainJob numNodes is respected"
    trainjob = make.trainjob("trainJob", trainer={"numNodes": 3})
    info = make.info(trainjob, _node_spec(make, parallelism=2))
    JAX().enforce_ml_policy(info, trainjob)
    assert info.pod_sets[0].count == 3
    assert info.pod_sets[0].containers[0].obj == _expected("trainJob", 3)


def test_jax_training_with_gpus_still_runs_one_process_per_node(make: Any) -> None:
    # upstream: "JAX training with GPU resources"
    resources = {"limits": {"nvidia.com/gpu": "4", "cpu": "8"}}
    trainjob = make.trainjob("gpu-job", trainer={"numNodes": 2, "resourcesPerNode": resources})
    info = make.info(trainjob, _node_spec(make))
    JAX().enforce_ml_policy(info, trainjob)
    assert info.pod_sets[0].containers[0].obj == {**_expected("gpu-job", 2), "resources": resources}


def test_a_trainjob_without_a_trainer_section_gets_the_runtime_as_written(make: Any) -> None:
    # As upstream: the envs and the port come only with spec.trainer.
    trainjob = make.trainjob("test-job")
    info = make.info(trainjob, _node_spec(make, parallelism=2))
    JAX().enforce_ml_policy(info, trainjob)
    assert info.pod_sets[0].count == 1  # mlPolicy.numNodes, absent: 1
    assert info.pod_sets[0].containers[0].obj == {"name": "node"}


def test_envs_replace_same_named_runtime_envs_in_place(make: Any) -> None:
    trainjob = make.trainjob("test-job", trainer={})
    stale = [{"name": "JAX_COORDINATOR_ADDRESS", "value": "stale"}, {"name": "KEEP", "value": "1"}]
    info = make.info(trainjob, _node_spec(make, env=stale))
    JAX().enforce_ml_policy(info, trainjob)
    assert [e["name"] for e in info.pod_sets[0].containers[0].env] == [
        "JAX_COORDINATOR_ADDRESS",
        "KEEP",
        "JAX_NUM_PROCESSES",
        "JAX_PROCESS_ID",
    ]
    assert info.pod_sets[0].containers[0].env[0]["value"] == "test-job-node-0-0.test-job:29500"
