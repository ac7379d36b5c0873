"""The API's well-known strings are upstream's exact values; views read wire dicts with the CRD defaults."""

from __future__ import annotations

from typing import Any

import pytest

from runtime.api import constants
from runtime.api.views import MLPolicyView, RuntimeView, TrainJobView, find_condition


def test_group_version_and_kinds() -> None:
    assert constants.API_VERSION == "trainer.kubeflow.org/v1alpha1"
    assert (
        constants.TRAINJOB_KIND,
        constants.TRAINING_RUNTIME_KIND,
        constants.CLUSTER_TRAINING_RUNTIME_KIND,
    ) == ("TrainJob", "TrainingRuntime", "ClusterTrainingRuntime")
    assert not hasattr(constants, "OPTIMIZATION_JOB_KIND")  # only a proposal in upstream v2.3.0
    assert constants.JOBSET_API_VERSION == "jobset.x-k8s.io/v1alpha2"


def test_labels_steps_and_names_the_sdk_and_manifests_depend_on() -> None:
    # What the SDK and the shipped manifests match on.
    assert constants.LABEL_TRAINJOB_ANCESTOR == "trainer.kubeflow.org/trainjob-ancestor-step"
    assert constants.LABEL_FRAMEWORK == "trainer.kubeflow.org/framework"
    assert constants.ANCESTOR_STEPS == ("dataset-initializer", "model-initializer", "trainer")
    assert constants.NODE == "node"
    assert constants.LAUNCHER == "launcher"
    assert constants.CONTAINER_TRAINER_PORT == 29500
    assert constants.LABEL_SUPPORT == "trainer.kubeflow.org/support"
    assert constants.LABEL_WEBHOOK_VALIDATION == "trainer.kubeflow.org/webhook-validation"
    assert constants.RESOURCE_IN_USE_FINALIZER == "trainer.kubeflow.org/resource-in-use"
    assert (constants.DATASET_MOUNT_PATH, constants.MODEL_MOUNT_PATH) == (
        "/workspace/dataset",
        "/workspace/model",
    )


def test_managed_by_field_managers_and_snapshot_names() -> None:
    assert constants.MANAGED_BY_VALUES == (
        "trainer.kubeflow.org/trainjob-controller",
        "kueue.x-k8s.io/multikueue",
    )
    assert constants.FIELD_MANAGER == "trainer"
    assert constants.STATUS_SERVER_FIELD_MANAGER == "trainer-status"
    assert f"demo{constants.RUNTIME_SNAPSHOT_SUFFIX}" == "demo-runtime-snapshot"
    assert constants.RUNTIME_SNAPSHOT_KEY == "runtime"


def test_condition_vocabulary() -> None:
    # The condition vocabulary of the TrainJob status.
    assert (constants.CONDITION_SUSPENDED, constants.CONDITION_COMPLETE, constants.CONDITION_FAILED) == (
        "Suspended",
        "Complete",
        "Failed",
    )
    assert (constants.REASON_SUSPENDED, constants.MESSAGE_SUSPENDED) == ("Suspended", "TrainJob is suspended")
    assert (constants.REASON_RESUMED, constants.MESSAGE_RESUMED) == ("Resumed", "TrainJob is resumed")
    assert (constants.REASON_DEADLINE_EXCEEDED, constants.MESSAGE_DEADLINE_EXCEEDED) == (
        "DeadlineExceeded",
        "TrainJob exceeded its active deadline",
    )
    assert constants.REASON_RUNTIME_NOT_SUPPORTED == "TrainingRuntimeNotSupported"


def trainjob(spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": constants.API_VERSION,
        "kind": "TrainJob",
        "metadata": {"name": "demo", "namespace": "team", "uid": "u-1", "labels": {"a": "b"}},
    }
    if spec is not None:
        obj["spec"] = spec
    if status is not None:
        obj["status"] = status
    return obj


def test_a_trainjob_that_skipped_the_api_server_reads_with_the_crd_defaults() -> None:
    view = TrainJobView(trainjob({"runtimeRef": {"name": "torch-distributed"}}))
    assert view.runtime_ref_name == "torch-distributed"
    assert view.runtime_ref_kind == "ClusterTrainingRuntime"
    assert view.runtime_ref_api_group == "trainer.kubeflow.org"
    assert view.suspend is False
    assert view.managed_by == "trainer.kubeflow.org/trainjob-controller"
    assert view.is_managed_by_trainer
    assert view.active_deadline_seconds is None
    assert view.trainer is None and view.initializer is None
    assert view.runtime_patches == ()
    assert (view.name, view.namespace, view.uid, view.labels) == ("demo", "team", "u-1", {"a": "b"})


