"""The TrainingRuntime / ClusterTrainingRuntime webhook rules (runtime.core.runtime_rules), as behaviour:
upstream's pkg/webhooks/trainingruntime_webhook_test.go (TestValidateReplicatedJobs) and
clustertrainingruntime_webhook_test.go (TestClusterTrainingRuntimeValidateCreate)."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.api import constants
from runtime.core.runtime_rules import (
    validate_cluster_training_runtime,
    validate_replicated_jobs,
    validate_training_runtime,
)
from runtime.testing import Make

make = Make()
JOBS = "spec.template.spec.replicatedJobs"


def runtime_with(
    *jobs: dict[str, Any], kind: str = constants.TRAINING_RUNTIME_KIND, **kw: Any
) -> dict[str, Any]:
    return make.runtime(make.runtime_spec(*jobs), kind=kind, **kw)


def launcher_and_default_jobs(replicas: int) -> list[dict[str, Any]]:
    jobs = [make.job("launcher", ancestor="launcher-step", containers=[make.container("launcher")])]
    for job in make.default_jobs():
        job["replicas"] = replicas
        jobs.append(job)
    return jobs


def paths(runtime: dict[str, Any]) -> list[str]:
    return [e.path for e in validate_replicated_jobs(runtime)]


def test_valid_replicated_jobs_have_no_errors() -> None:
    # upstream: "valid replicatedJobs"
    assert validate_replicated_jobs(runtime_with(*launcher_and_default_jobs(1))) == ()


def test_jobs_with_an_unknown_ancestor_are_not_checked() -> None:
    # upstream: "valid replicatedJobs with unknown user-specified ancestor"
    jobs = [make.job(name, ancestor="user-specified", replicas=2) for name in ("node", "a", "b")]
    assert validate_replicated_jobs(runtime_with(*jobs)) == ()


def test_every_ancestor_job_with_replicas_other_than_1_is_invalid() -> None:
    # upstream: "invalid replicas" (the launcher has no known ancestor and is not checked)
    errors = validate_replicated_jobs(runtime_with(*launcher_and_default_jobs(2)))
    assert [e.path for e in errors] == [f"{JOBS}[1].replicas", f"{JOBS}[2].replicas", f"{JOBS}[3].replicas"]
    assert str(errors[0]) == f"{JOBS}[1].replicas: Invalid value: 2: always must be 1"


@pytest.mark.parametrize(
    ("ancestor", "expected_container"),
    [
        ("dataset-initializer", "dataset-initializer"),
        ("model-initializer", "model-initializer"),
        ("trainer", "node"),
    ],
)
def test_an_ancestor_job_without_its_container_is_invalid(ancestor: str, expected_container: str) -> None:
    # upstream: "missing required container in replicatedJobs"
    job = make.job("x", ancestor=ancestor, containers=[make.container("test")])
    (error,) = validate_replicated_jobs(runtime_with(job))
    assert error.path == f"{JOBS}[0].template.spec.template.spec.containers"
    assert error.message == f"must contain the required container for the ancestor: {ancestor}"
    ok = make.job(
        "x", ancestor=ancestor, containers=[make.container("test"), make.container(expected_container)]
    )
    assert validate_replicated_jobs(runtime_with(ok)) == ()


def test_replicas_and_container_errors_are_both_reported_in_job_order() -> None:
    bad = make.job("node", ancestor="trainer", containers=[make.container("main")], replicas=3)
    assert paths(runtime_with(bad)) == [
        f"{JOBS}[0].replicas",
        f"{JOBS}[0].template.spec.template.spec.containers",
    ]


@pytest.mark.parametrize(
    "odd",
    [
        {},
        {"spec": None},
        {"spec": {"template": []}},
        {"spec": {"template": {"spec": {"replicatedJobs": [1, None]}}}},
        # a container name that is a list (unhashable) under an ancestor job
        {
            "spec": {
                "template": {
                    "spec": {
                        "replicatedJobs": [
                            make.job(
                                "node", ancestor=constants.ANCESTOR_TRAINER, containers=[{"name": ["node"]}]
                            )
                        ]
                    }
                }
            }
        },
    ],
)
def test_odd_shapes_never_raise(odd: dict[str, Any]) -> None:
    errors = validate_replicated_jobs(odd)
    assert all(error.path.endswith(".containers") for error in errors)


def test_a_training_runtime_is_checked_on_create_only() -> None:
    bad = runtime_with(make.job("node", ancestor="trainer", containers=[make.container("main")]))
    assert not validate_training_runtime(bad).ok
    assert validate_training_runtime(bad, old=bad).ok


DEPRECATED = {constants.LABEL_SUPPORT: constants.SUPPORT_DEPRECATED}


def test_a_cluster_training_runtime_labelled_deprecated_warns_on_create() -> None:
    # upstream: TestClusterTrainingRuntimeValidateCreate "support=deprecated" and "no deprecation label"
    rt = runtime_with(
        *make.default_jobs(),
        kind=constants.CLUSTER_TRAINING_RUNTIME_KIND,
        name="test-runtime",
        labels=DEPRECATED,
    )
    verdict = validate_cluster_training_runtime(rt)
    assert verdict.ok
    assert verdict.warnings == (
        'ClusterTrainingRuntime "test-runtime" is deprecated and will be removed in a future release of '
        f"Kubeflow Trainer. See runtime deprecation policy: {constants.RUNTIME_DEPRECATION_POLICY_URL}",
    )
    plain = runtime_with(*make.default_jobs(), kind=constants.CLUSTER_TRAINING_RUNTIME_KIND)
    assert validate_cluster_training_runtime(plain).warnings == ()


def test_a_cluster_training_runtime_is_checked_on_update_without_the_warning() -> None:
    bad = runtime_with(
        make.job("node", ancestor="trainer", containers=[make.container("main")]),
        kind=constants.CLUSTER_TRAINING_RUNTIME_KIND,
        labels=DEPRECATED,
    )
    verdict = validate_cluster_training_runtime(bad, old=bad)
    assert [e.path for e in verdict.errors] == [f"{JOBS}[0].template.spec.template.spec.containers"]
    assert verdict.warnings == ()


@pytest.mark.parametrize("kind", [constants.TRAINING_RUNTIME_KIND, constants.CLUSTER_TRAINING_RUNTIME_KIND])
def test_a_runtime_whose_pods_the_api_server_would_refuse_is_refused_naming_the_field(kind: str) -> None:
    # Not upstream's (it admits them, and the API server refuses the Jobs' pods later, far from the
    # runtime): env var names and container resources are checked with the API server's rules.
    container = make.container(
        "node", env=[{"name": "A=B", "value": "1"}], resources={"requests": {"cpu": "-1", "a b": "1"}}
    )
    rt = runtime_with(make.job("node", ancestor="trainer", containers=[container]), kind=kind)
    validate = (
        validate_training_runtime
        if kind == constants.TRAINING_RUNTIME_KIND
        else (validate_cluster_training_runtime)
    )
    pod = f"{JOBS}[0].template.spec.template.spec.containers[0]"
    assert [str(e) for e in validate(rt).errors][:2] == [
        f'{pod}.env[0].name: Invalid value: "A=B": a valid environment variable name must consist only of '
        "printable ASCII characters other than '='",
        f'{pod}.resources.requests[cpu]: Invalid value: "-1": must be greater than or equal to 0',
    ]
    assert [e.path for e in validate(rt).errors][2:] == [f"{pod}.resources.requests[a b]"] * 2
