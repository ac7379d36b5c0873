"""The XGBoost plugin: reserved DMLC_* envs, and the tracker/worker environment on the trainer container."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.framework import FieldError, Validation
from runtime.plugins.xgboost import XGBoost


def _spec(make: Any, ml_policy: dict[str, Any] | None = None, **node: Any) -> Any:
    return make.runtime_spec(
        make.job("node", ancestor="trainer", containers=[make.container(**node)]),
        ml_policy={"numNodes": 1, "xgboost": {}} if ml_policy is None else ml_policy,
    )


def _expected(name: str, workers: int) -> dict[str, Any]:
    return {
        "name": "node",
        "env": [
            {"name": "DMLC_TRACKER_URI", "value": f"{name}-node-0-0.{name}"},
            {"name": "DMLC_TRACKER_PORT", "value": "29500"},
            {
                "name": "DMLC_TASK_ID",
                "valueFrom": {
                    "fieldRef": {
                        "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"
                    }
                },
            },
            {"name": "DMLC_NUM_WORKER", "value": str(workers)},
        ],
        "ports": [{"containerPort": 29500}],
    }


# CustomValidation (upstream TestXGBoostValidate) ----------------------------------------------------------


def _validate(make: Any, spec: Any, trainer: dict[str, Any] | None) -> Validation:
    trainjob = make.trainjob("test-job", trainer=trainer)
    return XGBoost().validate(make.info(trainjob, spec), None, trainjob, make.reader())


def test_validation_ignores_runtimes_that_are_not_xgboost(make: Any) -> None:
    # upstream: "no error when runtime is not XGBoost (e.g. Torch)"
    trainer = {"numNodes": 1, "env": [{"name": "DMLC_TRACKER_URI", "value": "custom-tracker"}]}
    assert _validate(make, _spec(make, ml_policy={"torch": {}}), trainer) == Validation()


@pytest.mark.parametrize(
    "trainer",
    [None, {"numNodes": 1}],
    ids=["no error when trainer is nil", "no error when env does not contain reserved names"],
)
def test_validation_accepts_trainjobs_without_reserved_envs(
    make: Any, trainer: dict[str, Any] | None
) -> None:
    assert _validate(make, _spec(make), trainer) == Validation()


@pytest.mark.parametrize(
    ("env", "errors"),
    [
        # upstream: "error when using reserved DMLC_TRACKER_URI env"
        (
            [{"name": "DMLC_TRACKER_URI", "value": "custom-tracker"}],
            [
                FieldError.forbidden(
                    "spec.trainer.env[0]", "DMLC_TRACKER_URI is reserved for the XGBoost runtime"
                )
            ],
        ),
        # upstream: "error when using reserved DMLC_NUM_WORKER env"
        (
            [{"name": "DMLC_NUM_WORKER", "value": "10"}],
            [
                FieldError.forbidden(
                    "spec.trainer.env[0]", "DMLC_NUM_WORKER is reserved for the XGBoost runtime"
                )
            ],
        ),
        # upstream: "multiple errors when using multiple reserved envs"
        (
            [
                {"name": "DMLC_TRACKER_URI", "value": "custom"},
                {"name": "OK", "value": "1"},
                {"name": "DMLC_TASK_ID", "value": "0"},
            ],
            [
                FieldError.forbidden(
                    "spec.trainer.env[0]", "DMLC_TRACKER_URI is reserved for the XGBoost runtime"
                ),
                FieldError.forbidden(
                    "spec.trainer.env[2]", "DMLC_TASK_ID is reserved for the XGBoost runtime"
                ),
            ],
        ),
    ],
    ids=["tracker uri", "num worker", "several"],
)
def test_validation_forbids_each_reserved_env(make: Any, env: list[Any], errors: list[FieldError]) -> None:
    assert _validate(make, _spec(make), {"numNodes": 1, "env": env}) == Validation.of(errors)


# EnforceMLPolicy (upstream TestXGBoostEnforceMLPolicy) ----------------------------------------------------


@pytest.mark.parametrize(
    "ml_policy", [{"numNodes": 1}, {"numNodes": 1, "jax": {}}], ids=["no source", "another source"]
)
def test_no_action_without_an_xgboost_policy(make: Any, ml_policy: dict[str, Any]) -> None:
    # upstream: "no action when mlPolicySource is nil", "no action when mlPolicySource XGBoost is null"
    trainjob = make.trainjob("test-job", trainer={"numNodes": 4})
    info = make.info(trainjob, _spec(make, ml_policy=ml_policy))
    XGBoost().enforce_ml_policy(info, trainjob)
    assert info.pod_sets[0].containers[0].obj == {"name": "node"}


def test_no_env_injection_without_a_trainer_section(make: Any) -> None:
    # upstream: "no env injection when trainJob.Spec.Trainer is nil"
    trainjob = make.trainjob("test-job")
    info = make.info(trainjob, _spec(make))
    XGBoost().enforce_ml_policy(info, trainjob)
    assert info.pod_sets[0].containers[0].obj == {"name": "node"}


@pytest.mark.parametrize(
    ("num_nodes", "trainjob_resources", "runtime_resources", "workers"),
    [
        # upstream: "single node XGBoost training (CPU)"
        (1, None, None, 1),
        # upstream: "multi-node XGBoost training (CPU)", "trainJob numNodes is respected"
        (2, None, None, 2),
        # upstream: "XGBoost training with GPU resources"
        (2, {"limits": {"nvidia.com/gpu": "4"}}, None, 8),
        # upstream: "resources not set - defaults to 1 worker per node"
        (4, {}, None, 4),
        # upstream: "resources set in Runtime only"
        (3, None, {"requests": {"example.com/gpu": "2"}}, 6),
        # upstream: "resources set in TrainJob only"
        (2, {"requests": {"nvidia.com/gpu": "3"}}, None, 6),
        # upstream: "resources set in both Runtime and TrainJob" (the TrainJob wins)
        (2, {"limits": {"nvidia.com/gpu": "1"}}, {"limits": {"nvidia.com/gpu": "8"}}, 2),
    ],
    ids=["single cpu", "multi cpu", "gpus", "no resources", "runtime only", "trainjob only", "both"],
)
def test_workers_are_nodes_times_gpus_per_node(
    make: Any,
    num_nodes: int,
    trainjob_resources: dict[str, Any] | None,
    runtime_resources: dict[str, Any] | None,
    workers: int,
) -> None:
    trainer: dict[str, Any] = {"numNodes": num_nodes}
    if trainjob_resources is not None:
        trainer["resourcesPerNode"] = trainjob_resources
    trainjob = make.trainjob("runtime-res-job", trainer=trainer)
    node = {} if runtime_resources is None else {"resources": runtime_resources}
    info = make.info(trainjob, _spec(make, **node))
    XGBoost().enforce_ml_policy(info, trainjob)
    assert info.pod_sets[0].count == num_nodes
    container = dict(info.pod_sets[0].containers[0].obj)
    container.pop("resources", None)
    assert container == _expected("runtime-res-job", workers)
