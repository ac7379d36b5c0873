"""What a TrainingRuntime and a ClusterTrainingRuntime must satisfy beyond their CRD schemas: the checks of
their validating admission webhooks, as pure functions (the webhook and `trainer-render` both run them).

Go origin: kubeflow/trainer `pkg/webhooks/trainingruntime_webhook.go` (`validateReplicatedJobs` and its
messages) and `clustertrainingruntime_webhook.go` (the deprecation warning).

The rules, for each `spec.template.spec.replicatedJobs[i]` whose template carries the label
`trainer.kubeflow.org/trainjob-ancestor-step` with a value in {`dataset-initializer`, `model-initializer`,
`trainer`} (other values, and jobs without the label, are not checked):
- `replicas` must be 1 (the CRD defaults an absent one to 1 before the webhook sees it): `Invalid` at
  `spec.template.spec.replicatedJobs[i].replicas`, "always must be 1";
- the pod must have the ancestor's container (`node` for `trainer`, else the container named like the step):
  `Invalid` at `spec.template.spec.replicatedJobs[i].template.spec.template.spec.containers`, "must contain
  the required container for the ancestor: <ancestor>".

And, not upstream's: every container's env var names and resources are values the pipeline can build
(`runtime.buildable.runtime_errors`: the API server's rules for the pods the runtime's Jobs will create,
with its messages), so a runtime that no TrainJob could run is refused when it is written, naming the field,
rather than each TrainJob that references it (which the TrainJob webhook still refuses, at
`spec.runtimeRef`, for a runtime that skipped this check: an UPDATE of a TrainingRuntime is not checked).

When each runs (upstream's choice, kept): a TrainingRuntime is checked on CREATE only (an UPDATE is not
checked); a ClusterTrainingRuntime on CREATE and UPDATE, and its CREATE also warns when it is labelled
`trainer.kubeflow.org/support: deprecated`. DELETE is never checked.

Guarantees: never raises, whatever the shape of the object (a field of the wrong type is skipped: the CRD
schema rejects it first); errors come in replicated-job order, the replicas error before the container one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runtime.api import constants
from runtime.api.views import as_dict, as_list, replicated_job_pod_spec
from runtime.buildable import runtime_errors
from runtime.framework.validation import FieldError, Validation

__all__ = [
    "REPLICAS_MESSAGE",
    "cluster_training_runtime_deprecation_warning",
    "validate_cluster_training_runtime",
    "validate_replicated_jobs",
    "validate_training_runtime",
]

REPLICAS_MESSAGE = "always must be 1"
_CONTAINER_MESSAGE = "must contain the required container for the ancestor: {ancestor}"
_REQUIRED_CONTAINER = {
    constants.ANCESTOR_TRAINER: constants.NODE,
    constants.MODEL_INITIALIZER: constants.MODEL_INITIALIZER,
    constants.DATASET_INITIALIZER: constants.DATASET_INITIALIZER,
}
_JOBS_PATH = "spec.template.spec.replicatedJobs"


def validate_replicated_jobs(runtime: Mapping[str, Any]) -> tuple[FieldError, ...]:
    """The replicated-job rules of the module doc over a (Cluster)TrainingRuntime object."""
    template_spec = as_dict(as_dict(as_dict(runtime.get("spec")).get("template")).get("spec"))
    errors: list[FieldError] = []
    for index, item in enumerate(as_list(template_spec.get("replicatedJobs"))):
        job = as_dict(item)
        job_template = as_dict(job.get("template"))
        ancestor = as_dict(as_dict(job_template.get("metadata")).get("labels")).get(
            constants.LABEL_TRAINJOB_ANCESTOR
        )
        if not isinstance(ancestor, str) or ancestor not in _REQUIRED_CONTAINER:
            continue
        replicas = job.get("replicas", 1)
        if replicas != 1:
            errors.append(FieldError.invalid(f"{_JOBS_PATH}[{index}].replicas", replicas, REPLICAS_MESSAGE))
        containers = as_list(replicated_job_pod_spec(job).get("containers"))
        names = {as_dict(c).get("name") for c in containers}
        if _REQUIRED_CONTAINER[ancestor] not in names:
            errors.append(
                FieldError.invalid(
                    f"{_JOBS_PATH}[{index}].template.spec.template.spec.containers",
                    containers,
                    _CONTAINER_MESSAGE.format(ancestor=ancestor),
                )
            )
    return tuple(errors)


def _runtime_errors(runtime: Mapping[str, Any]) -> tuple[FieldError, ...]:
    return (*validate_replicated_jobs(runtime), *runtime_errors(as_dict(runtime.get("spec"))))


def validate_training_runtime(new: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> Validation:
    """The TrainingRuntime webhook: the rules on CREATE (`old` None); an UPDATE is admitted unchecked."""
    if old is not None:
        return Validation()
    return Validation.of(_runtime_errors(new))


def cluster_training_runtime_deprecation_warning(runtime: Mapping[str, Any]) -> str | None:
    """The CREATE warning for a ClusterTrainingRuntime labelled `trainer.kubeflow.org/support: deprecated`."""
    metadata = as_dict(runtime.get("metadata"))
    if as_dict(metadata.get("labels")).get(constants.LABEL_SUPPORT) != constants.SUPPORT_DEPRECATED:
        return None
    return (
        f'ClusterTrainingRuntime "{metadata.get("name", "")}" is deprecated and will be removed in a future '
        "release of Kubeflow Trainer. See runtime deprecation policy: "
        f"{constants.RUNTIME_DEPRECATION_POLICY_URL}"
    )


def validate_cluster_training_runtime(
    new: Mapping[str, Any], old: Mapping[str, Any] | None = None
) -> Validation:
    """The ClusterTrainingRuntime webhook: the rules on CREATE and UPDATE, a deprecation warning on CREATE."""
    warning = cluster_training_runtime_deprecation_warning(new) if old is None else None
    return Validation.of(_runtime_errors(new), [warning] if warning else [])
