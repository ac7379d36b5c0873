"""The PlainML plugin (upstream `plainml_test.go`, TestPlainML)."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.info import build_info
from runtime.plugins.plainml import PlainML
from runtime.testing import Make

PLUGIN = PlainML()


@pytest.fixture
def make() -> Make:
    """The builders with the core-runtime tables' defaults (`Make()`: the TrainJob `default/test-job` on the
    TrainingRuntime `test-runtime`), which these cases were written against, not the plugin tables' ones of
    this directory's conftest."""
    return Make()


def _trainer_env(
    make: Make, trainjob: dict[str, Any], ml_policy: dict[str, Any] | None
) -> tuple[int, list[Any]]:
    node = make.container("node", env=[make.env("RUNTIME", "1"), make.env("SHARED", "runtime")])
    jobs = [make.job("node", ancestor="trainer", containers=[node])]
    info = build_info(trainjob, make.runtime_spec(*jobs, ml_policy=ml_policy))
    PLUGIN.enforce_ml_policy(info, trainjob)
    pod_set = info.pod_sets[0]
    return pod_set.count, list(pod_set.containers[0].env)


@pytest.mark.parametrize(
    "policy",
    [
        {"torch": {}},  # upstream "no action when mlPolicySource torch is not null"
        {"mpi": {}},  # upstream "no action when mlPolicySource mpi is not null"
        {"jax": {}},  # upstream "no action when mlPolicySource jax is not null"
    ],
)
def test_no_action_under_a_torch_mpi_or_jax_policy(make: Make, policy: dict[str, Any]) -> None:
    trainjob = make.trainjob(trainer={"numNodes": 5, "env": [make.env("NEW", "x")]})
    count, env = _trainer_env(make, trainjob, policy)
    assert count == 1
    assert env == [make.env("RUNTIME", "1"), make.env("SHARED", "runtime")]


@pytest.mark.parametrize("policy", [None, {"numNodes": 2}, {"xgboost": {}}, {"flux": {}}])
def test_trainjob_num_nodes_and_env_are_respected(make: Make, policy: dict[str, Any] | None) -> None:
    # upstream "trainJob trainer numNodes are respected rather than runtimeInfo" and "trainJob trainer env are
    # respected rather than runtimeInfo"
    trainjob = make.trainjob(
        trainer={"numNodes": 30, "env": [make.env("SHARED", "trainjob"), make.env("NEW", "x")]}
    )
    count, env = _trainer_env(make, trainjob, policy)
    assert count == 30
    assert env == [make.env("RUNTIME", "1"), make.env("SHARED", "trainjob"), make.env("NEW", "x")]


def test_without_spec_trainer_nothing_changes(make: Make) -> None:
    count, env = _trainer_env(make, make.trainjob(), {"numNodes": 3})
    assert count == 3
    assert env == [make.env("RUNTIME", "1"), make.env("SHARED", "runtime")]
