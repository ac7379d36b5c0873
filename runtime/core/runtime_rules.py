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

And, not upstream's either: the runtime snapshot every TrainJob of the runtime writes first (a ConfigMap
holding the runtime's YAML, `runtime.core.snapshot`) fits in a ConfigMap, whose data the API server limits
to 1 MiB (`Too long` at `spec`, "no TrainJob can run this runtime: its runtime snapshot would be N bytes of
YAML, more than a ConfigMap holds (1048576 bytes)"). The API server stores runtimes up to etcd's 1.5 MiB, and
upstream's TrainJobs of such a runtime then fail to create their snapshot, retried for ever; refusing the
runtime names the problem where it is made, as the checks above do. The estimate is conservative (it
counts a `resourceVersion` of 20 digits, which the API server has yet to set): a runtime within 20 bytes of
the limit may be refused though its stored snapshot would fit.

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
from runtime.core.snapshot import admitted_snapshot
from runtime.framework.validation import ErrorType, FieldError, Validation

__all__ = [
    "REPLICAS_MESSAGE",
    "cluster_training_runtime_deprecation_warning",
    "snapshot_size_errors",
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
        names = {name for c in containers if isinstance(name := as_dict(c).get("name"), str)}
        if _REQUIRED_CONTAINER[ancestor] not in names:
            errors.append(
                FieldError.invalid(
                    f"{_JOBS_PATH}[{index}].template.spec.template.spec.containers",
                    containers,
                    _CONTAINER_MESSAGE.format(ancestor=ancestor),
                )
            )
    return tuple(errors)


def snapshot_size_errors(runtime: Mapping[str, Any], kind: str) -> tuple[FieldError, ...]:
    """`Too long` at `spec` when the runtime snapshot of `runtime` (of `kind`), once stored, would be more
    than a ConfigMap holds, or more YAML nodes than it is read back with (`runtime.core.snapshot.
    admitted_snapshot`: conservative by the few bytes of a `resourceVersion` the API server has yet to
    set)."""
    problem = admitted_snapshot(runtime, kind).problem()
    if problem is None:
        return ()
    return (FieldError(path="spec", type=ErrorType.TOO_LONG, message=f"{_NO_TRAINJOB_CAN_RUN}: {problem}"),)


_NO_TRAINJOB_CAN_RUN = "no TrainJob can run this runtime"


def _runtime_errors(runtime: Mapping[str, Any], kind: str) -> tuple[FieldError, ...]:
    errors = (*validate_replicated_jobs(runtime), *runtime_errors(as_dict(runtime.get("spec"))))
    return (*errors, *snapshot_size_errors(runtime, kind))


def validate_training_runtime(new: Mapping[str, Any], old: Mapping[str, Any] | None = None) -> Validation:
    """The TrainingRuntime webhook: the rules on CREATE (`old` None); an UPDATE is admitted unchecked."""
    if old is not None:
        return Validation()
    return Validation.of(_runtime_errors(new, constants.TRAINING_RUNTIME_KIND))


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
    errors = _runtime_errors(new, constants.CLUSTER_TRAINING_RUNTIME_KIND)
    return Validation.of(errors, [warning] if warning else [])