def test_explicit_values_win_over_defaults() -> None:
    view = TrainJobView(
        trainjob(
            {
                "runtimeRef": {"name": "r", "kind": "TrainingRuntime", "apiGroup": "example.com"},
                "suspend": True,
                "managedBy": "kueue.x-k8s.io/multikueue",
                "activeDeadlineSeconds": 10,
                "trainer": {"numNodes": 2},
            }
        )
    )
    assert view.runtime_ref_kind == "TrainingRuntime"
    assert view.runtime_ref_api_group == "example.com"
    assert view.suspend is True
    assert not view.is_managed_by_trainer
    assert view.active_deadline_seconds == 10
    assert view.trainer == {"numNodes": 2}


def test_an_empty_object_reads_without_raising() -> None:
    view = TrainJobView({})
    assert (view.name, view.runtime_ref_name, view.conditions, view.jobs_status) == ("", "", (), ())
    assert not view.is_finished


@pytest.mark.parametrize(
    ("conditions", "complete", "failed"),
    [
        ([], False, False),
        ([{"type": "Complete", "status": "True"}], True, False),
        ([{"type": "Complete", "status": "False"}], False, False),
        ([{"type": "Suspended", "status": "True"}, {"type": "Failed", "status": "True"}], False, True),
    ],
    ids=["no conditions", "complete", "complete false is not finished", "failed"],
)
def test_finished_means_complete_or_failed_true(
    conditions: list[dict[str, Any]], complete: bool, failed: bool
) -> None:
    view = TrainJobView(trainjob({"runtimeRef": {"name": "r"}}, {"conditions": conditions}))
    assert (view.is_complete, view.is_failed, view.is_finished) == (complete, failed, complete or failed)


def test_find_condition_returns_the_condition_of_that_type() -> None:
    conditions: list[Any] = [{"type": "Suspended", "status": "True"}, {"type": "Failed", "status": "False"}]
    assert find_condition(conditions, "Failed") == {"type": "Failed", "status": "False"}
    assert find_condition(conditions, "Complete") is None


def test_views_never_copy_or_change_the_object() -> None:
    obj = trainjob({"runtimeRef": {"name": "r"}})
    before = repr(obj)
    view = TrainJobView(obj)
    _ = (view.runtime_ref_kind, view.managed_by, view.suspend, view.conditions)
    assert repr(obj) == before
    assert view.obj is obj


def test_ml_policy_defaults_match_the_schema_defaults() -> None:
    mpi = MLPolicyView({"mpi": {}})
    assert mpi.source == "mpi"
    assert mpi.num_nodes == 1
    assert mpi.mpi_num_proc_per_node == 1
    assert mpi.mpi_implementation == "OpenMPI"
    assert mpi.mpi_ssh_auth_mount_path == "/root/.ssh"
    assert mpi.mpi_run_launcher_as_node is False
    flux = MLPolicyView({"numNodes": 3, "flux": {"numProcPerNode": 4}})
    assert (flux.source, flux.num_nodes, flux.flux_num_proc_per_node) == ("flux", 3, 4)


def test_no_ml_policy_is_the_plain_ml_case() -> None:
    assert MLPolicyView(None).source is None
    assert MLPolicyView({"numNodes": 2}).source is None
    assert MLPolicyView(None).num_nodes == 1


def test_runtime_view_reads_framework_policies_and_template() -> None:
    runtime = {
        "apiVersion": constants.API_VERSION,
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "torch-distributed", "labels": {constants.LABEL_FRAMEWORK: "torch"}},
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "podGroupPolicy": {"coscheduling": {}},
            "template": {"spec": {"replicatedJobs": []}},
        },
    }
    view = RuntimeView(runtime)
    assert view.is_cluster_scoped
    assert view.framework == "torch"
    assert view.ml_policy.source == "torch"
    assert view.coscheduling_schedule_timeout_seconds == 60
    assert view.template == {"spec": {"replicatedJobs": []}}
    assert RuntimeView({"kind": "TrainingRuntime", "spec": {}}).coscheduling_schedule_timeout_seconds is None
